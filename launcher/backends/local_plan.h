// What a local job will be, decided before anything is written: the pure half of
// LocalBackend::submit. Enters: the submit request, its script's #SBATCH options and what the
// machine says (LocalSubmitContext). Leaves: where the job goes (LocalJobPlace) and the whole
// job description the supervisor will run (LocalJob: paths, limits, SLURM_* environment).
// Nothing here reads the file system or the clock, so every rule is unit-tested
// (local_plan_test.cc).
#pragma once

#include <string>

#include "backends/backend.h"
#include "backends/local_job.h"
#include "backends/sbatch_options.h"

namespace hpc {

// What the machine and the backend contribute.
struct LocalSubmitContext {
  std::string submit_dir;     // absolute: relative paths of the request start here
  std::string runs_root;      // the backend's runs root (absolute)
  int cpus = 1;               // CPUs this machine may give a job
  std::string user = "user";  // %u, SLURM_JOB_USER
  std::string submit_host = "localhost";
  unsigned uid = 0, gid = 0;
  int max_restarts = 5;       // `scontrol requeue` at most this often
  int kill_wait_seconds = 5;  // SIGTERM .. SIGKILL
  double submit_time = 0;     // seconds since the epoch
};

// Where a job goes, known before its id is.
struct LocalJobPlace {
  std::string runs_root;  // the request's runs_root, else the backend's
  std::string workdir;    // the request's workdir, else #SBATCH --chdir, else submit_dir
};

// Throws UserError for a script the local backend cannot run (more than one node) and
// BackendError for a request file name that would leave the run directory.
LocalJobPlace place_local_job(const SubmitRequest& request, const SbatchOptions& options,
                              const LocalSubmitContext& context);

// The job `job_id` as the supervisor will run it. Output patterns are the request's, else
// #SBATCH --output/--error, else slurm-%j.out, expanded and made absolute from the run
// directory. ntasks x cpus-per-task is capped at the machine's CPUs, as no allocation here
// could give more.
LocalJob plan_local_job(const SubmitRequest& request, const SbatchOptions& options,
                        const LocalSubmitContext& context, const LocalJobPlace& place,
                        const std::string& job_id);

}  // namespace hpc
