// Faults: the controller is down at submit time, or restarts while `run` follows a job.
// These tests stop the test cluster's slurmctld by its pid file and start it again as
// scripts/testcluster.sh does (state kept, so jobs survive), also when they fail.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

#include "harness.h"

using namespace slt;

TEST_CASE(
    "slurmctld down at submit: one clear line after bounded retries, exit 69, nothing submitted",
    "[slurm][fault][submit]") {
  Workspace ws("ctld-down");
  ControllerRestarter restart_controller;  // declared after ws: runs before ws cancels its jobs

  // Slurm's clients try to reach a dead controller for 9 s by default before they fail;
  // hpclaunch's 4 sbatch tries (each followed by a squeue looking for the job) would take a
  // minute and a half. With MessageTimeout=2 in its slurm.conf they take seconds.
  const std::string conf = impatient_slurm_conf(ws.dir());
  stop_slurmctld();
  REQUIRE(!slurmctld_running());

  auto t0 = std::chrono::steady_clock::now();
  auto r = ws.hpclaunch(ws.job_args("submit", "1n1g"), {"SLURM_CONF=" + conf}, 180s);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.summary() << "\nstdout:\n"
                   << r.out << "\nstderr:\n"
                   << r.err << "\ntook " << took << " s");
  CHECK(r.exit_code == 69);  // the cluster unreachable: its own status, not bad input (2)
  CHECK(r.out.empty());
  CHECK(count_nonempty_lines(r.err) == 1);
  CHECK(r.err.rfind("hpclaunch: error: ", 0) == 0);
  CHECK(contains(r.err, "attempts"));   // it retried ...
  CHECK(contains(r.err, "slurmctld"));  // ... and says what to check
  CHECK(took > 10);                     // 2 + 4 + 8 s of back-off between the tries
  CHECK(took < 60);                     // bounded
  // Nothing written: no run directory.
  std::error_code ec;
  CHECK(!std::filesystem::exists(ws.work() + "/runs/" + ws.job_name(), ec));
  bool any_run = false;
  for (std::filesystem::directory_iterator it(ws.work() + "/runs", ec), end; !ec && it != end;
       it.increment(ec))
    any_run = true;
  CHECK(!any_run);

  // Once the controller is back, it knows of no job by this test's name: nothing was queued.
  start_slurmctld();
  REQUIRE(slurmctld_running());
  auto q = run({"squeue", "--noheader", "--name=" + ws.job_name(), "--format=%i %T"});
  REQUIRE(q.ok());
  CHECK(q.out.empty());
  auto all = run({"scontrol", "show", "job", "--oneliner"});
  CHECK(!contains(all.out, "JobName=" + ws.job_name() + " "));
}

TEST_CASE("slurmctld restarts while run follows: following resumes, the job's real exit status",
          "[slurm][fault][follow]") {
  Workspace ws("ctld-restart");
  ControllerRestarter restart_controller;

  const auto argv = ws.hpclaunch_argv(ws.job_args("run", "1n1g"));
  // Runs ~4 s, then fails with 5: the end happens while the controller is away. hpclaunch's
  // scontrol gives up on the dead controller after ~2 s (MessageTimeout=2), not 18 s.
  const std::string conf = impatient_slurm_conf(ws.dir());
  LiveProcess live(argv, ws.env({"SLURM_CONF=" + conf, "PROBE_SLEEP=4", "PROBE_EXIT=5"}),
                   ws.work());
  REQUIRE(live.spawned());
  const std::string job = wait_submitted(live);
  REQUIRE(!job.empty());
  REQUIRE(live.wait_for(LiveProcess::kOut, "probe rank=0", 30s));  // running

  const std::string log = job_fields(job)["StdOut"];  // while the controller can say
  REQUIRE(!log.empty());
  stop_slurmctld();
  // Away until hpclaunch has noticed, and until the job has ended: srun writes the rank's exit
  // into the log, and the controller learns of it only when it is back.
  CHECK(live.wait_for(LiveProcess::kErr, "retrying", 60s));
  CHECK(wait_file_contains(log, "Exited with exit code 5", 60s));
  start_slurmctld();
  REQUIRE(slurmctld_running());

  int code = live.wait(120s);
  const std::string err = live.text(LiveProcess::kErr);
  INFO("stdout:\n" << live.text(LiveProcess::kOut) << "\nstderr:\n" << err);
  CHECK(code == 5);
  CHECK(contains(err, "job " + job + " FAILED with exit code 5"));
  CHECK(contains(err, "retrying"));                     // it noticed the controller was gone
  CHECK(contains(err, "reached the scheduler again"));  // and came back to the job
  CHECK(job_fields(job)["ExitCode"] == "5:0");
}

