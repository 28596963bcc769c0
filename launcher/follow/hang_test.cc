#include "follow/hang.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "follow/follow.h"
#include "support/scripted_backend.h"

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// A progress file as hpctrain writes it (trainer/metrics/progress.cc).
std::string progress_line(int rank, const std::string& host, long step, const std::string& phase,
                          unsigned seq, bool waiting) {
  std::string s = "{\"rank\":" + std::to_string(rank) + ",\"host\":\"" + host +
                  "\",\"pid\":42,\"step\":" + std::to_string(step) + ",\"phase\":\"" + phase +
                  "\",\"collective\":\"all_reduce\",\"seq\":" + std::to_string(seq) +
                  ",\"waiting\":" + (waiting ? "true" : "false");
  if (waiting)
    s += ",\"waiting_collective\":\"all_reduce\",\"waiting_seq\":" + std::to_string(seq) +
         ",\"waiting_seconds\":0.5";
  return s + ",\"progress_time\":1764080531.5,\"written_time\":1764080532.0}\n";
}

std::string text_of(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("hang: a progress file is read, anything else is not", "[hang]") {
  auto p = hpc::parse_rank_progress(progress_line(3, "node02", 41, "backward", 1234, true));
  REQUIRE(p);
  CHECK(p->rank == 3);
  CHECK(p->host == "node02");
  CHECK(p->step == 41);
  CHECK(p->phase == "backward");
  CHECK(p->waiting);
  CHECK(p->waiting_collective == "all_reduce");
  CHECK(p->waiting_seq == 1234);
  CHECK(p->progress_time == Approx(1764080531.5));
  // The last whole line counts; a half-written or foreign file does not.
  auto two = hpc::parse_rank_progress(progress_line(1, "a", 1, "data", 2, false) +
                                      progress_line(1, "a", 2, "data", 5, false));
  REQUIRE(two);
  CHECK(two->step == 2);
  CHECK_FALSE(hpc::parse_rank_progress(""));
  CHECK_FALSE(hpc::parse_rank_progress("{\"rank\":"));
  CHECK_FALSE(hpc::parse_rank_progress("[1,2]"));
  CHECK_FALSE(hpc::parse_rank_progress("{\"step\":3}"));
  CHECK_FALSE(hpc::parse_rank_progress("{\"rank\":-1}"));
}

TEST_CASE("hang: rank ranges and the report's name", "[hang]") {
  CHECK(hpc::rank_ranges({0, 2, 3, 1, 7, 9, 10}) == "0-3, 7, 9-10");
  CHECK(hpc::rank_ranges({5}) == "5");
  CHECK(hpc::hang_file_name("2026-11-25T14:15:03Z") == "hang-20261125T141503Z.txt");
}

TEST_CASE("hang: quiet only when no progress file changed for the whole time", "[hang]") {
  hpc::HangWatch w;
  const auto t0 = hpc::HangWatch::Clock::now();
  CHECK_FALSE(w.quiet_seconds(t0));  // not running yet
  w.reset(t0);
  w.saw_progress(0, progress_line(0, "node01", 1, "forward", 3, false), t0);
  w.saw_progress(1, progress_line(1, "node02", 1, "forward", 3, false), t0);
  CHECK(*w.quiet_seconds(t0 + 5s) == Approx(5));
  // One rank moves: the quiet time starts again.
  w.saw_progress(1, progress_line(1, "node02", 1, "backward", 4, false), t0 + 5s);
  CHECK(*w.quiet_seconds(t0 + 7s) == Approx(2));
  // The same text again is no progress; log lines do not count once progress files exist.
  w.saw_progress(1, progress_line(1, "node02", 1, "backward", 4, false), t0 + 9s);
  w.saw_log_line(0, "0: a warning", t0 + 9s);
  CHECK(*w.quiet_seconds(t0 + 10s) == Approx(5));
}

TEST_CASE("hang: without progress files, the log's lines are the progress", "[hang]") {
  hpc::HangWatch w;
  const auto t0 = hpc::HangWatch::Clock::now();
  w.reset(t0);
  w.saw_log_line(0, "0: epoch 1 batch 7", t0 + 1s);
  w.saw_log_line(1, "1: epoch 1 batch 7", t0 + 2s);
  CHECK(*w.quiet_seconds(t0 + 10s) == Approx(8));
  auto lines = w.summary(3, 8, t0 + 10s);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "hang: no rank reported output for 8 s (job.hang_seconds = 8)");
  CHECK(lines[1].find("writes no progress files") != std::string::npos);
  CHECK(lines[2] == "rank 0, 9 s ago: 0: epoch 1 batch 7");
  CHECK(lines[3] == "rank 1, 8 s ago: 1: epoch 1 batch 7");
  CHECK(lines[4] == "rank 2: no line in the log");
  // launch torchrun: the labels are the 2 nodes.
  lines = w.summary(4, 8, t0 + 10s, 2);
  REQUIRE(lines.size() == 4);
  CHECK(lines[1].find("each node's last line in the log (launch torchrun") != std::string::npos);
  CHECK(lines[2] == "node 0, 9 s ago: 0: epoch 1 batch 7");
  CHECK(lines[3] == "node 1, 8 s ago: 1: epoch 1 batch 7");
}

