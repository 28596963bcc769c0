#include "metrics/progress.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hpc::train {
namespace {

namespace fs = std::filesystem;
constexpr auto kHeartbeatPeriod = std::chrono::seconds(2);

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The process's progress: plain atomics, written by the training thread and the communicator,
// read by the reporter. Names point at string literals.
struct ProgressAtomics {
  std::atomic<int64_t> step{-1};
  std::atomic<int> phase{int(Phase::start)};
  std::atomic<const char*> collective{""};
  std::atomic<uint64_t> seq{0};
  std::atomic<bool> waiting{false};
  std::atomic<const char*> waiting_collective{""};
  std::atomic<uint64_t> waiting_seq{0};
  std::atomic<double> waiting_since{0};
  std::atomic<double> progress_time{unix_now()};
  std::atomic<uint64_t> changes{0};  // the heartbeat rewrites the file when this moved
  std::atomic<int> rank{-1};
};
ProgressAtomics g_progress;

void note_change() {
  g_progress.progress_time.store(unix_now(), std::memory_order_relaxed);
  g_progress.changes.fetch_add(1, std::memory_order_relaxed);
}

// HPCTRAIN_TEST_HANG=RANK:STEP (test only): {rank, step}, or {-1, -1}.
std::pair<int, int64_t> test_hang() {
  static const std::pair<int, int64_t> parsed = [] {
    const char* v = std::getenv("HPCTRAIN_TEST_HANG");
    int rank = -1;
    long long step = -1;
    if (!v || std::sscanf(v, "%d:%lld", &rank, &step) != 2) return std::pair<int, int64_t>{-1, -1};
    return std::pair<int, int64_t>{rank, step};
  }();
  return parsed;
}

[[noreturn]] void stop_for_test(const char* name, uint64_t seq) {
  std::fprintf(stderr,
               "hpctrain: rank %d: HPCTRAIN_TEST_HANG: stopping for ever before %s #%llu (a test "
               "of hang detection)\n",
               g_progress.rank.load(), name, static_cast<unsigned long long>(seq));
  progress_phase(Phase::stopped);
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::string utc_clock(double unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

// A temporary file renamed onto `path`: a reader sees the old line or the new one. No fsync:
// it is rewritten every few seconds and only read while the job runs.
void replace_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f) return;  // a full disk must not stop training; the watcher sees no progress
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
}

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::start:
      return "start";
    case Phase::data:
      return "data";
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::collective:
      return "collective";
    case Phase::optimizer:
      return "optimizer";
    case Phase::checkpoint:
      return "checkpoint";
    case Phase::eval:
      return "eval";
    case Phase::stopped:
      return "stopped (HPCTRAIN_TEST_HANG)";
  }
  return "?";
}

void progress_step(int64_t step) {
  g_progress.step.store(step, std::memory_order_relaxed);
  note_change();
}

void progress_phase(Phase p) {
  g_progress.phase.store(int(p), std::memory_order_relaxed);
  note_change();
}

uint64_t progress_collective_started(const char* name) {
  const uint64_t seq = g_progress.seq.load(std::memory_order_relaxed) + 1;
  const auto [hang_rank, hang_step] = test_hang();
  if (hang_rank >= 0 && hang_rank == g_progress.rank.load(std::memory_order_relaxed) &&
      hang_step == g_progress.step.load(std::memory_order_relaxed)) {
    stop_for_test(name, seq);
  }
  g_progress.collective.store(name, std::memory_order_relaxed);
  g_progress.seq.store(seq, std::memory_order_relaxed);
  note_change();
  return seq;
}

void progress_wait_begins(const char* name, uint64_t seq) {
  g_progress.waiting_collective.store(name, std::memory_order_relaxed);
  g_progress.waiting_seq.store(seq, std::memory_order_relaxed);
  g_progress.waiting_since.store(unix_now(), std::memory_order_relaxed);
  g_progress.waiting.store(true, std::memory_order_release);
  note_change();
}

void progress_wait_ends() {
  g_progress.waiting.store(false, std::memory_order_release);
  note_change();
}

