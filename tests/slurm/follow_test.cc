// `hpclaunch run` follows the job: exit status from the job's outcome (0, the job's own code,
// 143 for CANCELLED, 124 for TIMEOUT), log lines streamed within 1 s of being written, and
// PENDING shown with Slurm's reason while the cluster is full.
#include <signal.h>
#include <catch2/catch.hpp>

#include <regex>
#include <thread>

#include "harness.h"

using namespace slt;

TEST_CASE("run exits with the job's own exit code and says FAILED", "[slurm][follow][exit]") {
  Workspace ws("exit3");
  auto r = ws.hpclaunch(ws.job_args("run", "1n2g"), {"PROBE_EXIT=3"});
  INFO(r.summary() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.err, "FAILED with exit code 3"));
  CHECK(probe_lines(r.out).size() == 2);  // the log is shown also for a failed job
  const std::string job = submitted_job_id(r.err);
  REQUIRE(!job.empty());
  CHECK(job_fields(job)["ExitCode"] == "3:0");
}

TEST_CASE("a job cancelled from outside while run follows: CANCELLED with when, exit 143",
          "[slurm][follow][cancel]") {
  Workspace ws("cancelled");
  const auto argv = ws.hpclaunch_argv(ws.job_args("run", "1n1g"));
  LiveProcess live(argv, ws.env({"PROBE_SLEEP=60"}), ws.work());
  REQUIRE(live.spawned());
  const std::string job = wait_submitted(live);
  REQUIRE(!job.empty());
  REQUIRE(live.wait_for(LiveProcess::kOut, "probe rank=0", 30s));  // running

  auto cancel = run({"scancel", job});
  REQUIRE(cancel.ok());
  int code = live.wait(60s);
  INFO("stdout:\n"
       << live.text(LiveProcess::kOut) << "\nstderr:\n"
       << live.text(LiveProcess::kErr));
  CHECK(code == 143);
  // "job N CANCELLED after 00:00:01 at 2026-11-22T05:34:57" (scontrol's EndTime; who cancelled
  // it only sacct knows, and this cluster has no accounting).
  CHECK(std::regex_search(
      live.text(LiveProcess::kErr),
      std::regex("job " + job + " CANCELLED.* at \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d")));
  CHECK(job_fields(job)["JobState"] == "CANCELLED");
}

TEST_CASE("run streams each log line within 1 s of the job writing it", "[slurm][follow][stream]") {
  Workspace ws("stream");
  const auto argv = ws.hpclaunch_argv(ws.job_args("run", "1n1g"));
  const int ticks = 10;
  LiveProcess live(argv, ws.env({"PROBE_TICKS=" + std::to_string(ticks), "PROBE_TICK_SECONDS=0.5"}),
                   ws.work());
  REQUIRE(live.spawned());
  int code = live.wait(90s);
  INFO("stdout:\n"
       << live.text(LiveProcess::kOut) << "\nstderr:\n"
       << live.text(LiveProcess::kErr));
  REQUIRE(code == 0);

  // "0: tick I EPOCH": EPOCH is when the probe wrote it; the cluster runs on this machine, so
  // its clock is ours.
  static const std::regex tick(R"(^\s*0: tick (\d+) (\d+\.\d+)$)");
  int seen = 0;
  double worst = 0;
  for (const auto& line : live.lines(LiveProcess::kOut)) {
    std::smatch m;
    if (!std::regex_match(line.text, m, tick)) continue;
    ++seen;
    double written = std::stod(m[2]);
    double read = std::chrono::duration<double>(line.at.time_since_epoch()).count();
    double delay = read - written;
    INFO("tick " << m[1] << " read " << delay << " s after it was written");
    CHECK(delay < 1.0);
    CHECK(delay > -0.05);
    worst = std::max(worst, delay);
  }
  CHECK(seen == ticks);
  WARN("worst streaming delay: " << worst << " s");
}

TEST_CASE("run shows PENDING with Slurm's reason while the cluster is full",
          "[slurm][follow][pending]") {
  Workspace ws("pending");
  // A 2n4g job takes every GPU of the cluster for a minute.
  auto filler = ws.hpclaunch(ws.job_args("submit", "2n4g"), {"PROBE_SLEEP=60"});
  INFO(filler.summary() << "\nstderr:\n" << filler.err);
  REQUIRE(filler.exit_code == 0);
  const std::string filler_id = lines_of(filler.out).at(0);
  REQUIRE(wait_job_state(filler_id, {"RUNNING"}) == "RUNNING");

  const auto argv = ws.hpclaunch_argv(ws.job_args("run", "1n1g"));
  LiveProcess live(argv, ws.env(), ws.work());
  REQUIRE(live.spawned());
  const std::string job = wait_submitted(live);
  REQUIRE(!job.empty());
  // Resources (the GPUs are taken) or Priority (queued behind another job), as Slurm says.
  auto pending = live.wait_for(LiveProcess::kErr, "PENDING (", 20s);
  INFO("stderr:\n" << live.text(LiveProcess::kErr));
  REQUIRE(pending);
  CHECK(std::regex_search(pending->text,
                          std::regex("job " + job + " PENDING \\((Resources|Priority)\\)")));
  CHECK(job_fields(job)["JobState"] == "PENDING");
  auto status = ws.hpclaunch({"status", job});
  INFO("status:\n" << status.out);
  CHECK(std::regex_search(status.out, std::regex("\nstate +PENDING \\((Resources|Priority)\\)\n")));

  REQUIRE(run({"scancel", job, filler_id}).ok());
  CHECK(live.wait(60s) == 143);
  CHECK(contains(live.text(LiveProcess::kErr), "job " + job + " CANCELLED"));
}

