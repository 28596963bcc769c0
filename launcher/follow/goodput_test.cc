// Goodput across requeues: a synthetic job of three runs (two requeues, one of them losing two
// steps) with figures worked out by hand, and the readers' refusals.
#include <catch2/catch.hpp>

#include <string>

#include <fmt/core.h>

#include "error.h"
#include "follow/goodput.h"

using namespace hpc;
using Catch::Matchers::Contains;

namespace {

constexpr double T0 = 1795600800;  // 2026-11-25T10:00:00Z

std::string event(const std::string& kind, double t, int restart, const std::string& more) {
  return fmt::format(R"({{"event":"{}","time":{:.3f},"utc":"x","restart":{}{}}})", kind, T0 + t,
                     restart, more) +
         "\n";
}

std::string start(double t, int restart) {
  return event("start", t, restart,
               R"j(,"job_id":"42","nodelist":"node[01-02]","nodes":"2","tasks":"4",)j"
               R"j("gpus_per_node":"2","cpus_per_node":"8(x2)")j");
}

std::string end(double t, int restart, const std::string& why, int exit_status,
                const std::string& signal) {
  return event(
      "end", t, restart,
      fmt::format(R"(,"exit":{},"why":"{}","signal":"{}","detail":"")", exit_status, why, signal));
}

// Run 0: t 10-70, steps 0-4 (10 s each, ending at 25..65), checkpoint after step 4 at 67,
//        USR1 at 66, requeued.
// Run 1: t 100-160, resumes at step 5, steps 5-9 (ending at 112..154), checkpoint after step 7
//        at 134, TERM, requeued without a checkpoint at the stop: steps 8 and 9 are lost.
// Run 2: t 190-240, resumes at step 8, steps 8-11 (ending at 202..232), checkpoint at 235,
//        completed.
std::string timeline() {
  return start(10, 0) + event("stop", 66, 0, R"(,"signal":"USR1")") +
         end(70, 0, "requeued", 0, "USR1") + start(100, 1) + end(160, 1, "requeued", 0, "TERM") +
         start(190, 2) + end(240, 2, "completed", 0, "");
}

std::string step(long s, double t) {
  return fmt::format(R"({{"step":{},"loss":5.0,"lr":0.001,"grad_norm":1.0,"step_ms":10000.0,)"
                     R"("tokens_per_s":1000.0,"mfu":null,"memory":1,"cpu_ms":1.0,"param_bytes":1,)"
                     R"("grad_bytes":1,"optimizer_bytes":1,"time":{:.3f}}})",
                     s, T0 + t) +
         "\n";
}

std::string checkpoint(long s, double t, double save) {
  return fmt::format(R"({{"checkpoint":{},"save_s":{},"time":{:.3f}}})", s, save, T0 + t) + "\n";
}

std::string metrics() {
  std::string m;
  for (int i = 0; i < 5; ++i) m += step(i, 25 + 10 * i);
  m += R"({"step":4,"val_loss":5.5,"time":)" + std::to_string(T0 + 65.5) + "}\n";
  m += checkpoint(4, 67, 2);
  m += fmt::format(R"({{"resume_step":5,"time":{:.3f}}})", T0 + 102) + "\n";
  m += step(5, 112) + step(6, 122) + step(7, 132) + checkpoint(7, 134, 2) + step(8, 144) +
       step(9, 154);
  m += fmt::format(R"({{"resume_step":8,"time":{:.3f}}})", T0 + 190.5) + "\n";
  m += step(8, 202) + step(9, 212) + step(10, 222) + step(11, 232) + checkpoint(11, 235, 3);
  return m;
}

RunFacts facts() { return {"42", "gpt", "hpctrain", "2026-11-25T10:00:00Z", 4}; }

}  // namespace