ProgressSnapshot progress_snapshot() {
  ProgressSnapshot s;
  s.step = g_progress.step.load(std::memory_order_relaxed);
  s.phase = Phase(g_progress.phase.load(std::memory_order_relaxed));
  s.collective = g_progress.collective.load(std::memory_order_relaxed);
  s.seq = g_progress.seq.load(std::memory_order_relaxed);
  s.waiting = g_progress.waiting.load(std::memory_order_acquire);
  s.waiting_collective = g_progress.waiting_collective.load(std::memory_order_relaxed);
  s.waiting_seq = g_progress.waiting_seq.load(std::memory_order_relaxed);
  s.waiting_since = g_progress.waiting_since.load(std::memory_order_relaxed);
  s.progress_time = g_progress.progress_time.load(std::memory_order_relaxed);
  return s;
}

std::string progress_json(const ProgressSnapshot& s, int rank, const std::string& host,
                          double now) {
  nlohmann::json j = {{"rank", rank},
                      {"host", host},
                      {"pid", long(getpid())},
                      {"step", s.step},
                      {"phase", phase_name(s.phase)},
                      {"collective", s.collective},
                      {"seq", s.seq},
                      {"waiting", s.waiting},
                      {"progress_time", s.progress_time},
                      {"written_time", now}};
  if (s.waiting) {
    j["waiting_collective"] = s.waiting_collective;
    j["waiting_seq"] = s.waiting_seq;
    j["waiting_seconds"] = std::max(0.0, now - s.waiting_since);
  }
  return j.dump() + "\n";
}

std::string where_line(const ProgressSnapshot& s, int rank, const std::string& host, double now) {
  std::string line = fmt::format("hpctrain: rank {} on {}: ", rank, host);
  line += s.step >= 0 ? fmt::format("step {}", s.step) : std::string("before the first step");
  line += fmt::format(", phase {}", phase_name(s.phase));
  if (s.waiting) {
    line += fmt::format(", waiting in {} #{} for {:.0f} s", s.waiting_collective, s.waiting_seq,
                        std::max(0.0, now - s.waiting_since));
  } else if (s.seq > 0) {
    line += fmt::format(", not in a collective (last: {} #{})", s.collective, s.seq);
  } else {
    line += ", no collective yet";
  }
  line += fmt::format(", last progress {} UTC ({:.0f} s ago)", utc_clock(s.progress_time),
                      std::max(0.0, now - s.progress_time));
  return line;
}

void block_where_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, kWhereSignal);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// The heartbeat thread and the signal thread.
struct ProgressReporter::Threads {
  int rank;
  std::string host = host_name();
  fs::path dir;
  std::atomic<bool> stopping{false};
  std::thread heartbeat, signals;

  fs::path file(const char* suffix) const { return dir / fmt::format("rank-{}{}", rank, suffix); }

  void beat() {
    uint64_t written = ~uint64_t(0);
    while (!stopping.load()) {
      const uint64_t changes = g_progress.changes.load(std::memory_order_relaxed);
      if (changes != written) {
        replace_file(file(""), progress_json(progress_snapshot(), rank, host, unix_now()));
        written = changes;
      }
      for (int i = 0; i < 20 && !stopping.load(); ++i)
        std::this_thread::sleep_for(kHeartbeatPeriod / 20);
    }
  }

  void answer_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, kWhereSignal);
    while (true) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) return;
      if (stopping.load()) return;  // the destructor's own signal
      const std::string line = where_line(progress_snapshot(), rank, host, unix_now()) + "\n";
      (void)!write(STDERR_FILENO, line.data(), line.size());
      if (!dir.empty()) replace_file(file(".where"), line);
    }
  }
};

ProgressReporter::ProgressReporter(int rank) : threads_(new Threads) {
  block_where_signal();
  const char* env = std::getenv("HPCTRAIN_PROGRESS_DIR");
  const std::string dir = env ? env : "";
  g_progress.rank.store(rank);
  threads_->rank = rank;
  threads_->dir = dir;
  if (!dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      std::fprintf(stderr, "hpctrain: rank %d: cannot create %s (%s); no progress file\n", rank,
                   dir.c_str(), ec.message().c_str());
      threads_->dir.clear();
    }
  }
  Threads* t = threads_.get();
  if (!t->dir.empty()) t->heartbeat = std::thread([t] { t->beat(); });
  t->signals = std::thread([t] { t->answer_signals(); });
}

ProgressReporter::~ProgressReporter() {
  threads_->stopping = true;
  if (threads_->heartbeat.joinable()) threads_->heartbeat.join();
  // Wake the sigwait with the signal itself, sent to that thread only.
  pthread_kill(threads_->signals.native_handle(), kWhereSignal);
  threads_->signals.join();
}

}  // namespace hpc::train
