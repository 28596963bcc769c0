#include "campaigns/pool.h"

#include <atomic>
#include <csignal>
#include <ctime>
#include <thread>

#include <fmt/core.h>

#include "error.h"
#include "shell.h"

namespace hpc {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_pool_interrupt(int) { g_interrupted = true; }

// Submits one job like `hpclaunch submit` does: run directory, run.json, no following.
void submit_one(Backend& backend, const BackendChoice& choice, PoolJob& j,
                const std::vector<std::string>& command) {
  RunRecord record = submit_job(backend, j.spec, j.script, choice, command);
  j.job_id = record.job_id;
  j.run_dir = record.run_dir;
  j.log = record.stdout_path;
  j.spec_hash = record.spec_hash;
  j.state = "PENDING";
  j.message.clear();
  j.started = false;
  j.waiting_since = PoolClock::now();
}

// Asks the backend about one active job and applies the bounds. True when its state changed.
bool poll_one(Backend& backend, PoolJob& j, const PoolLimits& limits, const PoolHooks& hooks) {
  JobStatus s;
  try {
    s = backend.status(j.job_id);
  } catch (const BackendError& e) {
    j.message = "status: " + printable_first_line(e.what());  // transient: ask again next time
    return false;
  }
  // A controller that restarts, or answers right after the submit, may not know the job for a
  // moment: ask again until the answer held for lost_grace_s (backend.h LostWatch).
  if (j.lost_watch.may_be_transient(s.found, std::chrono::duration<double>(limits.lost_grace_s))) {
    j.message = "status: not known to the scheduler right now; asking again";
    return false;
  }
  if (!s.found) s.state = "LOST";
  std::string before = j.state;
  if (!s.stdout_path.empty()) j.log = s.stdout_path;
  if (!s.nodes.empty()) j.nodes = s.nodes;
  j.elapsed = s.elapsed_seconds;
  j.state = s.state == "UNKNOWN" ? j.state : s.state;
  if (s.state != "PENDING" && s.state != "UNKNOWN" && !j.started) {
    j.started = true;
    j.running_since = PoolClock::now();
  }
  auto cancel = [&]() {
    try {
      backend.cancel(j.job_id);
    } catch (const BackendError&) {}
  };
  long running_for = -1;
  if (j.started && !s.terminal()) {
    running_for = static_cast<long>(
        std::chrono::duration_cast<std::chrono::seconds>(PoolClock::now() - j.running_since)
            .count());
    running_for = std::max(running_for, s.elapsed_seconds);
  }
  if (!j.started &&
      PoolClock::now() - j.waiting_since > std::chrono::seconds(limits.start_timeout_s)) {
    cancel();
    j.message = fmt::format("did not start within {} s (last state {}{}); cancelled it",
                            limits.start_timeout_s, s.state,
                            s.reason.empty() ? "" : ", reason " + s.reason);
    j.state = "START_TIMEOUT";
  } else if (limits.run_timeout_s > 0 && running_for > limits.run_timeout_s) {
    cancel();
    j.message =
        fmt::format("still running after {} s (the bound is {} s): hung? cancelled it; see the log",
                    running_for, limits.run_timeout_s);
    j.state = "HUNG";
  } else if (j.requeue_watch.may_be_requeued(
                 s.state, std::chrono::duration<double>(limits.requeue_settle_s))) {
    // Not final yet: Slurm may requeue it (PreemptMode=REQUEUE, --requeue), and then the same
    // job runs again and is measured as usual.
  } else if (s.state == "LOST" || s.terminal()) {
    if (j.state == "COMPLETED") {
      if (hooks.completed) hooks.completed(j);
    } else if (j.message.empty() || j.message.rfind("status:", 0) == 0) {
      j.message =
          j.state == "LOST" ? "the scheduler no longer knows the job" : "job ended " + j.state;
      if (s.exit_code > 0) j.message += fmt::format(" (exit code {})", s.exit_code);
      j.message += "; see the log";
    }
  }
  return j.state != before;
}

}  // namespace

bool PoolJob::active() const {
  if (job_id.empty() || state == "START_TIMEOUT" || state == "HUNG") return false;
  return !is_terminal_state(state) || requeue_watch.watching();
}

void check_backend_fits(const std::string& backend_kind, const Spec& spec,
                        const std::string& where) {
  if (!spec.job.array.empty()) {
    // A point is one job with one log and one tokens/s; an array is many jobs.
    throw UserError("job.array",
                    "\"" + comment_text(spec.job.array) +
                        "\" makes an array of jobs, but sweep and tune measure one job per point",
                    "remove job.array (--set job.array=null), or submit the array with "
                    "hpclaunch submit --array");
  }
  if (backend_kind != "local" || spec.shape.nodes <= 1) return;
  throw UserError(where,
                  fmt::format("preset {} has {} nodes, but the local backend runs one node",
                              comment_text(spec.preset), spec.shape.nodes),
                  "use 1-node presets (1n1g, 1n2g, ...) with --local, or submit to Slurm "
                  "(--backend slurm, --host)");
}

std::string now_hms() {
  std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", std::localtime(&t));
  return buf;
}

std::optional<std::string> read_backend_file(Backend& backend, const std::string& path) {
  std::string data;
  uint64_t offset = 0;
  for (int i = 0; i < 4096; ++i) {
    LogChunk chunk = backend.read_log(path, offset);
    if (!chunk.exists) return std::nullopt;
    if (chunk.data.empty()) break;
    data += chunk.data;
    offset = chunk.next_offset;
  }
  return data;
}

bool run_job_pool(Backend& backend, const BackendChoice& choice, const std::vector<PoolJob*>& jobs,
                  const PoolLimits& limits, const std::vector<std::string>& command,
                  const PoolHooks& hooks) {
  auto old_int = std::signal(SIGINT, on_pool_interrupt);
  auto old_term = std::signal(SIGTERM, on_pool_interrupt);
  g_interrupted = false;
  size_t next = 0;
  auto poll = std::chrono::milliseconds(static_cast<long>(limits.poll_interval_s * 1000));
  while (!g_interrupted) {
    int active = 0;
    for (const auto* j : jobs) active += j->active() ? 1 : 0;
    // Submit up to the limit, in order.
    while (active < limits.max_concurrent && next < jobs.size()) {
      PoolJob& j = *jobs[next++];
      if (!j.job_id.empty()) continue;  // kept or adopted from an earlier run
      try {
        submit_one(backend, choice, j, command);
        ++active;
      } catch (const BackendError& e) {
        j.state = "SUBMIT_FAILED";
        j.message = printable_first_line(e.what());
      } catch (const UserError& e) {
        j.state = "SUBMIT_FAILED";
        j.message = printable_first_line(e.what());
      }
      if (hooks.changed) hooks.changed();
    }
    bool changed = false;
    for (auto* j : jobs) {
      if (j->active() && poll_one(backend, *j, limits, hooks)) changed = true;
    }
    if (changed && hooks.changed) hooks.changed();
    if (hooks.show) hooks.show();
    bool busy = next < jobs.size();
    for (const auto* j : jobs) busy = busy || j->active();
    if (!busy) break;
    for (auto t = std::chrono::milliseconds(0); t < poll && !g_interrupted;
         t += std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  return !g_interrupted;
}

}  // namespace hpc