TEST_CASE("hang: a program's heartbeat files count as progress when they change", "[hang]") {
  hpc::HangWatch w;
  const auto t0 = hpc::HangWatch::Clock::now();
  w.reset(t0);
  w.saw_log_line(0, "0: starting", t0 + 1s);
  w.saw_heartbeat(1, "step 1", t0 + 4s);
  w.saw_heartbeat(0, "", t0 + 5s);        // missing: nothing
  w.saw_heartbeat(1, "step 1", t0 + 9s);  // unchanged: nothing
  CHECK(*w.quiet_seconds(t0 + 10s) == Approx(6));
  w.saw_heartbeat(1, "step 2", t0 + 12s);
  CHECK(*w.quiet_seconds(t0 + 20s) == Approx(8));
  CHECK_FALSE(w.has_progress_files());  // not hpctrain's: the summary is the log's
  auto lines = w.summary(2, 8, t0 + 20s);
  CHECK(lines[0] == "hang: no rank reported output or heartbeat for 8 s (job.hang_seconds = 8)");
}

TEST_CASE("hang: before any rank's first progress the start's bound applies, not the hang's",
          "[hang]") {
  using Bound = hpc::HangWatch::Bound;
  hpc::HangWatch w;
  const auto t0 = hpc::HangWatch::Clock::now();
  w.reset(t0);
  // The batch script's own line (no srun label) is not a rank's progress.
  w.saw_log_line(-1, "hpclaunch: job 7 starts on node01", t0 + 1s);
  w.saw_heartbeat(0, "", t0 + 2s);  // no heartbeat file yet
  CHECK_FALSE(w.started());
  CHECK(w.ran_out(t0 + 30s, 10, 60) == Bound::none);  // 30 s of imports: no hang
  CHECK(w.ran_out(t0 + 61s, 10, 60) == Bound::start);
  CHECK(w.ran_out(t0 + 100000s, 10, 0) == Bound::none);  // 0: no bound on the start
  auto lines = w.summary(2, 10, t0 + 61s, 0, 60);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("hang: no rank has started after 61 s (job.start_seconds = 60): ", 0) == 0);
  CHECK(lines[2] == "ranks 0-1: no line in the log");
  // Rank 1's first line: from here on the hang's bound counts, from the last progress.
  w.saw_log_line(1, "1: dataset ready", t0 + 70s);
  CHECK(w.started());
  CHECK(w.ran_out(t0 + 75s, 10, 60) == Bound::none);
  CHECK(w.ran_out(t0 + 80s, 10, 60) == Bound::progress);
  CHECK(w.summary(2, 10, t0 + 80s, 0, 60)[0] ==
        "hang: no rank reported output for 10 s (job.hang_seconds = 10)");
  // A restart (requeue) starts again.
  w.reset(t0 + 200s);
  CHECK_FALSE(w.started());
  CHECK(w.ran_out(t0 + 230s, 10, 60) == Bound::none);
  // A heartbeat or a progress file is a first progress too.
  w.saw_heartbeat(0, "step 0", t0 + 231s);
  CHECK(w.started());
  hpc::HangWatch p;
  p.reset(t0);
  p.saw_progress(0, progress_line(0, "node01", -1, "init", 0, false), t0 + 5s);
  CHECK(p.started());
  CHECK(p.ran_out(t0 + 16s, 10, 900) == Bound::progress);
}

