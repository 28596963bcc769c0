// Where jobs go: one interface, three backends (slurm on this machine, ssh to a login node,
// local without Slurm). The pipeline is spec -> script -> Backend::submit -> follow.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text.h"

namespace hpc {

// A job's state as Slurm names it (JobState=), plus what follow needs to show and decide.
struct JobStatus {
  std::string id;
  std::string state = "UNKNOWN";  // PENDING RUNNING COMPLETING COMPLETED FAILED TIMEOUT CANCELLED
                                  // NODE_FAIL PREEMPTED REQUEUED OUT_OF_MEMORY ... or UNKNOWN
  std::string reason;             // Slurm's Reason= (Priority, Resources, ...), "" for None
  std::string nodes;              // NodeList= (a host list expression), "" before it runs
  long elapsed_seconds = -1;      // RunTime=
  int exit_code = -1;             // ExitCode=3:0 -> 3; -1 while unknown
  int exit_signal = 0;            // ExitCode=0:15 -> 15
  int restarts = 0;               // Restarts= (requeues)
  std::string stdout_path;        // StdOut=, patterns expanded
  std::string stderr_path;        // StdErr=
  std::string detail;             // extra words for the user (who cancelled it, when)
  bool found = true;              // false: the controller no longer knows the job
  // A job array (the id of the whole array): its tasks' states, and the state of the worst one
  // above (array_status). A task (123_4) or a plain job: empty.
  std::vector<std::pair<std::string, std::string>> array_tasks;  // "4" -> "FAILED" ("5-9": pending)
  std::string array_job_id, array_task_id;  // scontrol's ArrayJobId=, ArrayTaskId= ("" if none)

  // A state the job does not leave (REQUEUED jobs come back as PENDING).
  bool terminal() const;
};

// Slurm's JobState words that end a job.
bool is_terminal_state(const std::string& state);

// How long a condition has held, for the two watches below.
class HeldSince {
 public:
  // How long `holds` has been true, counted from the first call that found it so (that call
  // sets *started); nullopt, and the count reset, when it is false.
  std::optional<std::chrono::steady_clock::duration> held(bool holds, bool* started = nullptr) {
    if (!holds) {
      since_.reset();
      return std::nullopt;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!since_) {
      since_ = now;
      if (started) *started = true;
    }
    return now - *since_;
  }
  void reset() { since_.reset(); }
  bool holding() const { return since_.has_value(); }

 private:
  std::optional<std::chrono::steady_clock::time_point> since_;
};

// PREEMPTED and NODE_FAIL end a job unless Slurm requeues it (--requeue, PreemptMode=REQUEUE, or
// the batch script's own requeue): it then shows PENDING again, Restarts one higher. Such a state
// is watched for a settle time before it counts as final (follow, sweep and tune use this).
class RequeueWatch {
 public:
  // True while `state` is PREEMPTED/NODE_FAIL and was first seen less than `settle` ago; the
  // first call of such a watch sets *started. Any other state, or the end of the settle time,
  // ends the watch.
  bool may_be_requeued(const std::string& state, std::chrono::duration<double> settle,
                       bool* started = nullptr) {
    const auto d = held_.held(state == "PREEMPTED" || state == "NODE_FAIL", started);
    if (!d) return false;
    if (*d < settle) return true;
    held_.reset();
    return false;
  }
  bool watching() const { return held_.holding(); }

 private:
  HeldSince held_;
};

// "Invalid job id" for a job that may still be there: right after a submit, or while slurmctld
// restarts and reloads its state, a controller can answer that for a moment (a launcher that
// believed one empty squeue dropped a live job: skypilot#10457). A job counts as gone only when
// every answer for `grace` said so; one answer that finds it starts the count again.
class LostWatch {
 public:
  // True while `found` is false but the first such answer is less than `grace` old; the first
  // call of such a watch sets *started.
  bool may_be_transient(bool found, std::chrono::duration<double> grace,
                        bool* started = nullptr) {
    const auto d = held_.held(!found, started);
    return d && *d < grace;
  }
  bool watching() const { return held_.holding(); }

 private:
  HeldSince held_;
};

struct LogChunk {
  bool exists = false;       // the file is there (a pending job has no log yet)
  std::string data;          // bytes from the requested offset
  uint64_t next_offset = 0;  // where to read next time
};

struct SubmitRequest {
  std::string script;     // the batch script's full text
  std::string job_name;   // names the run directory: <runs_root>/<job_name>-<job id>/
  std::string runs_root;  // absolute; on the backend's host (remote for ssh)
  std::string workdir;    // the job's working directory (absolute); "" = the backend's default
  std::string output;     // the spec's job.output pattern; a relative one lands in the run dir
  std::string error;      // the spec's job.error pattern, "" = together with output
  // Variables of the submitting process passed to the job by name (job.env_from_submit): their
  // values go from this process's environment to the job's, never into a file or argument.
  std::vector<std::string> env_from_submit;
  // Files written into the run directory beside script.sbatch (name -> content): spec.json.
  std::vector<std::pair<std::string, std::string>> files;
  // A job array's task indexes (the script's --array): each task gets its own run directory,
  // <runs_root>/<job_name>-<array job id>_<task>/, for its log and metrics. Empty: one job.
  std::vector<long> array_tasks;
};

struct SubmitResult {
  std::string job_id;
  std::string run_dir;         // <runs_root>/<job_name>-<job_id>, on the backend's host
  std::string submit_command;  // what was run, for the run record
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string kind() const = 0;  // "slurm", "ssh", "local"
  virtual std::string host() const = 0;  // where jobs are submitted ("localhost", "user@login")

  // Submits the script so that its run directory exists, holding script.sbatch and the
  // request's files, before the job can start (Slurm: sbatch --hold, mkdir, scontrol release).
  // Submits at most once: a failure after the job id is known cancels that job. Throws
  // BackendError with one line saying what failed and what to do.
  virtual SubmitResult submit(const SubmitRequest& request) = 0;
  virtual JobStatus status(const std::string& job_id) = 0;
  // Reads a log file (a path on the backend's host) from `offset`, at most `max_bytes`.
  virtual LogChunk read_log(const std::string& path, uint64_t offset,
                            size_t max_bytes = 1 << 20) = 0;
  virtual void cancel(const std::string& job_id) = 0;
  // Sends `signal` (a name scancel knows, USR1, or a number, 23) to every task of the job's steps,
  // not to its batch script (hang detection asks the tasks where they are). Throws BackendError; a
  // backend that cannot says so.
  virtual void signal_tasks(const std::string& job_id, const std::string& signal);
};

// A backend operation that failed after retries: the cluster is unreachable, sbatch refused
// the job, ... The message is one line saying what happened and what to do.
class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The cluster could not be reached after bounded retries: slurmctld does not answer, the login
// node refuses or drops the connection. main() exits with kExitUnreachable; nothing was submitted
// or cancelled.
class BackendUnreachable : public BackendError {
 public:
  using BackendError::BackendError;
};

inline constexpr int kExitUnreachable = 69;  // sysexits' EX_UNAVAILABLE

// is_job_id: text.h (common/), since the spec checks --after ids with it too.

}  // namespace hpc
