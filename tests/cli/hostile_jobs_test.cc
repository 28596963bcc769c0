// Hostile job ids, waits and exit statuses (docs/security.md, "Waits and exit statuses";
// docs/backends.md lists the statuses). status, logs and cancel answer alike: a malformed id
// (0, which scontrol takes for every job; 01; -1; --me) is bad input, exit 2, before any Slurm
// command runs; an id the scheduler does not know is 75; a scheduler that cannot be reached is
// 69, within a bound, also for logs without -f (it looped forever). Slurm's commands are stubs
// here that answer as a down or forgetful controller does and note every call.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "hostile_cases.h"

using namespace cli_test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// scontrol, scancel, sacct, sbatch and squeue that note their argv in stubs/calls and answer as
// STUB_SLURM says: "down" (slurmctld unreachable), "busy" (it refuses for now) or "unknown" (no
// such job, no accounting).
void install_stubs(const Sandbox& sb) {
  const std::string stub =
      "#!/bin/sh\n"
      "echo \"${0##*/} $*\" >>\"$STUB_LOG\"\n"
      "if [ \"$STUB_SLURM\" = down ]; then\n"
      "  echo \"${0##*/}: error: Unable to contact slurm controller (connect failure)\" >&2\n"
      "elif [ \"$STUB_SLURM\" = busy ]; then\n"
      "  echo \"${0##*/}: error: Batch job submission failed: Resource temporarily "
      "unavailable\" >&2\n"
      "elif [ \"${0##*/}\" = sacct ]; then\n"
      "  echo 'sacct: error: Slurm accounting storage is disabled' >&2\n"
      "else\n"
      "  echo 'slurm_load_jobs error: Invalid job id specified' >&2\n"
      "fi\n"
      "exit 1\n";
  for (const char* name : {"scontrol", "scancel", "sacct", "sbatch", "squeue"}) {
    sb.write("stubs/" + std::string(name), stub);
    fs::permissions(sb.root() / "stubs" / name, fs::perms::owner_all);
  }
}

struct JobRun {
  Run run;
  std::string calls;  // what the stubs were asked, one line each
};

