// The start-up budget: a timeline with launch and log events and a log, phases worked out by
// hand; a requeued job's second start; the table.
#include <catch2/catch.hpp>

#include <string>

#include <fmt/core.h>

#include "error.h"
#include "follow/startup.h"

using namespace hpc;
using Catch::Matchers::Contains;

namespace {

constexpr double T0 = 1795600800;  // 2026-11-25T10:00:00Z

std::string event(const std::string& kind, double t, int restart, const std::string& more = "") {
  return fmt::format(R"({{"event":"{}","time":{:.3f},"utc":"x","restart":{}{}}})", kind, T0 + t,
                     restart, more) +
         "\n";
}
std::string log_mark(double t, int restart, unsigned long long bytes) {
  return event("log", t, restart, fmt::format(R"(,"bytes":{})", bytes));
}

// The log of one start: the script's own lines before the launch (100 bytes, not dated), then
// srun's warning, the program's first line, a metric line.
const std::string kBefore(100, 'x');
const std::string kLines =
    "srun: warning: something\n"           // 25 bytes: offsets 100-124
    "0: importing torch\n"                 // 19 bytes: 125-143
    "hpclaunch: USR1: asking the tasks\n"  // 34 bytes: 144-177
    "1: step 0 loss 10.9 tok/s 1234\n";    // 31 bytes: 178-208

}  // namespace

TEST_CASE("startup: the phases of one start from its timeline and log", "[startup]") {
  const std::string timeline = event("start", 2, 0) + event("launch", 3.5, 0) +
                               log_mark(3.6, 0, 100) + log_mark(4.1, 0, 125) +
                               log_mark(6.0, 0, 144) + log_mark(9.5, 0, 209) + event("end", 20, 0);
  auto runs = parse_timeline(timeline, "timeline.jsonl");
  REQUIRE(runs.size() == 1);
  REQUIRE(runs[0].launch);
  CHECK(*runs[0].launch == Approx(T0 + 3.5));
  REQUIRE(runs[0].log_marks.size() == 4);
  auto span = startup_log_span(runs[0]);
  REQUIRE(span);
  CHECK(span->from == 100);
  CHECK(span->to == 209);

  StartupMarkers markers;
  markers.first_step = [](const std::string& line) {
    return line.find("tok/s") != std::string::npos;
  };
  StartPhases p = start_phases(runs[0], T0, kLines, markers, std::nullopt);
  CHECK(p.restart == 0);
  REQUIRE(p.queue_s());
  CHECK(*p.queue_s() == Approx(2));
  CHECK(*p.environment_s() == Approx(1.5));
  // "0: importing torch" starts at byte 125: first counted by the mark at 6.0 (144 bytes), not
  // by the one at 4.1 (125 bytes: up to byte 124).
  REQUIRE(p.rendezvous);
  CHECK(*p.rendezvous == Approx(T0 + 6.0));
  CHECK(*p.rendezvous_s() == Approx(2.5));
  REQUIRE(p.first_step);
  CHECK(*p.first_step_s() == Approx(3.5));
  CHECK(*p.total_s() == Approx(7.5));

  // Without a metric regex no first step; the script's and srun's lines never count.
  p = start_phases(runs[0], T0, kLines, {}, std::nullopt);
  CHECK_FALSE(p.first_step);
  CHECK(*p.rendezvous == Approx(T0 + 6.0));
  p = start_phases(runs[0], T0, "srun: x\nhpclaunch: y\n", {}, std::nullopt);
  CHECK_FALSE(p.rendezvous);
  // hpctrain: its rendezvous line, and the first step from metrics.jsonl (which wins).
  p = start_phases(runs[0], T0, "0: hpctrain: data ...\n0: hpctrain: model d12 ...\n",
                   hpctrain_startup_markers(), T0 + 15);
  REQUIRE(p.rendezvous);
  CHECK(*p.rendezvous == Approx(T0 + 4.1));  // byte 122 of the second line: the mark at 4.1
  CHECK(*p.first_step_s() == Approx(10.9));
  // The line is dated by its mark (4.1), after hpctrain's exact first step (4.0): it was printed
  // before that step, so the rendezvous is moved back to it, never after it.
  p = start_phases(runs[0], T0, "0: hpctrain: data ...\n0: hpctrain: model d12 ...\n",
                   hpctrain_startup_markers(), T0 + 4.0);
  CHECK(*p.rendezvous == Approx(T0 + 4.0));
  CHECK(*p.first_step_s() == Approx(0));
}