TEST_CASE("hang: the rank that stopped is named first, the waiting ones after", "[hang]") {
  hpc::HangWatch w;
  const auto t0 = hpc::HangWatch::Clock::now();
  w.reset(t0);
  // Ranks 0, 2, 3 wait inside all_reduce #12; rank 1 stopped before it (its last was #11).
  for (int r : {0, 2, 3})
    w.saw_progress(r, progress_line(r, r < 2 ? "node01" : "node02", 3, "backward", 12, true), t0);
  w.saw_progress(1, progress_line(1, "node01", 3, "backward", 11, false), t0);
  auto lines = w.summary(5, 60, t0 + 61s);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "hang: no rank reported progress for 61 s (job.hang_seconds = 60)");
  CHECK(lines[1] ==
        "rank 1 on node01 is behind the others: step 3, phase backward, not in a collective "
        "(last: all_reduce #11) (no change for 61 s)");
  CHECK(lines[2] ==
        "ranks 0, 2-3 on node01, node02: step 3, phase backward, waiting inside all_reduce #12 "
        "(no change for 61 s)");
  CHECK(lines[3] == "rank 4: no progress file (not started, or died before its first)");
}

TEST_CASE("hang: every rank inside the same collective is said to be the network's", "[hang]") {
  hpc::HangWatch w;
  const auto t0 = hpc::HangWatch::Clock::now();
  w.reset(t0);
  for (int r : {0, 1}) w.saw_progress(r, progress_line(r, "node01", 7, "collective", 30, true), t0);
  auto lines = w.summary(2, 30, t0 + 30s);
  REQUIRE(lines.size() == 3);
  CHECK(lines[1].rfind("ranks 0-1 on node01: step 7", 0) == 0);
  CHECK(lines[2].find("the collective itself does not finish") != std::string::npos);
}

