// A run directory's record (run.json): enough to rerun or audit a job, and to find its backend
// again for status/logs/cancel. Lives in the local run directory: runs/<name>-<job id>/.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "text.h"  // run_dir_name

#include <nlohmann/json.hpp>

#include "follow/program_state.h"

namespace hpc {

struct RunRecord {
  std::string job_id;
  std::string name;         // job name
  std::string backend;      // slurm, ssh, local
  std::string host;         // where it was submitted
  std::string ssh_target;   // for ssh: the --host value to reconnect with
  std::string ssh_jump;     // for ssh: --jump, if one was given (hops read as data)
  std::string ssh_config;   // for ssh: --ssh-config, if one was given
  std::string known_hosts;  // for ssh: --known-hosts, if one was given
  std::string run_dir;      // on the backend's host
  std::string stdout_path;  // the job's log on the backend's host, as Slurm named it
  std::string local_dir;    // this machine's copy of the record
  std::string submit_command;
  std::string submitted_at;  // ISO 8601, UTC
  std::string hpclaunch_version;
  std::string spec_hash;
  std::string preset, cluster, strategy;  // strategy: hpctrain's, "" with another launch
  std::string launch = "hpctrain";        // hpctrain, srun or torchrun
  int world_size = 0;
  long max_steps = 0;     // from the trainer's --max-steps, 0 if unknown
  int max_requeues = -1;  // job.max_requeues (0 without job.signal_seconds), -1 if unknown
  int hang_seconds = 0;   // job.hang_seconds: follow ends a job without progress; 0 off
  int start_seconds = 0;  // job.start_seconds (written with hang_seconds); 0: no start bound
  std::string generator_command;
  std::string code_tree;     // --sync: the uploaded tree's hash
  std::string code_dir;      // --sync: where the job ran (on the login node)
  std::string git_revision;  // --sync: HEAD of the uploaded work tree, "+dirty" if changed
  std::string array;  // a job array's indexes ("0-9%2"); its tasks' run directories: run_dir_N
  // The work tree it was submitted from (follow/program_state.h); its `git diff --binary HEAD`
  // is program.diff beside run.json. program_recorded: false in records older than the field.
  ProgramState program;
  bool program_recorded = false;
  std::string rerun_of;  // `hpclaunch rerun`: the run directory (local) this run repeats

  nlohmann::json to_json() const;
  static RunRecord from_json(const nlohmann::json& j);
};

// Writes <local_dir>/run.json atomically.
void write_run_record(const RunRecord& record);

// Finds the run for `job` (a job id, a run directory name, or a path to one) under runs_root.
// With several runs of one job id (different backends), the newest wins. Throws UserError when
// `job` is a run directory, or names one (NAME-JOBID), whose run.json cannot be read.
std::optional<RunRecord> find_run(const std::string& runs_root, const std::string& job);

// All runs under runs_root, oldest first. A run directory whose run.json is there but cannot be
// read (not a regular file, over 4 MiB, bad JSON, not an object) is left out, and its one line
// added to `problems`.
std::vector<RunRecord> list_runs(const std::string& runs_root,
                                 std::vector<std::string>* problems = nullptr);

// <dir>/run.json through the input reader (json_file.h), checked to be a JSON object. Throws
// UserError naming the file and what is wrong with it.
RunRecord read_run_record(const std::filesystem::path& dir);

// The state a job ended in, as `run`, `logs -f` or `status` last saw it, kept in
// <local_dir>/final_state so that `list` shows it without asking the scheduler once per row.
// Only Slurm's state words are kept (capital letters and '_'): anything else in the file reads
// as nothing (a damaged or edited file never reaches the terminal).
void write_final_state(const std::string& local_dir, const std::string& state);
std::string read_final_state(const std::string& local_dir);  // "" when none was kept

std::string utc_now_iso8601();

}  // namespace hpc