TEST_CASE("startup: a line past the last mark is not dated, and without marks no log phases",
          "[startup]") {
  auto runs = parse_timeline(
      event("start", 0, 0) + event("launch", 1, 0) + log_mark(1.1, 0, 0) + log_mark(2, 0, 10), "t");
  StartPhases p = start_phases(runs[0], std::nullopt, "123456789\nlater line\n", {}, std::nullopt);
  REQUIRE(p.rendezvous);
  CHECK(*p.rendezvous == Approx(T0 + 2));
  CHECK_FALSE(p.queue_s());
  p = start_phases(runs[0], std::nullopt, std::string(10, '\n') + "late\n", {}, std::nullopt);
  CHECK_FALSE(p.rendezvous);
  // An older script: no launch, no log events.
  runs = parse_timeline(event("start", 0, 0) + event("end", 5, 0), "t");
  p = start_phases(runs[0], T0 - 3, "0: hello\n", {}, std::nullopt);
  CHECK(*p.queue_s() == Approx(3));
  CHECK_FALSE(p.environment_s());
  CHECK_FALSE(p.rendezvous);
  CHECK_FALSE(p.total_s());
  CHECK(time_of_log_offset({}, 0) == std::nullopt);
}

TEST_CASE("startup: a restart's queue counts from the killed run's last line", "[startup]") {
  // Run 0 stopped at 30 and was killed (KillWait) before it wrote its end; run 1 starts at 41.
  auto runs = parse_timeline(event("start", 2, 0) + event("launch", 3, 0) + log_mark(4, 0, 10) +
                                 event("stop", 30, 0, R"(,"signal":"USR1")") +
                                 event("start", 41, 1) + event("launch", 42, 1),
                             "t");
  REQUIRE(runs.size() == 2);
  StartPhases p = start_phases(runs[1], runs[0].last_seen(), "", {}, std::nullopt);
  REQUIRE(p.queue_s());
  CHECK(*p.queue_s() == Approx(11));
}

TEST_CASE("startup: the table of a requeued job, one row a start", "[startup]") {
  StartPhases a;
  a.restart = 0;
  a.submitted = T0;
  a.started = T0 + 12;
  a.env_ready = T0 + 12.4;
  a.rendezvous = T0 + 15;
  a.first_step = T0 + 21;
  StartPhases b;
  b.restart = 1;
  b.submitted = T0 + 100;  // the first run's end: its requeue
  b.started = T0 + 131;
  b.env_ready = T0 + 131.5;
  const std::string text = startup_text({a, b}, true);
  CHECK_THAT(text, Contains("rendezvous: hpctrain's first collective"));
  CHECK_THAT(text,
             Contains("  0            12.0 s        0.4 s       2.6 s       6.0 s          9.0 s"));
  CHECK_THAT(text,
             Contains("  1            31.0 s        0.5 s           -           -              -"));
  auto j = startup_json({a, b});
  REQUIRE(j.size() == 2);
  CHECK(j[0]["queue_s"].get<double>() == Approx(12));
  CHECK(j[1]["rendezvous"].is_null());
}

TEST_CASE("startup: a log event without a number of bytes is left out, an unknown event refused",
          "[startup]") {
  auto runs = parse_timeline(event("start", 0, 0) + event("log", 1, 0, R"(,"bytes":null)"), "t");
  CHECK(runs[0].log_marks.empty());
  CHECK_THROWS_WITH(parse_timeline(event("start", 0, 0) + event("lunch", 1, 0), "t"),
                    Contains("start, launch, log, stop or end"));
}