TEST_CASE("follow: a job without progress is asked, reported and ended", "[follow][hang]") {
  const fs::path dir = fs::temp_directory_path() / ("hang_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "progress");
  std::ofstream(dir / "progress" / "rank-0") << progress_line(0, "node01", 3, "backward", 12, true);
  std::ofstream(dir / "progress" / "rank-1")
      << progress_line(1, "node02", 3, "backward", 11, false);

  hpc::test::ScriptedBackend b;
  b.add_job("9", {{{"RUNNING", 0, "0: step 2\n"}}, {}});
  b.on_signal = [&] {  // what hpctrain's ranks write when asked
    std::ofstream(dir / "progress" / "rank-0.where") << "hpctrain: rank 0 on node01: waiting\n";
    std::ofstream(dir / "progress" / "rank-1.where") << "hpctrain: rank 1 on node02: stopped\n";
  };
  hpc::FollowOptions o;
  o.log_interval = 10ms;
  o.state_interval = 10ms;
  o.hang_seconds = 1;
  o.world_size = 2;
  o.progress_dir = (dir / "progress").string();
  o.hang_report_dir = dir.string();
  o.where_wait = 3s;
  std::ostringstream out, err;
  const int code = hpc::follow_job(b, "9", o, out, err);
  CHECK(code == hpc::follow_exit::kHang);
  REQUIRE(b.signalled.size() == 1);
  CHECK(b.signalled[0] == std::pair<std::string, std::string>{"9", std::to_string(SIGURG)});
  CHECK(b.cancelled.count("9") == 1);
  const std::string said = err.str();
  CHECK(said.find("hang: no rank reported progress") != std::string::npos);
  CHECK(said.find("rank 1 on node02 is behind the others: step 3") != std::string::npos);
  CHECK(said.find("hpctrain: rank 1 on node02: stopped") != std::string::npos);
  CHECK(said.find("ending job 9 (job.hang_seconds = 1); hang report: ") != std::string::npos);
  std::vector<fs::path> reports;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("hang-", 0) == 0) reports.push_back(e.path());
  REQUIRE(reports.size() == 1);
  const std::string report = text_of(reports[0]);
  CHECK(report.find("rank 1 on node02 is behind the others") != std::string::npos);
  CHECK(report.find("answers to SIGURG:\nhpctrain: rank 0 on node01: waiting\n"
                    "hpctrain: rank 1 on node02: stopped\n") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("follow: a start longer than hang_seconds is not a hang", "[follow][hang]") {
  // Running, and silent for 250 polls (at least 2.5 s, more than hang_seconds = 1): the ranks
  // import torch and meet at the rendezvous. Then their first lines, then the end.
  std::vector<hpc::test::ScriptedStep> steps(250, {"RUNNING", 0, ""});
  steps.push_back({"RUNNING", 0, "0: step 1\n1: step 1\n"});
  steps.push_back({"COMPLETED", 0, "", 0});
  hpc::test::ScriptedBackend b;
  b.add_job("5", {steps, {}});
  hpc::FollowOptions o;
  o.log_interval = 10ms;
  o.state_interval = 10ms;
  o.hang_seconds = 1;
  o.start_seconds = 0;  // no bound on the start
  o.world_size = 2;
  o.heartbeats = true;
  std::ostringstream out, err;
  CHECK(hpc::follow_job(b, "5", o, out, err) == 0);
  CHECK(b.signalled.empty());
  CHECK(b.cancelled.empty());
  CHECK(err.str().find("hang:") == std::string::npos);
}

TEST_CASE("follow: a job in which no rank starts is ended by the start's bound", "[follow][hang]") {
  hpc::test::ScriptedBackend b;
  b.add_job("6", {{{"RUNNING", 0, "hpclaunch: the batch script's own line\n"}}, {}});
  hpc::FollowOptions o;
  o.log_interval = 10ms;
  o.state_interval = 10ms;
  o.hang_seconds = 10;  // never reached: no rank started
  o.start_seconds = 1;
  o.world_size = 2;
  o.heartbeats = true;
  o.where_wait = 100ms;
  std::ostringstream out, err;
  CHECK(hpc::follow_job(b, "6", o, out, err) == hpc::follow_exit::kHang);
  CHECK(b.cancelled.count("6") == 1);
  const std::string said = err.str();
  CHECK(said.find("hang: no rank has started after 1 s (job.start_seconds = 1)") !=
        std::string::npos);
  CHECK(said.find("ending job 6 (job.start_seconds = 1)") != std::string::npos);
}

TEST_CASE("follow: hang detection off (0) never signals", "[follow][hang]") {
  hpc::test::ScriptedBackend b;
  b.add_job("4", {{{"RUNNING", 0, ""}, {"RUNNING", 0, ""}, {"COMPLETED", 0, "", 0}}, {}});
  hpc::FollowOptions o;
  o.log_interval = 1ms;
  o.state_interval = 1ms;
  std::ostringstream out, err;
  CHECK(hpc::follow_job(b, "4", o, out, err) == 0);
  CHECK(b.signalled.empty());
}
