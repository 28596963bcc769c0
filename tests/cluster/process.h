// Runs a program and captures what it prints: the integration tests' way to call sbatch,
// scontrol, ssh and the project's own binaries. No shell is involved: argv[0] is looked up in
// PATH and every argument reaches the program as written, so a test's "$(touch /tmp/x)" stays
// text.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hpc::test {

struct ProcessOptions {
  // Written to the program's stdin, which is then closed; without it stdin is /dev/null.
  std::optional<std::string> stdin_data;
  // After this long the program and everything in its process group get SIGKILL.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // "NAME=value" entries added to (or replacing those in) this process's environment.
  std::vector<std::string> env;
  // Working directory of the program; empty keeps ours.
  std::string cwd;
};

struct ProcessResult {
  int exit_code = -1;     // the exit status when the program exited, else -1
  int term_signal = 0;    // the signal that ended it, else 0 (SIGKILL after a timeout)
  bool timed_out = false;
  std::string spawn_error;  // why it could not be started (e.g. "No such file or directory")
  std::string out;
  std::string err;

  bool ok() const { return exit_code == 0 && spawn_error.empty() && !timed_out; }
  // One line for a failed check: the command, how it ended, and the start of stderr.
  std::string summary() const;
  std::string command;  // argv joined with spaces, for messages only
};

// Runs argv (argv[0] searched in PATH) and waits for it, reading stdout and stderr as they come
// so that neither pipe can fill up and block the program. Never throws for a failing program;
// throws std::invalid_argument for an empty argv.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// This process's environment with `overrides` ("NAME=value") replacing entries of the same name.
std::vector<std::string> merged_environment(const std::vector<std::string>& overrides);
// Pointers into `strings`, null-terminated, for execve; valid while `strings` lives unchanged.
std::vector<char*> c_strings(std::vector<std::string>& strings);

}  // namespace hpc::test