TEST_CASE("goodput of three runs with two requeues, figures worked out by hand") {
  const auto tl = parse_timeline(timeline(), "timeline.jsonl");
  REQUIRE(tl.size() == 3);
  CHECK(tl[0].stop_signal == "USR1");
  CHECK(tl[0].stop == Approx(T0 + 66));
  CHECK(tl[1].stop_signal == "TERM");
  CHECK(tl[0].gpus == 4);
  CHECK(tl[0].cpus == 16);
  const auto m = parse_metrics_events(metrics(), "metrics.jsonl");
  CHECK(m.steps.size() == 14);
  CHECK(m.checkpoints.size() == 3);
  CHECK(m.resumes.size() == 2);

  const GoodputReport r = compute_goodput(facts(), tl, &m);
  REQUIRE(r.runs.size() == 3);
  CHECK(r.requeues == 2);
  CHECK(r.gpu_job);
  CHECK(r.devices == 4);
  REQUIRE(r.queue_wait_s);
  CHECK(*r.queue_wait_s == Approx(10));
  CHECK(r.runs[1].wait_s == Approx(30));
  CHECK(r.runs[2].wait_s == Approx(30));
  CHECK(r.runs[0].run_s == Approx(60));
  CHECK(r.runs[2].run_s == Approx(50));
  CHECK(r.run_s == Approx(170));
  CHECK(r.runs[0].steps == 5);
  CHECK(r.runs[1].first_step == 5);
  CHECK(r.runs[1].last_step == 9);
  CHECK(r.runs[2].steps == 4);
  CHECK(r.runs[1].resume_step == 5L);
  CHECK(r.runs[2].resume_step == 8L);
  CHECK(r.runs[0].startup_s == Approx(5));
  CHECK(r.runs[1].startup_s == Approx(2));
  CHECK(*r.runs[0].tokens_per_s == Approx(1000));
  // Lost: from each run's last checkpoint to its end; nothing for the run that completed.
  CHECK(r.runs[0].lost_s == Approx(3));
  CHECK(r.runs[1].lost_s == Approx(26));
  CHECK(r.runs[2].lost_s == 0);
  CHECK(r.lost_s == Approx(29));
  CHECK(r.runs[1].redone_steps == 2);
  CHECK(r.runs[1].redone_s == Approx(20));
  CHECK(r.redone_steps == 2);
  CHECK(r.checkpoints == 3);
  CHECK(r.checkpoint_s == Approx(7));
  // 170 s x 4 GPUs charged; 12 steps kept x 10 s x 4 GPUs useful.
  CHECK(r.charged_device_s == Approx(680));
  CHECK(r.useful_s == Approx(120));
  REQUIRE(r.goodput);
  CHECK(*r.goodput == Approx(480.0 / 680.0));
  CHECK(r.tokens == Approx(120000));
  CHECK(*r.tokens_per_s == Approx(1000));
  CHECK(*r.tokens_per_device_hour == Approx(120000 / (680.0 / 3600)));
  CHECK(r.notes.empty());

  const std::string text = goodput_text(r);
  CHECK_THAT(text, Contains("Job 42 (gpt, hpctrain): 3 runs, 2 requeues"));
  CHECK_THAT(text, Contains("GPU-hours charged  0.1889 (2m 50s over 3 runs x 4 GPUs)"));
  CHECK_THAT(text, Contains("goodput            70.6%"));
  CHECK_THAT(text, Contains("2 steps trained again (20.0 s)"));
  CHECK_THAT(text, Contains("run 0: USR1 to the batch script"));
  CHECK_THAT(text, Contains("requeued (USR1)"));
  const auto j = goodput_json(r);
  CHECK(j["requeues"] == 2);
  CHECK(j["runs"][1]["lost_s"].get<double>() == Approx(26));
  CHECK(j["device"] == "gpu");
}

TEST_CASE("goodput without metrics: the timeline's figures, said so, and CPU-hours without GPUs") {
  std::string tl = event("start", 5, 0,
                         R"(,"nodelist":"n1","nodes":"1","tasks":"2","gpus_per_node":"0",)"
                         R"("cpus_per_node":"4")") +
                   end(65, 0, "failed", 3, "");
  const GoodputReport r = compute_goodput(facts(), parse_timeline(tl, "t"), nullptr);
  REQUIRE(r.runs.size() == 1);
  CHECK_FALSE(r.gpu_job);
  CHECK(r.devices == 4);
  CHECK(r.charged_device_s == Approx(240));
  CHECK(r.runs[0].lost_s == Approx(60));  // no checkpoint: the whole run is lost
  CHECK_FALSE(r.goodput);
  const std::string text = goodput_text(r);
  CHECK_THAT(text, Contains("CPU-hours charged"));
  CHECK_THAT(text, Contains("failed with exit status 3"));
  CHECK_THAT(text, Contains("note: no training steps with times"));
  CHECK_THAT(text, Contains("charged in CPU-hours"));
}

TEST_CASE(
    "goodput: a requeue the script could not make, but Slurm did (preemption), is a requeue") {
  // PreemptMode=REQUEUE: Slurm requeues the job itself, the script's scontrol requeue is refused.
  const std::string tl = start(0, 0) + end(10, 0, "requeue_failed", 75, "") + start(20, 1) +
                         end(30, 1, "completed", 0, "");
  const GoodputReport r = compute_goodput(facts(), parse_timeline(tl, "t"), nullptr);
  REQUIRE(r.runs.size() == 2);
  CHECK(r.runs[0].run.why == "requeued");
  CHECK(r.requeues == 1);
  // The last run of a job keeps what the script said.
  const std::string alone = start(0, 0) + end(10, 0, "requeue_failed", 75, "");
  CHECK(compute_goodput(facts(), parse_timeline(alone, "t"), nullptr).runs[0].run.why ==
        "requeue_failed");
}

