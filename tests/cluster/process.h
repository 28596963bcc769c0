// Runs a program and captures what it prints: the integration tests' way to call sbatch,
// scontrol, ssh and the project's own binaries. The launcher's run_command does the work (no
// shell: argv[0] is looked up in PATH and every argument reaches the program as written, so a
// test's "$(touch /tmp/x)" stays text); a result here also knows its command line, for messages.
#pragma once

#include <string>
#include <vector>

#include "subprocess.h"

namespace hpc::test {

// stdin_data (else /dev/null-like empty input), timeout (then the program's process group gets
// SIGKILL), env ("NAME=value" added to or replacing ours), cwd.
using ProcessOptions = hpc::CommandOptions;

struct ProcessResult : hpc::CommandResult {
  std::string command;  // argv joined with spaces, for messages only
  // One line for a failed check: the command, how it ended, and the start of stderr.
  std::string summary() const;
};

// Runs argv (argv[0] searched in PATH) and waits for it, reading stdout and stderr as they come.
// Never throws for a failing program; throws std::invalid_argument for an empty argv.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// Pointers into `strings`, null-terminated, for execve; valid while `strings` lives unchanged.
std::vector<char*> c_strings(std::vector<std::string>& strings);

}  // namespace hpc::test
