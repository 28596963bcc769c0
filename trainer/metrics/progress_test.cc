#include "metrics/progress.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using hpc::train::Phase;

namespace {

std::string text_of(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Polls for `p` to hold a line with `part` (the reporter's threads write it).
bool wait_for(const fs::path& p, const std::string& part) {
  for (int i = 0; i < 100; ++i) {
    if (text_of(p).find(part) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

TEST_CASE("progress: the where line names the step, the phase and the collective", "[progress]") {
  hpc::train::ProgressSnapshot s;
  s.step = 41;
  s.phase = Phase::backward;
  s.collective = "all_reduce";
  s.seq = 1234;
  s.waiting = true;
  s.waiting_collective = "all_reduce";
  s.waiting_seq = 1234;
  s.waiting_since = 1000;
  s.progress_time = 1000;  // 1970-01-01 00:16:40 UTC
  CHECK(hpc::train::where_line(s, 3, "node02", 1095) ==
        "hpctrain: rank 3 on node02: step 41, phase backward, waiting in all_reduce #1234 for "
        "95 s, last progress 00:16:40 UTC (95 s ago)");
  s.waiting = false;
  CHECK(hpc::train::where_line(s, 3, "node02", 1095) ==
        "hpctrain: rank 3 on node02: step 41, phase backward, not in a collective (last: "
        "all_reduce #1234), last progress 00:16:40 UTC (95 s ago)");
  hpc::train::ProgressSnapshot first;
  first.progress_time = 1000;
  CHECK(hpc::train::where_line(first, 0, "n", 1000) ==
        "hpctrain: rank 0 on n: before the first step, phase start, no collective yet, last "
        "progress 00:16:40 UTC (0 s ago)");
}

TEST_CASE("progress: the file's fields, as hpclaunch reads them", "[progress]") {
  hpc::train::ProgressSnapshot s;
  s.step = 7;
  s.phase = Phase::collective;
  s.collective = "reduce_scatter";
  s.seq = 12;
  s.waiting = true;
  s.waiting_collective = "reduce_scatter";
  s.waiting_seq = 12;
  s.waiting_since = 100;
  s.progress_time = 99.5;
  const std::string text = hpc::train::progress_json(s, 1, "node01", 110);
  REQUIRE(text.back() == '\n');
  auto j = nlohmann::json::parse(text);
  CHECK(j["rank"] == 1);
  CHECK(j["host"] == "node01");
  CHECK(j["step"] == 7);
  CHECK(j["phase"] == "collective");
  CHECK(j["collective"] == "reduce_scatter");
  CHECK(j["seq"] == 12);
  CHECK(j["waiting"] == true);
  CHECK(j["waiting_collective"] == "reduce_scatter");
  CHECK(j["waiting_seq"] == 12);
  CHECK(j["waiting_seconds"].get<double>() == Approx(10));
  CHECK(j["progress_time"].get<double>() == Approx(99.5));
}

TEST_CASE("progress: the reporter writes rank-N and answers SIGURG", "[progress]") {
  const fs::path dir = fs::temp_directory_path() / ("progress_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  ::setenv("HPCTRAIN_PROGRESS_DIR", dir.c_str(), 1);
  {
    hpc::train::ProgressReporter reporter(5);
    hpc::train::progress_step(3);
    hpc::train::progress_phase(Phase::forward);
    const uint64_t seq = hpc::train::progress_collective_started("all_reduce");
    hpc::train::progress_wait_begins("all_reduce", seq);
    CHECK(wait_for(dir / "rank-5", "\"waiting\":true"));
    const auto snap = hpc::train::progress_snapshot();
    CHECK(snap.step == 3);
    CHECK(snap.waiting_seq == seq);
    // The signal to the process: a thread that blocks it everywhere but in sigwait takes it.
    kill(getpid(), hpc::train::kWhereSignal);
    CHECK(wait_for(dir / "rank-5.where", "hpctrain: rank 5 on "));
    CHECK(text_of(dir / "rank-5.where").find("step 3, phase forward, waiting in all_reduce #") !=
          std::string::npos);
    hpc::train::progress_wait_ends();
  }
  ::unsetenv("HPCTRAIN_PROGRESS_DIR");
  fs::remove_all(dir);
}
