// The supervisor of one local job: `hpclaunch __local-job RUN_DIR READY_FD`, detached from the
// submitting process. Enters: a run directory with local-job.json (local_job.h). Leaves: the
// job's output files and local-state.json, rewritten at each change of state.
//
// It runs `bash script.sbatch` in a new session with the job's environment, keeps the time
// limit (--signal=[B:]SIG@N before it, TERM then KILL after KillWait at it), obeys cancel
// (SIGTERM to the supervisor) and `scontrol requeue` (the local-requeue file), and reaps
// whatever the job leaves behind (it is the job's subreaper).
#pragma once

#include <sys/types.h>

#include <string>

namespace hpc {

struct SupervisorStart {
  pid_t pid = 0;
  std::string error;  // "" when the supervisor reported that the job started
};

// Starts `executable __local-job run_dir 3` detached (double fork, setsid) and waits until it
// reports that the job runs, or why it could not start it (at most 20 s).
SupervisorStart start_local_supervisor(const std::string& executable, const std::string& run_dir);

// The supervisor's body, in the detached process. Returns its exit status.
int run_local_job_supervisor(const std::string& run_dir, int ready_fd);

}  // namespace hpc
