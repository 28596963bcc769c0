// Follow mode: watch a job through its states and stream its logs as they grow.
//
// States (Slurm's words): PENDING (with the reason: Priority, Resources, ...) -> RUNNING ->
// COMPLETING -> COMPLETED | FAILED | TIMEOUT | CANCELLED | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED;
// REQUEUED jobs go back to PENDING and are followed on under the same job id (their log is
// appended to: the batch script has --open-mode=append). A PREEMPTED or NODE_FAIL job is watched
// a little longer (kRequeueSettle) in case Slurm requeues it.
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "backends/backend.h"
#include "backends/exit_status.h"
#include "error.h"

namespace hpc {

// srun's line about the first task(s) that ended badly, as the job log has it:
//   "srun: error: node02: task 3: Killed"  ->  {"3", "node02", "Killed", false}
//   "srun: error: node01: tasks 0-1: Exited with exit code 1"  ->  {"0-1", "node01", ..., true}
struct TaskFailure {
  std::string ranks;  // srun's task ids are the global ranks (SLURM_PROCID)
  std::string node;
  std::string reason;
  bool several = false;
};
std::optional<TaskFailure> parse_srun_task_failure(const std::string& line);
// "rank 3 on node02 failed first (Killed)"
std::string describe_task_failure(const TaskFailure& f);

struct FollowOptions {
  bool follow = true;        // until the job ends; false: print the logs as they are now
  bool stream_logs = true;   // false: only states (hpclaunch status --watch)
  std::optional<int> rank;   // only lines srun labelled with this rank
  bool live_status = false;  // a redrawn status line (terminal) instead of timestamped lines
  bool cancel_on_interrupt = false;
  std::chrono::milliseconds log_interval{250};
  std::chrono::milliseconds state_interval{2000};
  std::string metrics_path;  // trainer's metrics (JSON lines) on the backend host; "" = none
  long max_steps = 0;        // for "step 120/1000"
  int max_requeues = -1;     // job.max_requeues, for "restart 1 of at most 3"; -1: unknown
  // How long a PREEMPTED/NODE_FAIL job is watched for Slurm requeueing it before follow ends.
  std::chrono::milliseconds requeue_settle{10000};
  std::string known_stdout_path;  // the log, when the scheduler no longer knows the job
  // With follow, "Invalid job id" for a job this follow has seen (or that was just submitted)
  // is believed only after it held for this long (backend.h LostWatch: a controller restart).
  bool just_submitted = false;
  std::chrono::milliseconds lost_grace{60000};
  // Without follow: unreachable-scheduler polls before giving up (BackendUnreachable, exit 69);
  // any other backend error ends it at once. With follow, a restart is waited out.
  int unreachable_tries = 3;
  // Hang detection (job.hang_seconds; follow/hang.h): when no rank made progress for this long,
  // say where the ranks are, ask them (kWhereSignalName), save hang-<time>.txt in
  // hang_report_dir and cancel the job (exit kHang). 0: off.
  int hang_seconds = 0;
  // The start's own bound (job.start_seconds): before any rank's first progress the job is
  // starting, and hang_seconds does not apply; when no rank started within this long, the job is
  // ended as above. 0: no bound on the start.
  int start_seconds = 0;
  int world_size = 0;                           // the ranks whose progress files are read
  std::string progress_dir;                     // <run dir>/progress on the backend's host
  std::string hang_report_dir;                  // this machine's run directory ("": not saved)
  std::chrono::milliseconds where_wait{10000};  // how long the ranks have to answer
  bool labels_are_nodes = false;  // launch torchrun: srun's labels are nodes, not ranks
  bool heartbeats = false;        // a program of one's own: read progress/heartbeat-N too
  // Sees every complete line of the job's logs, whatever --rank shows (the node check's line:
  // follow/excluded_nodes.h).
  std::function<void(const std::string&)> on_log_line;
  // Where the state the job ended in is kept for `list` (run_record.h write_final_state); ""
  // for a job that was not submitted from here.
  std::string final_state_dir;
};

// Follows until the job ends (or Ctrl-C) and returns the exit status for hpclaunch.
// Log lines go to `out` (stdout of the job) and `err` (its stderr and hpclaunch's own lines).
int follow_job(Backend& backend, const std::string& job_id, const FollowOptions& options,
               std::ostream& out, std::ostream& err);

// "1-02:03:04" / "02:03:04"
std::string format_duration(long seconds);

}  // namespace hpc