// An sbatch whose reply is lost (controller frozen, or a slow network) is retried; the
// controller may later carry out every try. hpclaunch keeps one job and cancels the other
// jobs carrying its tag while they are still held (sbatch --hold), so none of them ever runs.
TEST_CASE("slurmctld frozen at submit (replies lost): one job runs, extras cancelled while held",
          "[slurm][fault][submit]") {
  Workspace ws("ctld-frozen");
  const std::string conf = impatient_slurm_conf(ws.dir());
  const auto argv = ws.hpclaunch_argv(ws.job_args("submit", "1n1g"));
  // sbatch through a wrapper that notes when each try starts and ends.
  const std::string tries = ws.dir() + "/sbatch.tries";
  const std::string path = sbatch_counting_tries(ws.dir() + "/bin", tries);
  int code = -1;
  std::string out, err;
  {
    ControllerFreeze freeze;
    REQUIRE(freeze.frozen());
    LiveProcess submit(argv, ws.env({"SLURM_CONF=" + conf, "PATH=" + path}), ws.work());
    REQUIRE(submit.spawned());
    // Two sbatch tries time out (2 s each, with a squeue and the back-off between), then it
    // thaws.
    REQUIRE(wait_until([&] { return count_lines_with(read_file(tries), "end") >= 2; }, 60s));
    freeze.thaw();
    code = submit.wait(120s);
    out = submit.text(LiveProcess::kOut);
    err = submit.text(LiveProcess::kErr);
  }
  INFO("exit " << code << "\nstdout:\n" << out << "\nstderr:\n" << err);
  // Every job the controller ever made under this test's name (finished ones included).
  std::vector<std::string> ids, kept;
  auto look = [&] {
    auto all = run({"scontrol", "show", "job", "--oneliner"});
    REQUIRE(all.ok());
    ids.clear();
    kept.clear();
    std::smatch m;
    static const std::regex job_line(R"(^JobId=(\d+) JobName=(\S+) )");
    for (const auto& line : lines_of(all.out)) {
      if (!std::regex_search(line, m, job_line) || m[2] != ws.job_name()) continue;
      ids.push_back(m[1]);
      bool cancelled_unrun = line.find("JobState=CANCELLED") != std::string::npos &&
                             line.find("RunTime=00:00:00") != std::string::npos;
      if (!cancelled_unrun) kept.push_back(m[1]);
    }
  };
  // Each try that reached the frozen controller becomes a job once it thaws: count once the
  // controller shows as many jobs as there were tries (or after 30 s).
  const int started = count_lines_with(read_file(tries), "start");
  INFO("sbatch tries: " << started);
  wait_until(
      [&] {
        look();
        return code != 0 || static_cast<int>(ids.size()) >= started;
      },
      30s);
  INFO("jobs named " << ws.job_name() << ": " << ids.size()
                     << ", not cancelled before running: " << kept.size());
  if (code == 0) {
    // Submitted: exactly the one job it printed; any other try was cancelled before it ran.
    REQUIRE(kept.size() == 1);
    CHECK(lines_of(out).at(0) == kept.front());
  } else {
    // Or given up after its retries (unreachable: 69; refused: 2): then nothing at all.
    CHECK((code == 69 || code == 2));
    CHECK(ids.empty());
  }
}
