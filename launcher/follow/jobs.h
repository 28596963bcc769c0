// The job verbs: run (render + submit + follow), submit, status, logs, cancel, list.
#pragma once

#include <cstdint>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/host.h"
#include "follow/run_record.h"
#include "render/render.h"
#include "spec/spec.h"

namespace hpc {

// Which backend, and how to reach it.
struct BackendChoice {
  std::string kind;        // "slurm", "ssh", "local"; "" = slurm if sbatch is here, else error
  std::string host;        // ssh: host or ~/.ssh/config alias
  std::string jump;        // ssh: jump hosts in front of it (--jump; SshHostOptions::jump)
  std::string ssh_config;  // ssh: config file (default ~/.ssh/config)
  // ssh_config came from a run.json, not from --ssh-config: read as data, no command in it runs
  // (SshHostOptions::config_from_record; docs/security.md).
  bool ssh_config_from_record = false;
  std::string known_hosts;  // ssh: known_hosts file (default ~/.ssh/known_hosts)
  bool accept_new_host_key = false;
  std::string runs_dir = "runs";  // run records on this machine (and the run dirs, but for ssh)
  std::string remote_runs_dir = "~/hpclaunch-runs";  // ssh: run directories on the login node
  // ssh: upload the working directory first and run the job in that copy
  // (backends/code_sync.h, docs/backends.md#code-sync).
  bool sync = false;
  std::string sync_list;  // a file naming the files; "" = git's list
  int64_t sync_max_file_size = 10 << 20;
  std::string sync_store = "~/.cache/hpclaunch/sync";
};

std::unique_ptr<Backend> make_backend(const BackendChoice& choice);

// The login node Slurm's commands run on: this machine, or choice.host over SSH (connected:
// host key and login checked). What SlurmBackend and `validate --live` work through.
std::unique_ptr<Host> make_login_host(const BackendChoice& choice);

struct RunOptions {
  bool follow = true;
  bool cancel_on_interrupt = false;
  std::optional<int> rank;
  // Before submitting (slurm and ssh): one `scontrol show partition` compared with the spec
  // (backends/preflight.h); a mismatch is bad input, nothing is submitted. --no-preflight.
  bool preflight = true;
  std::string rerun_of;  // hpclaunch rerun: the run directory repeated (run.json's rerun_of)
  // A line said once the job is submitted (rerun: which spec it ran): a submission that fails
  // is then one line, its error, alone.
  std::string submitted_note;
};

// Submits a rendered spec through `backend` and writes its run record (run.json, and for ssh a
// local copy of script and spec). Throws UserError / BackendError; nothing is left on failure.
// The program's git state (follow/program_state.h) is read from the working directory before
// submitting, and its diff written beside run.json as program.diff.
RunRecord submit_job(Backend& backend, const Spec& spec, const std::string& script,
                     const BackendChoice& choice, const std::vector<std::string>& command,
                     const std::string& rerun_of = "");

// Submits a rendered spec and, when options.follow, follows it. Returns hpclaunch's exit status.
int submit_and_follow(const Spec& spec, const std::string& script, const BackendChoice& choice,
                      const std::vector<std::string>& command, const RunOptions& options);

// A run from runs/ (by job id or directory name) with its backend; UserError if not found.
struct OpenedRun {
  RunRecord record;
  std::unique_ptr<Backend> backend;
};
OpenedRun open_run(const std::string& job, const BackendChoice& choice);

int show_status(const std::string& job, const BackendChoice& choice, bool as_json);
// The requeues line of `hpclaunch status`: "1 of at most 3 (job.max_requeues)", or the count
// alone when the bound is unknown (max_requeues < 0: a job not submitted by hpclaunch).
std::string describe_requeues(int restarts, int max_requeues);
int show_logs(const std::string& job, const BackendChoice& choice, bool follow,
              std::optional<int> rank);
int cancel_job(const std::string& job, const BackendChoice& choice);
int list_jobs(const BackendChoice& choice, bool as_json, bool with_state);

// --max-steps N (or --max-steps=N) among the trainer's arguments; 0 if absent.
long max_steps_from_args(const std::vector<std::string>& args);

}  // namespace hpc
