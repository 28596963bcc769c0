// Where each rank is, kept cheaply, so that a hang can be explained (docs/troubleshooting.md,
// "A job that hangs"). Every rank records its step, its phase and the collectives it starts and
// waits for in process-wide atomics (a few relaxed stores per collective; no lock, no I/O).
// A ProgressReporter then
//  - rewrites <dir>/rank-N (one JSON line, written to a temporary file and renamed) when the
//    progress changed, at most every kHeartbeatPeriod: `hpclaunch` reads these to see which ranks
//    stopped and at which step;
//  - answers kWhereSignal (SIGURG) from a thread of its own (sigwait, no signal handler): it
//    prints one line to stderr and writes it to <dir>/rank-N.where:
//      hpctrain: rank 3 on node02: step 41, phase backward, waiting in all_reduce #1234 for
//      95 s, last progress 14:02:11 UTC
//
// The progress file's fields (one JSON object):
//   rank, host, pid, step (-1 before the first), phase, collective (name of the last one started,
//   "" before the first), seq (its number, counted from 1 on this rank: the ranks of a job start
//   the same collectives in the same order, so equal numbers are the same collective), waiting
//   (true while the rank is blocked in a collective), waiting_collective, waiting_seq,
//   waiting_seconds, progress_time (Unix seconds of its last progress), written_time.
//
// Test only: HPCTRAIN_TEST_HANG=RANK:STEP makes that rank stop, for ever, just before its first
// collective of that step (the others then wait inside that collective). Never set it in a real
// job.
#pragma once

#include <csignal>
#include <cstdint>
#include <memory>
#include <string>

namespace hpc::train {

// SIGURG: not USR1/USR2/TERM (job.signal: stop and checkpoint) and, unlike QUIT or ABRT, its
// default action is to be ignored, so a program that does not answer it is not harmed.
inline constexpr int kWhereSignal = SIGURG;

enum class Phase {
  start,
  data,
  forward,
  backward,
  collective,
  optimizer,
  checkpoint,
  eval,
  stopped
};
const char* phase_name(Phase p);

// The calls the training loop and the communicator make (any thread; lock-free).
void progress_step(int64_t step);
void progress_phase(Phase p);
// A collective starts: its number (1, 2, ...). Under HPCTRAIN_TEST_HANG this is where the
// chosen rank stops.
uint64_t progress_collective_started(const char* name);
// The calling thread blocks until collective `seq` (named `name`) is done.
void progress_wait_begins(const char* name, uint64_t seq);
void progress_wait_ends();

// What the atomics hold now.
struct ProgressSnapshot {
  int64_t step = -1;
  Phase phase = Phase::start;
  std::string collective;  // the last one started
  uint64_t seq = 0;
  bool waiting = false;
  std::string waiting_collective;
  uint64_t waiting_seq = 0;
  double waiting_since = 0;  // Unix seconds
  double progress_time = 0;  // Unix seconds of the last change
};
ProgressSnapshot progress_snapshot();

std::string progress_json(const ProgressSnapshot& s, int rank, const std::string& host, double now);
// "hpctrain: rank 3 on node02: step 41, phase backward, waiting in all_reduce #1234 for 95 s,
// last progress 14:02:11 UTC"
std::string where_line(const ProgressSnapshot& s, int rank, const std::string& host, double now);

// Blocks kWhereSignal in the calling thread; call first thing in main, so that every thread
// started later (OpenMP, Gloo, NCCL) blocks it too and only the reporter's sigwait takes it.
void block_where_signal();

// Starts the heartbeat and the signal thread; stops them when destroyed. The files go to
// $HPCTRAIN_PROGRESS_DIR (the batch template sets it to <run dir>/progress); without it none are
// written and the signal is still answered on stderr.
class ProgressReporter {
 public:
  explicit ProgressReporter(int rank);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

 private:
  struct Threads;
  std::unique_ptr<Threads> threads_;
};

}  // namespace hpc::train