// hpclaunch ARGS with the stubs first on PATH; nothing but stubs/ may change in the sandbox.
JobRun run_with_stubs(const Sandbox& sb, const std::vector<std::string>& args,
                      const std::string& mode) {
  install_stubs(sb);
  auto strip = [](std::map<std::string, std::string> m) {
    for (auto it = m.begin(); it != m.end();)
      it = it->first.rfind("stubs", 0) == 0 ? m.erase(it) : ++it;
    return m;
  };
  auto before = strip(sb.snapshot());
  std::vector<std::string> env = sb.env();
  for (auto& e : env)
    if (e.rfind("PATH=", 0) == 0) e = "PATH=" + (sb.root() / "stubs").string() + ":" + e.substr(5);
  env.push_back("STUB_SLURM=" + mode);
  env.push_back("STUB_LOG=" + (sb.root() / "stubs/calls").string());
  std::vector<std::string> argv = {hpclaunch_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  JobRun j;
  j.run = spawn(argv, sb.work(), env, std::chrono::seconds(30));
  std::error_code ec;
  if (fs::exists(sb.root() / "stubs/calls", ec)) j.calls = read_file(sb.root() / "stubs/calls");
  CHECK(strip(sb.snapshot()) == before);  // nothing written
  return j;
}

void check_one_line(const Run& r) {
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

const std::vector<std::string> kVerbs = {"status", "logs", "cancel"};

}  // namespace

TEST_CASE("hostile job ids: malformed ids are exit 2 from status, logs and cancel alike",
          "[hostile][jobs]") {
  const std::vector<std::string> ids = {"0",   "00", "01",          "-1",  "abc",
                                        "1_x", "1_", "12345678901", "1 2", "../x"};
  for (const auto& verb : kVerbs) {
    for (const auto& id : ids) {
      DYNAMIC_SECTION(verb << " '" << id << "'") {
        Sandbox sb;
        JobRun j = run_with_stubs(sb, {verb, id}, "unknown");
        INFO(j.run.describe());
        CHECK(j.run.status == 2);
        CHECK(j.run.out.empty());
        check_one_line(j.run);
        CHECK_THAT(j.run.err, StartsWith("hpclaunch: error: " + id + ": not a job id"));
        CHECK_THAT(j.run.err, Contains("check the id"));
        CHECK(j.calls.empty());  // scontrol never saw it (0 would list every job)
      }
    }
  }
}

TEST_CASE("hostile job ids: run.json and sweep.json ids that are not job ids", "[hostile][jobs]") {
  for (const std::string id : {"0", "--me", "1;2"}) {
    const std::string record = "{\"job_id\": \"" + id + "\", \"backend\": \"slurm\"}";
    for (const auto& verb : kVerbs) {
      DYNAMIC_SECTION(verb << " of a run whose run.json says job_id '" << id << "'") {
        Sandbox sb;
        sb.write("work/runs/r1/run.json", record);
        JobRun j = run_with_stubs(sb, {verb, "r1"}, "unknown");
        INFO(j.run.describe());
        CHECK(j.run.status == 2);
        check_one_line(j.run);
        CHECK_THAT(j.run.err, Contains("runs/r1/run.json: job_id") && Contains("is not a job id") &&
                                  Contains("fix the file or remove that run directory"));
        CHECK(j.calls.empty());
      }
    }
  }
  for (const std::string id : {"--me", "0"}) {
    BadCase c{"sweep.json with job_id '" + id + "' (it would reach scancel)",
              {"sweep", "--presets", "1n1g", "--strategy", "ddp", "--local", "--out", "sw"},
              {{"work/sw/sweep.json",
                "{\"points\": [{\"preset\": \"1n1g\", \"strategy\": \"ddp\", "
                "\"job_id\": \"" +
                    id + "\"}]}"}},
              {"sw/sweep.json: points[0].job_id", "is not a job id", "fix it"}};
    DYNAMIC_SECTION(c.name) { check_bad_input(c); }
  }
}

TEST_CASE("hostile job ids: an id the scheduler does not know is 75 from every verb",
          "[hostile][jobs]") {
  for (const auto& verb : kVerbs) {
    DYNAMIC_SECTION(verb) {
      Sandbox sb;
      JobRun j = run_with_stubs(sb, {verb, "987654"}, "unknown");
      INFO(j.run.describe() << "calls:\n" << j.calls);
      CHECK(j.run.status == 75);
      CHECK(j.run.out.empty());
      check_one_line(j.run);
      CHECK_THAT(j.run.err, StartsWith("hpclaunch: job 987654 is not known to the scheduler"));
      CHECK_THAT(j.calls, StartsWith("scontrol show job --oneliner 987654\n"));
      CHECK_THAT(j.calls, !Contains("scancel"));  // nothing to cancel, and scancel would not say
    }
  }
  SECTION("status --json: the record says found: false, and the status is 75 too") {
    Sandbox sb;
    JobRun j = run_with_stubs(sb, {"status", "987654", "--json"}, "unknown");
    CHECK(j.run.status == 75);
    CHECK_THAT(j.run.out, Contains("\"found\": false"));
  }
}

TEST_CASE("hostile waits: an unreachable scheduler is 69 within a bound, logs without -f too",
          "[hostile][jobs][hang]") {
  for (const auto& verb : kVerbs) {
    DYNAMIC_SECTION(verb << " while slurmctld is down") {
      Sandbox sb;
      auto t0 = std::chrono::steady_clock::now();
      JobRun j = run_with_stubs(sb, {verb, "4242"}, "down");
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      INFO(j.run.describe() << "calls:\n" << j.calls << "took " << took << " s");
      CHECK_FALSE(j.run.timed_out);  // logs looped forever here
      CHECK(j.run.status == 69);
      CHECK(j.run.out.empty());
      check_one_line(j.run);
      CHECK_THAT(j.run.err, StartsWith("hpclaunch: error: cannot reach slurmctld") &&
                                Contains("check that slurmctld is up"));
      CHECK(took < 20);
    }
  }
  SECTION("submit while slurmctld is down: 69 after sbatch's bounded retries, nothing left") {
    Sandbox sb;
    JobRun j = run_with_stubs(sb, {"submit", "--preset", "1n1g", "--backend", "slurm"}, "down");
    INFO(j.run.describe());
    CHECK_FALSE(j.run.timed_out);
    CHECK(j.run.status == 69);
    check_one_line(j.run);
    CHECK_THAT(j.run.err, Contains("after 4 attempts"));
  }
  SECTION("submit while slurmctld refuses for now (busy): retry later, 69, not bad input") {
    Sandbox sb;
    JobRun j = run_with_stubs(sb, {"submit", "--preset", "1n1g", "--backend", "slurm"}, "busy");
    INFO(j.run.describe());
    CHECK_FALSE(j.run.timed_out);
    CHECK(j.run.status == 69);
    check_one_line(j.run);
    CHECK_THAT(j.run.err, Contains("Resource temporarily unavailable"));
  }
}
