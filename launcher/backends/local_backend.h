// The local backend: the same rendered batch script runs on this machine with no Slurm at all,
// as if Slurm had given it a one-node allocation. It is what a new user meets first
// (`hpclaunch run --preset 1n2g --local` trains a tiny model on CPU).
//
// How a job runs (everything lives in its run directory, <runs_root>/<job_name>-<id>/):
//   submit     allocates an id (<runs_root>/.local-jobs, under flock), writes script.sbatch, the
//              request's files, local-job.json (what to run) and bin/srun, bin/scontrol (symlinks
//              to the hpclaunch executable), then starts a detached supervisor:
//   supervisor `hpclaunch __local-job RUN_DIR` in its own session (it outlives the submitting
//              process and its Ctrl-C). It runs `bash script.sbatch` in a new session with the
//              SLURM_* variables of a one-node allocation, output to the job's output file(s),
//              keeps the time limit (--signal=B:USR1@N before it, TERM then KILL at it), obeys
//              cancel and `scontrol requeue`, and records the job in local-state.json.
//   srun       bin/srun (local_srun.h) spawns one process per task, each in its own process
//              group inside the job's session, so the whole job is one session id: that is what
//              cancel and the time limit signal, like Slurm signals a job's cgroup.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/sbatch_options.h"
#include "backends/slurm_filename.h"

namespace hpc {

struct LocalBackendOptions {
  // The hpclaunch executable: run as the supervisor and linked as bin/srun and bin/scontrol.
  // "" = this process's executable (/proc/self/exe); tests pass the built hpclaunch.
  std::string executable;
  int kill_wait_seconds = 5;  // SIGTERM .. SIGKILL on cancel and time limit (Slurm's KillWait)
  int max_restarts = 5;       // `scontrol requeue` at most this often (Slurm's MaxBatchRequeue)
  int cpus = 0;               // CPUs this machine may give a job; 0 = detect (affinity mask)
};

class LocalBackend : public Backend {
 public:
  // `runs_root` holds the run directories and the job id counter; used by status and cancel to
  // find a job's run directory, and by submit when the request names no runs_root.
  explicit LocalBackend(std::string runs_root, LocalBackendOptions options = {});

  std::string kind() const override { return "local"; }
  std::string host() const override { return "localhost"; }
  // Throws UserError for a script the local backend cannot run (more than one node, a bad
  // #SBATCH value, a missing working or output directory) with nothing submitted, and
  // BackendError when the job could not be started.
  SubmitResult submit(const SubmitRequest& request) override;
  JobStatus status(const std::string& job_id) override;
  LogChunk read_log(const std::string& path, uint64_t offset, size_t max_bytes) override;
  // SIGTERM to every process of the job, SIGKILL after kill_wait_seconds; a no-op for a
  // finished job. Throws BackendError for an id that is not a local job under runs_root.
  void cancel(const std::string& job_id) override;

  const std::string& runs_root() const { return runs_root_; }
  // The run directory of a local job under runs_root, "" when there is none.
  std::string run_dir_of(const std::string& job_id) const;

 private:
  std::string runs_root_;
  LocalBackendOptions options_;
  std::map<std::string, std::string> submitted_;  // job id -> run dir, of jobs submitted here
};

// ---- shared by the backend, the supervisor and the srun/scontrol shims --------------------

// The files of a run directory.
inline constexpr const char* kLocalJobFile = "local-job.json";      // written by submit
inline constexpr const char* kLocalStateFile = "local-state.json";  // written by the supervisor
inline constexpr const char* kLocalRequeueFile = "local-requeue";   // written by scontrol requeue

// The run directory of job `job_id` under `runs_root` ("" when absent).
std::string find_local_run_dir(const std::string& runs_root, const std::string& job_id);

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
void write_local_state(const std::string& run_dir, const LocalJobState& state);
bool is_local_final_state(const std::string& state);

// Whether `pid` is the live supervisor of `run_dir` (not a recycled pid, not a zombie).
bool local_supervisor_alive(pid_t pid, const std::string& run_dir);

// The live (non-zombie) processes whose session id is `sid`.
std::vector<pid_t> processes_in_session(pid_t sid);

// The entry points of the hpclaunch binary other than its command line, for main():
//   argv[0] named srun or scontrol -> the local shims (local_srun.h);
//   hpclaunch __local-job RUN_DIR READY_FD -> the job supervisor.
// Returns the exit status, or nullopt when argv is an ordinary hpclaunch command line.
std::optional<int> run_local_entry_point(const std::vector<std::string>& argv);

// The supervisor of one local job (see the top of this file). Returns its exit status.
int run_local_job_supervisor(const std::string& run_dir, int ready_fd);

}  // namespace hpc
