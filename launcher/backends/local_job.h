// A local job's files in its run directory: what to run (local-job.json, written by submit and
// read by the supervisor) and how it goes (local-state.json, written by the supervisor and read
// by status, cancel and the scontrol shim). See local_backend.h for how a local job runs.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>

namespace hpc {

// The files of a run directory.
inline constexpr const char* kLocalJobFile = "local-job.json";      // written by submit
inline constexpr const char* kLocalStateFile = "local-state.json";  // written by the supervisor
inline constexpr const char* kLocalRequeueFile = "local-requeue";   // written by scontrol requeue

// What the supervisor runs: local-job.json.
struct LocalJob {
  std::string job_id, job_name, run_dir, runs_root, script, workdir;
  std::string stdout_path, stderr_path;
  bool open_mode_append = false;
  long time_limit_seconds = -1;               // -1: no limit
  int signal_number = 0, signal_seconds = 0;  // --signal=[B:]SIG@SECONDS; 0: none
  bool signal_batch_only = false;
  bool requeue_allowed = true;
  int max_restarts = 5;
  int kill_wait_seconds = 5;
  double submit_time = 0;
  std::map<std::string, std::string> env;  // added to the submitter's environment
};
// Throws BackendError when the file cannot be written.
void write_local_job(const LocalJob& job);
// nullopt when the run directory has no readable local-job.json.
std::optional<LocalJob> read_local_job(const std::string& run_dir);

// What local-state.json says about a job.
struct LocalJobState {
  std::string job_id;
  std::string state = "PENDING";  // PENDING RUNNING COMPLETING REQUEUED COMPLETED FAILED
                                  // CANCELLED TIMEOUT
  std::string detail;
  pid_t supervisor_pid = 0;
  pid_t pid = 0;   // the batch shell
  pid_t pgid = 0;  // its process group = session id: every process of the job
  double submit_time = 0, start_time = 0, end_time = 0;  // seconds since the epoch; 0: not yet
  int exit_code = -1;
  int exit_signal = 0;
  int restarts = 0;
  int max_restarts = 0;
};
std::optional<LocalJobState> read_local_state(const std::string& run_dir);
// Throws BackendError when the file cannot be written.
void write_local_state(const std::string& run_dir, const LocalJobState& state);
bool is_local_final_state(const std::string& state);

// The run directory of job `job_id` under `runs_root` ("" when absent).
std::string find_local_run_dir(const std::string& runs_root, const std::string& job_id);

// Whether `pid` is the live supervisor of `run_dir` (not a recycled pid, not a zombie).
bool local_supervisor_alive(pid_t pid, const std::string& run_dir);

// Seconds since the epoch, as the state files record times.
double now_epoch();

}  // namespace hpc