// Slurm counts time limits in whole minutes and checks them every 30 s, so a TIMEOUT takes 60 to
// 90 s: too slow for every run. `slurm_tests "[timeout]"` runs it by hand.
TEST_CASE("a job past its time limit: run says TIMEOUT and exits 124",
          "[.][slurm][follow][timeout]") {
  Workspace ws("timeout");
  auto r = ws.hpclaunch(
      ws.job_args("run", "1n1g", {"--set", "shape.time=1", "--set", "job.signal_seconds=0"}),
      {"PROBE_SLEEP=300"}, 200s);
  INFO(r.summary() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 124);
  CHECK(contains(r.err, "TIMEOUT"));
}

TEST_CASE("Ctrl-C detaches: exit 130, the job goes on, the reattach command is printed",
          "[slurm][follow][interrupt]") {
  Workspace ws("detach");
  const auto argv = ws.hpclaunch_argv(ws.job_args("run", "1n1g"));
  LiveProcess live(argv, ws.env({"PROBE_SLEEP=60"}), ws.work());
  REQUIRE(live.spawned());
  const std::string job = wait_submitted(live);
  REQUIRE(!job.empty());
  REQUIRE(live.wait_for(LiveProcess::kOut, "probe rank=0", 30s));
  kill(-live.pid(), SIGINT);  // what a terminal's Ctrl-C sends: the whole foreground group
  int code = live.wait(30s);
  INFO("stderr:\n" << live.text(LiveProcess::kErr));
  CHECK(code == 130);
  CHECK(contains(live.text(LiveProcess::kErr), "hpclaunch logs -f " + job));
  CHECK(job_fields(job)["JobState"] == "RUNNING");
  // Reattached with logs -f, the log so far comes again and then the end.
  REQUIRE(run({"scancel", job}).ok());
  auto logs = ws.hpclaunch({"logs", "-f", job});
  CHECK(logs.exit_code == 143);
  CHECK(probe_lines(logs.out).size() == 1);
}

TEST_CASE("Ctrl-C with --cancel-on-interrupt cancels the job: CANCELLED, exit 143",
          "[slurm][follow][interrupt]") {
  Workspace ws("interrupt-cancel");
  const auto argv = ws.hpclaunch_argv(ws.job_args("run", "1n1g", {"--cancel-on-interrupt"}));
  LiveProcess live(argv, ws.env({"PROBE_SLEEP=60"}), ws.work());
  REQUIRE(live.spawned());
  const std::string job = wait_submitted(live);
  REQUIRE(!job.empty());
  REQUIRE(live.wait_for(LiveProcess::kOut, "probe rank=0", 30s));
  kill(-live.pid(), SIGINT);
  int code = live.wait(60s);
  INFO("stderr:\n" << live.text(LiveProcess::kErr));
  CHECK(code == 143);
  CHECK(contains(live.text(LiveProcess::kErr), "job " + job + " CANCELLED"));
  CHECK(job_fields(job)["JobState"] == "CANCELLED");
}

TEST_CASE("a requeued job is followed through its second run", "[slurm][follow][requeue]") {
  Workspace ws("requeue");
  const auto argv = ws.hpclaunch_argv(ws.job_args("run", "1n1g"));
  LiveProcess live(argv, ws.env({"PROBE_SLEEP=3"}), ws.work());
  REQUIRE(live.spawned());
  const std::string job = wait_submitted(live);
  REQUIRE(!job.empty());
  REQUIRE(live.wait_for(LiveProcess::kOut, "probe rank=0", 30s));
  REQUIRE(run({"scontrol", "requeue", job}).ok());
  // A requeued job may start again only ~2 minutes later (BeginTime); let it go sooner. Not in
  // the second its old run ended: slurmd refuses a credential made in the second it revoked the
  // job's credential, or earlier ("Job credential revoked"), and the job then fails. PENDING
  // (no longer COMPLETING) says the nodes have revoked it; then wait for the next second.
  REQUIRE(wait_job_state(job, {"PENDING"}) == "PENDING");
  wait_for_next_second();
  bool released = false;
  for (int i = 0; i < 20 && !released; ++i) {
    released = run({"scontrol", "update", "JobId=" + job, "StartTime=now"}).ok();
    if (!released) std::this_thread::sleep_for(250ms);
  }
  REQUIRE(released);
  int code = live.wait(60s);
  const std::string err = live.text(LiveProcess::kErr);
  INFO("stdout:\n" << live.text(LiveProcess::kOut) << "\nstderr:\n" << err);
  CHECK(code == 0);
  CHECK(contains(err, "restart 1"));
  CHECK(contains(err, "COMPLETED with exit code 0"));
  CHECK(probe_lines(live.text(LiveProcess::kOut)).size() == 2);  // the log was appended to
  CHECK(job_fields(job)["Restarts"] == "1");
}