TEST_CASE("goodput of a run with no end: still running or killed, figures to the last time seen") {
  std::string tl = start(10, 0);  // and a partial line being written
  tl += R"({"event":"end","ti)";
  const auto runs = parse_timeline(tl, "t");
  REQUIRE(runs.size() == 1);
  const auto m = parse_metrics_events(step(0, 25) + step(1, 35), "m");
  const GoodputReport r = compute_goodput(facts(), runs, &m);
  CHECK(r.runs[0].end == Approx(T0 + 35));
  CHECK(r.runs[0].lost_s == Approx(25));
  CHECK_THAT(goodput_text(r), Contains("run 0 has no end in the timeline"));
}

TEST_CASE("goodput of a run killed after its stop: it ran at least until the script's last line") {
  // A requeue whose program took longer than KillWait to stop: the batch script wrote its stop
  // and log marks, then SIGKILL came before its end; the next run starts 20 s later.
  const std::string tl = start(10, 0) + event("launch", 11, 0, "") +
                         event("log", 12, 0, R"(,"bytes":100)") +
                         event("stop", 30, 0, R"(,"signal":"USR1")") + start(50, 1) +
                         event("end", 80, 1, R"(,"exit":0,"why":"completed")");
  const auto runs = parse_timeline(tl, "t");
  REQUIRE(runs.size() == 2);
  CHECK_FALSE(runs[0].end);
  CHECK(runs[0].last_seen() == Approx(T0 + 30));
  CHECK(runs[1].last_seen() == Approx(T0 + 80));
  const GoodputReport r = compute_goodput(facts(), runs, nullptr);
  CHECK(r.runs[0].run_s == Approx(20));
  CHECK(r.runs[1].wait_s == Approx(20));
  CHECK(r.runs[1].run_s == Approx(30));
}

TEST_CASE("goodput readers refuse a line that is not a JSON object, naming file and line") {
  CHECK_THROWS_WITH(parse_timeline(start(1, 0) + "not json\n", "tl.jsonl"),
                    Contains("tl.jsonl:2") && Contains("is not a JSON object"));
  CHECK_THROWS_WITH(parse_timeline(R"({"event":"start"})"
                                   "\n",
                                   "tl.jsonl"),
                    Contains("tl.jsonl:1") && Contains("\"time\""));
  CHECK_THROWS_WITH(parse_timeline(event("pause", 1, 0, ""), "tl.jsonl"),
                    Contains("fix its event: start, launch, log, stop or end"));
  CHECK_THROWS_WITH(parse_metrics_events("{\"step\":1}\n[1]\n", "m.jsonl"), Contains("m.jsonl:2"));
  const auto old = parse_metrics_events(R"({"step":1,"tokens_per_s":5,"step_ms":3})"
                                        "\n",
                                        "m");
  CHECK(old.untimed_lines == 1);
  CHECK(old.steps.empty());
}

// Issue 35: gnuplot refused the script these made; they are named before anything is drawn.
TEST_CASE("goodput readers refuse times that cannot be a run's, naming file and line") {
  CHECK_THROWS_WITH(parse_timeline(R"({"event":"start","time":-5})"
                                   "\n",
                                   "tl.jsonl"),
                    Contains("tl.jsonl:1: \"time\" is -5"));
  CHECK_THROWS_WITH(parse_timeline(R"({"event":"start","time":1e300})"
                                   "\n",
                                   "tl.jsonl"),
                    Contains("tl.jsonl:1: \"time\" is 1e+300"));
  CHECK_THROWS_WITH(parse_timeline(start(100, 0) + end(50, 0, "completed", 0, ""), "tl.jsonl"),
                    Contains("tl.jsonl:2: \"time\"") && Contains("before the start of its run"));
  CHECK_THROWS_WITH(parse_timeline(start(100, 0) + event("stop", 10, 0, ""), "tl.jsonl"),
                    Contains("tl.jsonl:2:") && Contains("a run's stop comes after its start"));
}

TEST_CASE("goodput helpers: Slurm's CPUs per node, ISO 8601 times") {
  CHECK(sum_cpus_per_node("4(x2),2") == 10);
  CHECK(sum_cpus_per_node("16") == 16);
  CHECK(sum_cpus_per_node("") == 0);
  CHECK(sum_cpus_per_node("4(x") == 0);
  CHECK(sum_cpus_per_node("a") == 0);
  CHECK(parse_utc_iso8601("2026-11-25T10:00:00Z") == Approx(T0));
  CHECK(parse_utc_iso8601("2026-11-25T10:00:00.250Z") == Approx(T0 + 0.25));
  CHECK_FALSE(parse_utc_iso8601("yesterday"));
  CHECK_FALSE(parse_utc_iso8601("2026-11-25T10:00:00+01:00"));
}
