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

// Every command run_command starts ends with this process: it runs in a process group of its
// own, which the kernel kills with SIGKILL should this thread die first (PR_SET_PDEATHSIG, for
// the command itself) and which kill_running_commands() kills whole. Each has its timeout.
//
// Kills the process group of every command run_command is waiting for. Async-signal-safe.
void kill_running_commands();
// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT (those not ignored) that kill the
// running commands' process groups, then end this process as the signal would have. main()
// calls it once; a verb that handles a signal itself (follow, a sweep's pool) replaces the
// handler for a while and puts it back.
void end_commands_with_this_process();

// This process's environment with `overrides` ("NAME=value") added or replacing entries of the
// same name: what run_command gives a command.
std::vector<std::string> merged_environment(const std::vector<std::string>& overrides);

// `program` as it would be run: as given when it has a slash (if executable), else the first
// executable of that name in the directories of `path` (colon-separated); "" when there is none.
std::string find_in_path(const std::string& program, const std::string& path);

// Whether `program` is an executable somewhere on PATH.
bool program_on_path(const std::string& program);

}  // namespace hpc
