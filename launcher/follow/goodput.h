// Goodput of one job across its requeues: where its allocated time went.
//
// Inputs, all in the run directory: run.json (when it was submitted), timeline.jsonl (the batch
// script's record of each run of the job: start, stop signal, end and why; written by the
// template, docs/goodput.md) and, for hpctrain, metrics.jsonl (each step's time and tokens/s,
// each checkpoint's save time, where a resumed run started). Nothing here reads a file or runs
// a command: `hpclaunch report RUN` (goodput_report.cc) reads them and prints what this computes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpc {

// One run of the job (restart N), from timeline.jsonl. Times are Unix seconds.
struct TimelineRun {
  int restart = 0;
  double start = 0;
  std::optional<double> stop;  // when the first stop signal reached the batch script
  std::string stop_signal;     // USR1, TERM, ... ("" = none reached the script)
  std::optional<double> end;   // none: still running, or killed before it could write it
  int exit_status = -1;
  // completed, requeued, failed, requeue_limit, requeue_failed, stopped_no_marker; "" = no end.
  std::string why;
  std::string detail;  // the requeue marker's line, when there was one
  std::string nodelist;
  int nodes = 0, tasks = 0, gpus = 0, cpus = 0;  // gpus, cpus: the whole allocation's
  // Start-up (follow/startup.h): when the launch began (modules, venv and rendezvous done), and
  // the log's length as the job saw it grow after that ("log" events).
  std::optional<double> launch;
  struct LogMark {
    double time = 0;
    unsigned long long bytes = 0;
  };
  std::vector<LogMark> log_marks;

  // The end, else the last time the batch script wrote for this run (its start, launch, a log
  // mark, the stop): a run killed before it could record its end (SIGKILL after KillWait, a
  // node failure) was alive at least until then.
  double last_seen() const;
};

// Parses timeline.jsonl. A last line without its newline (being written) is left out. Throws
// UserError "origin:LINE: ..." for a line that is not a JSON object with the fields it needs.
std::vector<TimelineRun> parse_timeline(const std::string& jsonl, const std::string& origin);

// What hpctrain's metrics.jsonl says about time (trainer/metrics/metrics.h).
struct MetricsEvents {
  struct Step {
    long step = 0;
    double time = 0;     // when the step ended
    double seconds = 0;  // its duration (step_ms)
    double tokens = 0;   // tokens_per_s x duration: the step's tokens, all ranks
  };
  struct Checkpoint {
    long step = 0;    // saved after this step; a resume starts at step + 1
    double time = 0;  // when the save was whole
    double save_s = 0;
  };
  struct Resume {
    long first_step = 0;
    double time = 0;
  };
  std::vector<Step> steps;
  std::vector<Checkpoint> checkpoints;
  std::vector<Resume> resumes;
  long untimed_lines = 0;  // lines without "time": an hpctrain older than the report
};

// Parses metrics.jsonl; lines of other kinds (validation) are skipped. A last line without its
// newline is left out. Throws UserError "origin:LINE: ..." for a line that is not JSON.
MetricsEvents parse_metrics_events(const std::string& jsonl, const std::string& origin);

// A run in the report: the timeline's facts and what the metrics add.
struct RunGoodput {
  TimelineRun run;
  double end = 0;     // run.end, else the last time seen (its last metrics line, or start)
  double wait_s = 0;  // pending before it: since submission (run 0) or the previous end
  double run_s = 0;   // end - start
  int devices = 0;    // GPUs (or CPUs for a job without GPUs) charged for it
  long steps = 0;     // training steps it did
  long first_step = -1, last_step = -1;
  std::optional<long> resume_step;  // the step it resumed at (its metrics' resume line)
  double step_s = 0;                // time in training steps
  double tokens = 0;
  std::optional<double> tokens_per_s;  // tokens / step_s
  double startup_s = 0;                // start to its first step's start
  int checkpoints = 0;
  double checkpoint_s = 0;
  std::optional<long> last_checkpoint_step;
  std::optional<double> last_checkpoint_time;
  // Time from its last checkpoint (or its start, without one) to its end, for a run that did
  // not complete: the work a resume cannot keep, and the shutdown after the checkpoint.
  double lost_s = 0;
  long redone_steps = 0;  // its steps that a later run trained again
  double redone_s = 0;
};

struct GoodputReport {
  std::string job_id, name, launch;
  std::string submitted_at;            // run.json's, ISO 8601
  bool has_metrics = false;            // step times found (hpctrain)
  bool gpu_job = true;                 // the allocation had GPUs; else devices are CPUs
  int devices = 0;                     // the most any run had
  std::optional<double> queue_wait_s;  // submission to the first start (none without submitted_at)
  double submitted = 0;                // Unix seconds (the first start when unknown)
  std::vector<RunGoodput> runs;
  int requeues = 0;               // runs after the first
  double run_s = 0;               // sum of the runs' times
  double charged_device_s = 0;    // sum of run_s x devices
  double useful_s = 0;            // training steps kept (each step's last run), wall time
  double useful_device_s = 0;     // the same x devices
  std::optional<double> goodput;  // useful_device_s / charged_device_s
  double lost_s = 0, checkpoint_s = 0, redone_s = 0;
  int checkpoints = 0;
  long redone_steps = 0;
  double tokens = 0;                             // tokens of the steps kept
  std::optional<double> tokens_per_s;            // tokens / useful_s
  std::optional<double> tokens_per_device_hour;  // tokens / charged device-hours
  std::vector<std::string> notes;                // what the figures cannot say, one line each
};

// The report from run.json's fields (job id, name, launch, submitted_at ISO 8601 UTC, world
// size), the timeline and, when not null, the metrics.
struct RunFacts {
  std::string job_id, name, launch, submitted_at;
  int world_size = 0;
};
GoodputReport compute_goodput(const RunFacts& facts, const std::vector<TimelineRun>& timeline,
                              const MetricsEvents* metrics);

// "2026-11-25T14:20:01Z" (or with fractional seconds) as Unix seconds; none if not that form.
std::optional<double> parse_utc_iso8601(const std::string& text);

// Slurm's SLURM_JOB_CPUS_PER_NODE ("4(x2),2") summed: 10. 0 for text not of that form.
int sum_cpus_per_node(const std::string& text);

// The report as `hpclaunch report RUN --json` prints it.
nlohmann::json goodput_json(const GoodputReport& report);

// The report as text, for a terminal (what `hpclaunch report RUN` prints).
std::string goodput_text(const GoodputReport& report);

}  // namespace hpc
