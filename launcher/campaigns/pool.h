// The job pool: many jobs submitted together (sweep points, tune candidates), at most K in
// flight, polled until each ends; a job that does not start in time, or runs past its bound, is
// cancelled and kept as a row with a message, never an abort. Used by sweep.cc and tune.cc.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "follow/jobs.h"
#include "spec/spec.h"

namespace hpc {

using PoolClock = std::chrono::steady_clock;

// One job of the pool: what to submit, and what became of it.
struct PoolJob {
  std::string key;  // names it in messages: "1n2g/ddp", "c3"
  Spec spec;
  std::string script;  // rendered from spec
  // From the job:
  std::string job_id, run_dir, log, spec_hash, state = "NOT_SUBMITTED", message;
  std::string nodes;     // the job's node list once it ran ("" before)
  bool started = false;  // seen RUNNING (or later)
  PoolClock::time_point waiting_since, running_since;
  // PREEMPTED / NODE_FAIL: the job stays active until requeue_settle_s has passed without
  // Slurm requeueing it (it then shows PENDING again).
  RequeueWatch requeue_watch;
  // "Invalid job id": believed (state LOST) only after it held for lost_grace_s.
  LostWatch lost_watch;
  long elapsed = -1;  // seconds, as the scheduler says; -1 unknown

  // Submitted and neither ended nor given up on (START_TIMEOUT, HUNG).
  bool active() const;
};

struct PoolLimits {
  int max_concurrent = 1;
  long start_timeout_s = 600;  // not running after this: cancelled, state START_TIMEOUT
  long run_timeout_s = 0;      // running longer than this: cancelled, state HUNG; 0: no bound
  double poll_interval_s = 1.0;
  double requeue_settle_s = 10;  // how long a PREEMPTED / NODE_FAIL job is watched for a requeue
  double lost_grace_s = 60;      // how long "Invalid job id" must hold before a job is LOST
};

struct PoolHooks {
  std::function<void(PoolJob&)> completed;  // a job reached COMPLETED: measure it
  std::function<void()> changed;            // a job was submitted or changed state: save
  std::function<void()> show;               // after every poll: draw the live table
};

// Submits the jobs without a job id in order (keeping at most max_concurrent active, the
// adopted ones included) and polls every active job until none is left. Submission failures
// become SUBMIT_FAILED rows. Returns false when Ctrl-C / SIGTERM stopped it: the jobs go on.
bool run_job_pool(Backend& backend, const BackendChoice& choice, const std::vector<PoolJob*>& jobs,
                  const PoolLimits& limits, const std::vector<std::string>& command,
                  const PoolHooks& hooks);

// The local backend runs one node: a spec with more nodes is refused up front (UserError naming
// `where` and the preset) instead of failing at submission. A job array (job.array) is refused
// on every backend: a point is one job.
void check_backend_fits(const std::string& backend_kind, const Spec& spec,
                        const std::string& where);

// A whole file on the backend's host; nullopt when it is not there.
std::optional<std::string> read_backend_file(Backend& backend, const std::string& path);

// The local time of day, HH:MM:SS: the prefix of the campaign commands' progress lines.
std::string now_hms();

}  // namespace hpc
