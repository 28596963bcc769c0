// Job arrays, dependencies, mail, --exclusive and the per-run profile flags (docs/jobs.md) from
// the command line: bad values are one line, exit status 2, nothing written or submitted; the
// local backend refuses what it cannot honour; hostile values stay text in the script.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "bad_input.h"
#include "harness.h"
#include "slurm_stubs.h"
#include "support/prerequisite.h"

using namespace cli_test;
using Catch::Matchers::Contains;

TEST_CASE("bad input: job arrays, dependencies and mail", "[bad-input]") {
  check_all({
      {"an array range without its end",
       render_args({"--array", "1-"}),
       {},
       {"--array: job.array", "\"1-\" is not a job array", "has no last index", "0-9%2"}},
      {"an array range that runs backwards",
       render_args({"--array", "5-3"}),
       {},
       {"--array: job.array", "runs backwards (write 3-5)"}},
      {"an array limit of zero",
       render_args({"--array", "0-9%0"}),
       {},
       {"--array: job.array", "the limit after '%'", "leave the %LIMIT out"}},
      {"an array step of zero",
       render_args({"--array", "0-15:0"}),
       {},
       {"--array: job.array", "the step after ':'"}},
      {"an array in the project file",
       render_args({}),
       {{kProject, "{\"job\": {\"array\": \"0-3,\"}}"}},
       {"hpclaunch.json: job.array", "an empty element"}},
      {"an array whose tasks would share one log",
       render_args({"--array", "0-3", "--set", "job.output=all.log"}),
       {},
       {"job.output", "one file for every task of the array", "put %a"}},
      {"an unknown dependency type",
       render_args({"--after", "12:afterwards"}),
       {},
       {"--after: job.after", "unknown dependency type \"afterwards\"", "known types"}},
      {"a dependency on job 0",
       render_args({"--after", "0"}),
       {},
       {"--after: job.after", "\"0\" is not a job id", "JOBID[:TYPE]"}},
      {"a dependency on job -1",
       render_args({"--after=-1"}),
       {},
       {"--after: job.after", "\"-1\" is not a job id"}},
      {"a dependency written the Slurm way round",
       render_args({"--after", "afterok:12"}),
       {},
       {"\"afterok\" is not a job id", "4242:afterany"}},
      {"one bad id among several",
       render_args({"--after", "12,x3"}),
       {},
       {"--after: job.after", "\"x3\" is not a job id"}},
      {"an unknown mail type",
       render_args({"--mail-type", "END,FIAL"}),
       {},
       {"--mail-type: job.mail_type", "unknown mail type \"FIAL\"", "did you mean \"FAIL\""}},
      {"a mail user that is no address",
       render_args({"--mail-user", "ada"}),
       {},
       {"--mail-user: job.mail_user", "\"ada\" is not a mail address", "ada@example.org"}},
      {"a mail user that would run a command",
       render_args({"--mail-user", "$(touch CANARY)"}),
       {},
       {"--mail-user: job.mail_user", "is not a mail address"}},
      {"a mail user with a quote, in the project file",
       render_args({}),
       {{kProject, "{\"job\": {\"mail_user\": \"a'b@x.org\"}}"}},
       {"hpclaunch.json: job.mail_user", "is not a mail address"}},
      {"exclusive that is not a boolean",
       render_args({"--set", "profile.exclusive=maybe"}),
       {},
       {"profile.exclusive", "expected true or false"}},
      {"a dependency through sbatch_extra",
       render_args({"--set", "profile.sbatch_extra=[\"--dependency=afterok:5\"]"}),
       {},
       {"profile.sbatch_extra", "--dependency is rendered from the spec"}},
      {"an array through sbatch_extra, abbreviated",
       render_args({"--set", "profile.sbatch_extra=[\"--arr=0-3\"]"}),
       {},
       {"profile.sbatch_extra", "--arr (sbatch reads it as --array) is rendered from the spec"}},
      {"a sweep of arrays",
       {"sweep", "--presets", "1n1g", "--strategy", "ddp", "--local", "--out", "sw", "--set",
        "job.array=0-1"},
       {},
       {"job.array: \"0-1\" makes an array of jobs", "sweep and tune measure one job per point",
        "--set job.array=null"}},
  });
}

TEST_CASE("bad input: the local backend refuses dependencies and arrays", "[bad-input]") {
  check_all({
      {"submit --local --after",
       {"submit", "--preset", "1n1g", "--strategy", "ddp", "--local", "--after", "5"},
       {},
       {"--backend local", "cannot wait for other jobs", "--dependency=afterok:5", "use Slurm",
        "hpclaunch run ... && hpclaunch run ..."}},
      {"run --local --array",
       {"run", "--preset", "1n1g", "--strategy", "ddp", "--local", "--array", "0-2"},
       {},
       {"--backend local", "runs no job arrays", "--array=0-2", "use Slurm for the array"}},
  });
}

