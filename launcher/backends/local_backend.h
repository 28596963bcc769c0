// The local backend: the same rendered batch script runs on this machine with no Slurm at all,
// as if Slurm had given it a one-node allocation. It is what a new user meets first
// (`hpclaunch run --preset 1n2g --local` trains a tiny model on CPU).
//
// How a job runs (everything lives in its run directory, <runs_root>/<job_name>-<id>/):
//   submit     plans the job (local_plan.h: paths, limits, the SLURM_* variables of a one-node
//              allocation), allocates an id (job_counter.h), writes script.sbatch, the request's
//              files, local-job.json (local_job.h) and bin/srun, bin/scontrol (symlinks to the
//              hpclaunch executable), then starts a detached supervisor:
//   supervisor `hpclaunch __local-job RUN_DIR` in its own session (local_supervisor.h): it
//              outlives the submitting process and its Ctrl-C, runs `bash script.sbatch`, keeps
//              the time limit, obeys cancel and `scontrol requeue`, and records the job's state
//              in local-state.json.
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
#include "backends/local_job.h"
#include "backends/local_plan.h"
#include "backends/process_session.h"
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
  void signal_tasks(const std::string& job_id, const std::string& signal) override;

  const std::string& runs_root() const { return runs_root_; }
  // The run directory of a local job under runs_root, "" when there is none.
  std::string run_dir_of(const std::string& job_id) const;

 private:
  // What this machine contributes to a job's plan (local_plan.h), read now.
  LocalSubmitContext submit_context() const;
  // The absolute path of the hpclaunch executable; throws BackendError when it cannot be run.
  std::string executable(const std::string& submit_dir) const;

  std::string runs_root_;
  LocalBackendOptions options_;
  std::map<std::string, std::string> submitted_;  // job id -> run dir, of jobs submitted here
};

// The entry points of the hpclaunch binary other than its command line, for main():
//   argv[0] named srun or scontrol -> the local shims (local_srun.h);
//   hpclaunch __local-job RUN_DIR READY_FD -> the job supervisor.
// Returns the exit status, or nullopt when argv is an ordinary hpclaunch command line.
std::optional<int> run_local_entry_point(const std::vector<std::string>& argv);

}  // namespace hpc
