// Running the cluster's commands (sbatch, scontrol, scancel, sacct) from the launcher: argv
// vectors, never a shell, both pipes drained, a timeout that kills the whole process group.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hpc {

struct CommandOptions {
  std::optional<std::string> stdin_data;  // else /dev/null
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  std::vector<std::string> env;  // "NAME=value", added to or replacing our environment
  bool env_only = false;         // true: `env` is the whole environment, nothing of ours
  std::string cwd;               // empty: ours
  // Names of our variables the command must get without their values appearing on any command
  // line or in any file (job.env_from_submit): a local command inherits them; over SSH they
  // travel on stdin ahead of stdin_data (ssh_host_io.cc).
  std::vector<std::string> pass_env;
  // Names removed from the environment the command gets (a local command only: over SSH the
  // command runs in the login shell's environment, not ours).
  std::vector<std::string> unset_env;
};

struct CommandResult {
  int exit_code = -1;   // exit status if it exited, else -1
  int term_signal = 0;  // signal that ended it, else 0
  bool timed_out = false;
  std::string spawn_error;  // set when it could not start (e.g. "sbatch: not found")
  std::string out, err;

  bool ok() const { return spawn_error.empty() && !timed_out && exit_code == 0; }
  // "sbatch exited with 1: sbatch: error: Batch job submission failed: ..." (one line).
  std::string summary(const std::string& program) const;
};

// Runs argv[0] (looked up in the PATH of the environment the command gets) and waits for it.
// Never throws for a failing program.
CommandResult run_command(const std::vector<std::string>& argv, const CommandOptions& options = {});

// This process's environment with `overrides` ("NAME=value") added or replacing entries of the
// same name: what run_command gives a command.
std::vector<std::string> merged_environment(const std::vector<std::string>& overrides);

// `program` as it would be run: as given when it has a slash (if executable), else the first
// executable of that name in the directories of `path` (colon-separated); "" when there is none.
std::string find_in_path(const std::string& program, const std::string& path);

// Whether `program` is an executable somewhere on PATH.
bool program_on_path(const std::string& program);

}  // namespace hpc