TEST_CASE("hostile values: per-run flags stay text in the #SBATCH lines", "[hostile]") {
  const std::vector<std::string> values = {
      "$(touch CANARY)", "`touch CANARY`", "a\"b",  "a'b",
      "x\\\" # y",       "; touch CANARY", "f&g|h", "--nodes=99"};
  const std::string shellcheck = find_program("shellcheck");
  for (const auto& v : values) {
    INFO("value: " << v);
    Sandbox sb;
    install_slurm_stubs(sb);
    Run r = sb.hpclaunch({"render",
                          "--preset",
                          "1n2g",
                          "--strategy",
                          "ddp",
                          "-o",
                          "job.sbatch",
                          "--constraint",
                          v,
                          "--reservation",
                          v,
                          "--qos",
                          v,
                          "--partition",
                          v,
                          "--account",
                          v,
                          "--exclusive",
                          "--array",
                          "0-2%1",
                          "--after",
                          "12:afterany",
                          "--after",
                          "13",
                          "--mail-type",
                          "end,fail",
                          "--mail-user",
                          "ada@example.org"});
    INFO(r.describe());
    REQUIRE(r.status == 0);
    const std::string script = read_file(sb.work() / "job.sbatch");
    for (const auto& args : sbatch_directive_args(script)) CHECK(args.size() == 1);
    auto opts = sbatch_options(script);
    for (const char* opt : {"--constraint", "--reservation", "--qos", "--partition", "--account"}) {
      INFO(opt);
      CHECK(opts[opt] == v);
    }
    CHECK(opts["--array"] == "0-2%1");
    CHECK(opts["--dependency"] == "afterany:12,afterok:13");
    CHECK(opts["--mail-type"] == "END,FAIL");
    CHECK(opts["--mail-user"] == "ada@example.org");
    CHECK(opts["--output"] == "%x-%A_%a.out");
    CHECK(opts["--nodes"] == "1");
    CHECK(Contains("#SBATCH --exclusive\n").match(script));

    Run syntax = spawn({"/bin/bash", "-n", "job.sbatch"}, sb.work(), sb.env());
    CHECK(syntax.status == 0);
    if (shellcheck.empty()) {
      hpc::test::missing_prerequisite("shellcheck");
    } else {
      Run sc = spawn({shellcheck, "job.sbatch"}, sb.work(), sb.env());
      INFO(sc.describe());
      CHECK(sc.status == 0);
    }
    Run job = run_job_script(sb, (sb.work() / "job.sbatch").string(),
                             {"SLURM_ARRAY_JOB_ID=4242", "SLURM_ARRAY_TASK_ID=1"});
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK(canaries(sb).empty());
  }
}

// The test cluster's sbatch (Slurm 22.05) as the oracle for --array: what sbatch refuses,
// hpclaunch refuses; what hpclaunch accepts, sbatch accepts. hpclaunch is stricter where sbatch
// reads a likely typo somehow (measured: sbatch takes all of kStricter).
TEST_CASE("job arrays: hpclaunch's grammar against the real sbatch --test-only",
          "[sbatch][job-features]") {
  const std::string sbatch = find_program("sbatch");
  const char* conf = std::getenv("SLURM_CONF");
  Sandbox sb;
  std::vector<std::string> env = sb.env();
  if (sbatch.empty() || !conf || !*conf)
    return hpc::test::missing_prerequisite("sbatch and SLURM_CONF of the test cluster");
  env.push_back(std::string("SLURM_CONF=") + conf);
  // A job the test cluster can hold, with every feature that needs no site setup.
  Run r = sb.hpclaunch({"render", "--preset", "1n1g", "--strategy", "ddp", "--set",
                        "shape.cpus_per_gpu=1", "--exclusive", "--mail-type", "END,FAIL",
                        "--mail-user", "ada@example.org", "-o", "job.sbatch"});
  REQUIRE(r.status == 0);
  Run plain = spawn({sbatch, "--test-only", "job.sbatch"}, sb.work(), env);
  INFO("sbatch --test-only job.sbatch: " << plain.describe());
  if (plain.status != 0 && plain.err.find("Unable to contact") != std::string::npos)
    return hpc::test::missing_prerequisite("the test cluster's controller");
  REQUIRE(plain.status == 0);

  const std::vector<std::string> both_accept = {"0-9", "0-15:4", "1,3,5", "0,6,16-18", "0-9%2",
                                                "7",   "3,1,3",  "4-4",   "0-1000"};
  const std::vector<std::string> both_refuse = {"1-", "5-3", "0-15:0", "0-15:", "3:2", "-1"};
  const std::vector<std::string> stricter = {"0-9%0", "0-9%", "1,,2", "1,", "01", "+1", "0-9%x"};
  auto sbatch_takes = [&](const std::string& a) {
    return spawn({sbatch, "--test-only", "--array=" + a, "job.sbatch"}, sb.work(), env).status == 0;
  };
  auto hpclaunch_takes = [&](const std::string& a) {
    return sb.hpclaunch({"render", "--preset", "1n1g", "--strategy", "ddp", "--array", a}).status ==
           0;
  };
  for (const auto& a : both_accept) {
    INFO("--array " << a);
    CHECK(sbatch_takes(a));
    CHECK(hpclaunch_takes(a));
  }
  for (const auto& a : both_refuse) {
    INFO("--array " << a);
    CHECK_FALSE(sbatch_takes(a));
    CHECK_FALSE(hpclaunch_takes(a));
  }
  for (const auto& a : stricter) {
    INFO("--array " << a);
    CHECK(sbatch_takes(a));
    CHECK_FALSE(hpclaunch_takes(a));
  }
}
