// Hang detection (job.hang_seconds): which ranks stopped reporting progress, where, and what
// to tell the user. Follow feeds it what it reads while the job runs:
//  - hpctrain's per-rank progress files, <run dir>/progress/rank-N (one JSON line each, written by
//    trainer/metrics/progress.cc when the rank's progress changes);
//  - the job's log, labelled per rank by srun (--label), for programs that write no such files.
// When nothing changed for hang_seconds, follow asks the ranks where they are (kWhereSignal), saves
// the summary and their answers in <run dir>/hang-<time>.txt and ends the job (exit kHang).
// Before any rank's first progress (a line of its own in the log, a progress or heartbeat file),
// the job is starting, not hung: `import torch` from a shared file system and a large rendezvous
// take minutes. The start has its own bound (job.start_seconds), from the moment the job runs.
#pragma once

#include <chrono>
#include <csignal>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hpc {

// The signal that asks every task "where are you": SIGURG, sent with scancel --signal=23 JOBID
// (the job's steps, not the batch shell; Slurm 22.05's scancel knows no name URG, so the number,
// 23 on Linux x86-64, arm64 and ppc64le). URG, since USR1/USR2/TERM stop a job for a requeue
// (job.signal) and URG's default action is to ignore it: a program that does not answer is not
// harmed.
inline constexpr const char* kWhereSignalName = "URG";
inline constexpr int kWhereSignalNumber = SIGURG;

// One rank's progress file.
struct RankProgress {
  int rank = -1;
  std::string host;
  long step = -1;  // -1: before the first step
  std::string phase;
  std::string collective;  // the last one started
  unsigned long long seq = 0;
  bool waiting = false;  // blocked in a collective
  std::string waiting_collective;
  unsigned long long waiting_seq = 0;
  double progress_time = 0;  // Unix seconds (the rank's clock)
};

// Parses one progress file's text (its last complete JSON line); nullopt for anything else.
std::optional<RankProgress> parse_rank_progress(const std::string& text);

// What follow watched, per rank: its progress and when (on follow's clock) it last changed.
class HangWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // A rank's progress file as read now (the whole text; "" when missing).
  void saw_progress(int rank, const std::string& text, Clock::time_point now);
  // A log line (srun's "3: " label names the rank; -1 for an unlabelled one).
  void saw_log_line(int rank, const std::string& line, Clock::time_point now);
  // A rank's heartbeat file (<run dir>/progress/heartbeat-N, written by a program of one's own;
  // "" when missing): a change counts as progress, as a log line does.
  void saw_heartbeat(int rank, const std::string& text, Clock::time_point now);
  // The job (re)started running: the clock starts now.
  void reset(Clock::time_point now);

  // Seconds since anything changed (any rank's progress file or, when no rank writes one, the
  // log); nullopt before the job runs.
  std::optional<double> quiet_seconds(Clock::time_point now) const;
  bool has_progress_files() const { return !progress_.empty(); }
  // Whether a rank showed its first progress since the job (re)started: a labelled log line, a
  // progress file, a heartbeat. The batch script's own lines (no srun label) do not count.
  bool started() const { return first_progress_.has_value(); }
  // Seconds since the job (re)started running; nullopt before.
  std::optional<double> running_seconds(Clock::time_point now) const;
  // Which bound ran out now, if any: the start's (no rank started within start_seconds; 0: no
  // bound on the start) or the hang's (no progress for hang_seconds since a rank started).
  enum class Bound { none, start, progress };
  Bound ran_out(Clock::time_point now, int hang_seconds, int start_seconds) const;

  // The summary, a few lines, the first of which says what happened:
  //   hang: no rank reported progress for 61 s (job.hang_seconds = 60)
  //   rank 1 is behind: step 3, phase stopped ..., not in a collective (last: all_reduce #11)
  //   ranks 0, 2-3 wait inside all_reduce #12 at step 3 (for 61 s)
  // or, when no rank started (`start_seconds` > 0 and it ran out):
  //   hang: no rank has started after 903 s (job.start_seconds = 900): ...
  // `nodes` > 0: srun's labels are nodes (launch torchrun), so the log's lines are told per node.
  std::vector<std::string> summary(int world_size, int hang_seconds, Clock::time_point now,
                                   int nodes = 0, int start_seconds = 0) const;

 private:
  struct Seen {
    std::string text;
    std::optional<RankProgress> progress;
    Clock::time_point changed;
  };
  std::map<int, Seen> progress_;
  std::map<int, std::pair<std::string, Clock::time_point>> last_line_;  // per labelled rank
  std::map<int, std::string> heartbeat_;                                // per rank
  std::optional<Clock::time_point> started_, last_change_, last_log_, first_progress_;

  std::vector<std::string> summary_from_progress(int world_size, Clock::time_point now) const;
  std::vector<std::string> summary_from_log(int labels, bool nodes, Clock::time_point now) const;
};

// "0-2, 5, 7-8"
std::string rank_ranges(const std::vector<int>& ranks);

// "hang-20261125T141503Z.txt"
std::string hang_file_name(const std::string& utc_iso8601);

}  // namespace hpc
