// SlurmBackend over a fake Host (tests/support/fake_host.h): the commands it runs, how it reads
// what sbatch, scontrol and sacct print, its retries on an unreachable controller, and what
// it cancels. tests/slurm runs the same code against a real cluster.
#include "backends/slurm_backend.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <regex>

#include "support/fake_host.h"

using namespace std::chrono_literals;
using hpc::test::failed;
using hpc::test::FakeHost;
using hpc::test::succeeded;

namespace {

const std::string kUnreachable =
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect "
    "failure)\n";

// A backend over a FakeHost that the test keeps a reference to; retries a few ms apart.
struct Fixture {
  FakeHost* host = nullptr;
  std::unique_ptr<hpc::SlurmBackend> backend;
  explicit Fixture(int attempts = 4) {
    auto h = std::make_unique<FakeHost>();
    host = h.get();
    hpc::SlurmBackendOptions o;
    o.submit_attempts = attempts;
    o.retry_delay = 5ms;
    o.command_timeout = 7s;
    backend = std::make_unique<hpc::SlurmBackend>(std::move(h), "slurm", o);
  }
};

hpc::SubmitRequest request() {
  hpc::SubmitRequest r;
  r.script = "#!/bin/bash\n#SBATCH --nodes=2\nsrun hpctrain\n";
  r.job_name = "gpt tiny";  // the run directory's name: "gpt_tiny"
  r.runs_root = "runs";     // relative: below the host's home
  r.workdir = "/work/project";
  r.error = "err-%j.txt";
  r.files = {{"spec.json", "{}\n"}};
  return r;
}

// The tag that submit gave sbatch (--comment=hpclaunch:<tag>).
std::string tag_of(const FakeHost::Call& sbatch) {
  for (const auto& a : sbatch.argv)
    if (a.rfind("--comment=hpclaunch:", 0) == 0) return a.substr(20);
  return "";
}

// squeue's "%i %k" lines: each id with the comment of the first sbatch call's tag.
FakeHost::Answer squeue_with_tag(FakeHost& host, std::vector<std::string> ids) {
  return [&host, ids](const FakeHost::Call&) {
    std::string out = "17 hpclaunch:0000000000000000\n";  // someone else's job
    const std::string tag = tag_of(host.calls_of("sbatch").at(0));
    for (const auto& id : ids) out += id + " hpclaunch:" + tag + "\n";
    return succeeded(out);
  };
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const hpc::BackendError& e) {
    return e.what();
  }
  return "(no BackendError)";
}

const std::string kRunDir = "/home/user/runs/gpt_tiny-42";

}  // namespace

TEST_CASE("submit: sbatch --parsable --hold with our tag, the run directory, then release",
          "[slurm_backend][submit]") {
  Fixture f;
  f.host->reply("sbatch", succeeded("42;cluster\n")).reply("scontrol", succeeded(""));
  hpc::SubmitResult r = f.backend->submit(request());
  CHECK(r.job_id == "42");
  CHECK(r.run_dir == kRunDir);
  CHECK(f.host->programs_run() == "sbatch scontrol");  // no squeue: nothing was retried

  const FakeHost::Call sbatch = f.host->calls_of("sbatch").at(0);
  REQUIRE(sbatch.argv.size() == 7);
  CHECK(sbatch.argv[1] == "--parsable");
  CHECK(sbatch.argv[2] == "--hold");
  CHECK(std::regex_match(tag_of(sbatch), std::regex("[0-9a-f]{16}")));
  const std::string dir_pattern = "/home/user/runs/gpt_tiny-%j";
  CHECK(sbatch.argv[4] == "--output=" + dir_pattern + "/%x-%j.out");
  CHECK(sbatch.argv[5] == "--error=" + dir_pattern + "/err-%j.txt");
  CHECK(sbatch.argv[6] == "--chdir=/work/project");
  CHECK(sbatch.options.stdin_data == request().script);
  CHECK(sbatch.options.cwd == "/work/project");
  CHECK(sbatch.options.timeout == 7s);
  CHECK(sbatch.options.env ==
        std::vector<std::string>{"HPCLAUNCH_RUN_DIR_PREFIX=/home/user/runs/gpt_tiny-"});
  CHECK(r.submit_command == "sbatch --parsable --hold --comment=hpclaunch:" + tag_of(sbatch) +
                                " --output=" + dir_pattern + "/%x-%j.out --error=" + dir_pattern +
                                "/err-%j.txt --chdir=/work/project < script.sbatch");

  // The held job's run directory holds the script and the request's files before it is let go.
  CHECK(f.host->dirs().count(kRunDir));
  REQUIRE(f.host->files().count(kRunDir + "/script.sbatch"));
  CHECK(f.host->files().at(kRunDir + "/script.sbatch").content == request().script);
  CHECK(f.host->files().at(kRunDir + "/script.sbatch").mode == 0755);
  CHECK(f.host->files().at(kRunDir + "/spec.json").mode == 0644);
  CHECK(f.host->calls_of("scontrol").at(0).argv ==
        std::vector<std::string>{"scontrol", "release", "42"});
}

TEST_CASE(
    "submit: variables passed by name: --export keeps the host's SBATCH_EXPORT mode, names "
    "only, the values left to the host",
    "[slurm_backend][submit][siteenv]") {
  for (const auto& [mode, expected] : std::vector<std::pair<std::string, std::string>>{
           {"", "--export=ALL,WANDB_API_KEY,HF_TOKEN"},
           {"NONE\n", "--export=NONE,WANDB_API_KEY,HF_TOKEN"},
           {"ALL,FOO\n", "--export=ALL,FOO,WANDB_API_KEY,HF_TOKEN"}}) {
    DYNAMIC_SECTION("SBATCH_EXPORT=" << mode) {
      Fixture f;
      if (mode.empty())
        f.host->reply("printenv", failed(""));  // unset: printenv exits 1
      else
        f.host->reply("printenv", succeeded(mode));
      f.host->reply("sbatch", succeeded("42\n")).reply("scontrol", succeeded(""));
      hpc::SubmitRequest r = request();
      r.env_from_submit = {"WANDB_API_KEY", "HF_TOKEN"};
      f.backend->submit(r);
      CHECK(f.host->calls_of("printenv").at(0).argv ==
            std::vector<std::string>{"printenv", "SBATCH_EXPORT"});
      const FakeHost::Call sbatch = f.host->calls_of("sbatch").at(0);
      CHECK(sbatch.argv.back() == expected);
      CHECK(sbatch.options.pass_env == r.env_from_submit);
    }
  }
  SECTION("no names: no --export, no printenv") {
    Fixture f;
    f.host->reply("sbatch", succeeded("42\n")).reply("scontrol", succeeded(""));
    f.backend->submit(request());
    CHECK(f.host->programs_run() == "sbatch scontrol");
    CHECK(f.host->calls_of("sbatch").at(0).options.pass_env.empty());
  }
}

TEST_CASE("submit: absolute log paths stay as given, and no workdir means no --chdir",
          "[slurm_backend][submit]") {
  Fixture f;
  f.host->reply("sbatch", succeeded("42\n")).reply("scontrol", succeeded(""));
  hpc::SubmitRequest r = request();
  r.output = "/scratch/logs/%j.out";
  r.error = "/scratch/logs/%j.err";
  r.workdir = "";
  f.backend->submit(r);
  const auto argv = f.host->calls_of("sbatch").at(0).argv;
  CHECK(argv.size() == 4);  // sbatch --parsable --hold --comment=...: Slurm's own defaults
  CHECK(f.host->calls_of("sbatch").at(0).options.cwd.empty());
}

TEST_CASE("submit: an unreachable controller is retried with a doubling delay, same tag",
          "[slurm_backend][submit][retry]") {
  Fixture f;
  f.host->reply("sbatch", failed(kUnreachable))
      .reply("sbatch", failed("sbatch: error: Socket timed out on send/recv operation\n"))
      .reply("sbatch", succeeded("42\n"));
  f.host->reply_always("squeue", succeeded("17 hpclaunch:0000000000000000\n"));
  f.host->reply("scontrol", succeeded(""));
  auto t0 = std::chrono::steady_clock::now();
  CHECK(f.backend->submit(request()).job_id == "42");
  CHECK(std::chrono::steady_clock::now() - t0 >= 15ms);  // 5 ms, then 10 ms
  // Before each new try it looks for a job carrying the tag (the lost reply case), and once
  // more after the success, for extras to cancel: none here.
  CHECK(f.host->programs_run() == "sbatch squeue sbatch squeue sbatch squeue scontrol");
  const auto tries = f.host->calls_of("sbatch");
  CHECK(tries[0].argv == tries[1].argv);
  CHECK(tries[1].argv == tries[2].argv);
  CHECK(f.host->calls_of("squeue").at(0).argv ==
        std::vector<std::string>{"squeue", "--noheader", "--all", "--format=%i %k"});
  CHECK(f.host->calls_of("scancel").empty());
}

TEST_CASE("submit: gives up after submit_attempts with one line that says what to check",
          "[slurm_backend][submit][retry]") {
  Fixture f(3);
  f.host->reply_always("sbatch", failed(kUnreachable));
  f.host->reply_always("squeue", succeeded(""));
  const std::string what = message_of([&] { f.backend->submit(request()); });
  CHECK(what ==
        "sbatch on fakehost failed after 3 attempts: sbatch: error: Batch job submission failed: "
        "Unable to contact slurm controller (connect failure); check that slurmctld is up "
        "(scontrol ping)");
  CHECK(f.host->calls_of("sbatch").size() == 3);
  CHECK(f.host->dirs().count(kRunDir) == 0);  // nothing written
  CHECK(f.host->calls_of("scancel").empty());
  CHECK(f.host->calls_of("scontrol").empty());
}

TEST_CASE("submit: sbatch's own refusal is not retried, and a missing sbatch says so",
          "[slurm_backend][submit]") {
  Fixture f;
  f.host->reply("sbatch", failed("sbatch: error: invalid partition specified: gpu\n"));
  CHECK(message_of([&] { f.backend->submit(request()); }) ==
        "sbatch on fakehost failed: sbatch: error: invalid partition specified: gpu");
  CHECK(f.host->programs_run() == "sbatch");

  Fixture none;  // nothing scripted: sbatch is not installed on that host
  const std::string what = message_of([&] { none.backend->submit(request()); });
  CHECK(what.rfind("cannot run sbatch on fakehost: sbatch: not found; is Slurm installed there?",
                   0) == 0);
  CHECK(none.host->calls_of("sbatch").size() == 1);
}

TEST_CASE("submit: sbatch timed out but the job exists: it is kept, extras are cancelled",
          "[slurm_backend][submit][retry]") {
  Fixture f;
  f.host->reply("sbatch", hpc::test::timed_out());
  // The lost reply's job is found by its tag, so sbatch is not run again; a slow controller
  // carried out a try twice, and the later job is cancelled while it is still held.
  f.host->reply("squeue", squeue_with_tag(*f.host, {"42"}));
  f.host->reply("squeue", squeue_with_tag(*f.host, {"42", "43"}));
  f.host->reply("scancel", succeeded("")).reply("scontrol", succeeded(""));
  hpc::SubmitResult r = f.backend->submit(request());
  CHECK(r.job_id == "42");
  CHECK(r.run_dir == kRunDir);
  CHECK(f.host->programs_run() == "sbatch squeue squeue scancel scontrol");
  CHECK(f.host->calls_of("scancel").at(0).argv == std::vector<std::string>{"scancel", "43"});
  CHECK(f.host->calls_of("scontrol").at(0).argv ==
        std::vector<std::string>{"scontrol", "release", "42"});
}

TEST_CASE("submit: output that is no job id is refused", "[slurm_backend][submit]") {
  Fixture f;
  f.host->reply("sbatch", succeeded("Submitted batch job 42\n"));  // not --parsable's form
  CHECK(message_of([&] { f.backend->submit(request()); }) ==
        "sbatch printed no job id (\"Submitted batch job 42\")");
  CHECK(f.host->calls_of("scontrol").empty());
}

TEST_CASE("submit: a failure after sbatch cancels the held job", "[slurm_backend][submit]") {
  SECTION("the run directory cannot be made") {
    Fixture f;
    f.host->reply("sbatch", succeeded("42\n")).reply("scancel", succeeded(""));
    f.host->fail_file_calls("sftp: disk quota exceeded");
    CHECK(message_of([&] { f.backend->submit(request()); }) ==
          "sftp: disk quota exceeded (job 42 was cancelled)");
    CHECK(f.host->programs_run() == "sbatch scancel");
    CHECK(f.host->calls_of("scancel").at(0).argv == std::vector<std::string>{"scancel", "42"});
  }
  SECTION("release: retried while the controller is away, then refused") {
    Fixture f;
    f.host->reply("sbatch", succeeded("42\n")).reply("scancel", succeeded(""));
    f.host->reply("scontrol", failed(kUnreachable));
    f.host->reply("scontrol", failed("slurm_update error: Invalid job id specified\n"));
    CHECK(message_of([&] { f.backend->submit(request()); }) ==
          "scontrol release 42: slurm_update error: Invalid job id specified (job 42 was "
          "cancelled)");
    CHECK(f.host->programs_run() == "sbatch scontrol scontrol scancel");
  }
}

TEST_CASE("status: scontrol's fields, values with spaces, -1 exit code while running",
          "[slurm_backend][status]") {
  Fixture f;
  f.host->reply(
      "scontrol",
      succeeded(
          "JobId=42 JobName=gpt tiny UserId=alice(1000) JobState=RUNNING Reason=None Restarts=1 "
          "RunTime=01:02:05 ExitCode=0:0 NodeList=node[01-02] StdOut=/runs/a b/42.out "
          "StdErr=/runs/a b/42.err\n"));
  hpc::JobStatus s = f.backend->status("42");
  CHECK(f.host->calls().at(0).argv ==
        std::vector<std::string>{"scontrol", "show", "job", "--oneliner", "42"});
  CHECK(s.found);
  CHECK(s.id == "42");
  CHECK(s.state == "RUNNING");
  CHECK(s.reason.empty());  // "None"
  CHECK(s.restarts == 1);
  CHECK(s.elapsed_seconds == 3725);
  CHECK(s.exit_code == -1);  // ExitCode=0:0 means nothing yet
  CHECK(s.nodes == "node[01-02]");
  CHECK(s.stdout_path == "/runs/a b/42.out");
  CHECK(s.stderr_path == "/runs/a b/42.err");

  f.host->reply(
      "scontrol",
      succeeded("JobId=42 JobState=PENDING Reason=launch failed requeued held NodeList=(null)\n"));
  s = f.backend->status("42");
  CHECK(s.reason == "launch failed requeued held");
  CHECK(s.nodes.empty());
  f.host->reply("scontrol", succeeded("JobId=42 JobState=FAILED ExitCode=3:0 Reason=None\n"));
  s = f.backend->status("42");
  CHECK(s.terminal());
  CHECK(s.exit_code == 3);
}

TEST_CASE("status: who cancelled a job comes from sacct, asked again only while it answers",
          "[slurm_backend][status][sacct]") {
  Fixture f;
  const std::string cancelled = "JobId=42 JobState=CANCELLED EndTime=2026-11-23T10:00:00\n";
  f.host->reply_always("scontrol", succeeded(cancelled));
  f.host->reply("sacct", succeeded("42|CANCELLED by 1000|0:15|node01|12|0|2026-11-23T10:00:01\n"
                                   "42.batch|CANCELLED|0:15|node01|12|0|2026-11-23T10:00:01\n"));
  hpc::JobStatus s = f.backend->status("42");
  CHECK(s.state == "CANCELLED");
  CHECK(s.detail == "by uid 1000 at 2026-11-23T10:00:01");
  const auto sacct = f.host->calls_of("sacct").at(0).argv;
  CHECK(std::find(sacct.begin(), sacct.end(), "--parsable2") != sacct.end());
  CHECK(sacct.back() == "--format=JobID,State,ExitCode,NodeList,ElapsedRaw,Restarts,End");

  f.host->reply("sacct", failed("sacct: error: Slurm accounting storage is disabled\n"));
  CHECK(f.backend->status("42").detail == "at 2026-11-23T10:00:00");  // scontrol's own
  CHECK(f.backend->status("42").detail == "at 2026-11-23T10:00:00");
  CHECK(f.host->calls_of("sacct").size() == 2);  // disabled: never asked again
}

TEST_CASE("status: a job the controller forgot comes from sacct, else found=false",
          "[slurm_backend][status][sacct]") {
  const std::string forgot = "slurm_load_jobs error: Invalid job id specified\n";
  SECTION("sacct knows it") {
    Fixture f;
    f.host->reply("scontrol", failed(forgot));
    f.host->reply("sacct", succeeded("41|COMPLETED|0:0|node01|3|0|x\n"
                                     "42|OUT_OF_MEMORY|0:125|None assigned|30|2|x\n"));
    hpc::JobStatus s = f.backend->status("42");
    CHECK(s.found);
    CHECK(s.state == "OUT_OF_MEMORY");
    CHECK(s.exit_code == 0);
    CHECK(s.exit_signal == 125);
    CHECK(s.nodes.empty());
    CHECK(s.elapsed_seconds == 30);
    CHECK(s.restarts == 2);
  }
  SECTION("no sacct on the host") {
    Fixture f;
    f.host->reply("scontrol", failed(forgot));
    hpc::JobStatus s = f.backend->status("42");
    CHECK_FALSE(s.found);
    CHECK(s.detail == "slurm_load_jobs error: Invalid job id specified");
    CHECK(f.host->programs_run() == "scontrol sacct");
  }
}

TEST_CASE("status: an unreachable controller or a missing scontrol is a BackendError",
          "[slurm_backend][status]") {
  Fixture f;
  f.host->reply("scontrol", failed("slurm_load_jobs error: Unable to contact slurm controller "
                                   "(connect failure)\n"));
  CHECK(message_of([&] { f.backend->status("42"); }) ==
        "cannot reach slurmctld from fakehost: slurm_load_jobs error: Unable to contact slurm "
        "controller (connect failure); check that slurmctld is up (scontrol ping)");
  f.host->reply("scontrol", failed("slurm_load_jobs error: Unable to contact slurm controller\n"));
  CHECK_THROWS_AS(f.backend->status("42"), hpc::BackendUnreachable);
  f.host->reply("scontrol", hpc::test::timed_out());
  CHECK(message_of([&] { f.backend->status("42"); }) ==
        "cannot reach slurmctld from fakehost: scontrol timed out; check that slurmctld is up "
        "(scontrol ping)");
  f.host->reply("scontrol", failed("scontrol: error: Access/permission denied\n"));
  try {
    f.backend->status("42");
    FAIL("no error");
  } catch (const hpc::BackendUnreachable&) {
    FAIL("a refusal is not an unreachable controller");
  } catch (const hpc::BackendError&) {}
  f.host->reply("scontrol", failed("scontrol: error: Access/permission denied\n"));
  CHECK(message_of([&] { f.backend->status("42"); }) ==
        "scontrol show job 42 on fakehost failed: scontrol: error: Access/permission denied");
  CHECK(f.host->calls_of("sacct").empty());
  Fixture none;
  CHECK(message_of([&] { none.backend->status("42"); }) ==
        "cannot run scontrol on fakehost: scontrol: not found");
}

TEST_CASE("job ids that are not Slurm's never reach scontrol or scancel", "[slurm_backend]") {
  for (const char* id : {"0", "00", "01", "-1", "--me", "-u", "1 2", "", "1_", "_1", "1+", "abc",
                         "12345678901", "1\n2"}) {
    INFO("'" << id << "'");
    CHECK_FALSE(hpc::is_job_id(id));
    Fixture f;
    CHECK_THROWS_AS(f.backend->status(id), hpc::BackendError);
    CHECK_THROWS_AS(f.backend->cancel(id), hpc::BackendError);
    CHECK(f.host->programs_run().empty());
  }
  for (const char* id : {"1", "42", "4294967294", "7_0", "7_12", "7+1"}) {
    INFO("'" << id << "'");
    CHECK(hpc::is_job_id(id));
  }
}

TEST_CASE("cancel runs scancel with the id, and read_log reads the host's file",
          "[slurm_backend][cancel]") {
  Fixture f;
  f.host->reply("scancel", succeeded("")).reply("scontrol", succeeded(""));
  f.backend->cancel("42");
  // First the job may no longer be requeued (its TERM handler would requeue it), then scancel.
  CHECK(f.host->calls().at(0).argv ==
        std::vector<std::string>{"scontrol", "update", "JobId=42", "Requeue=0"});
  CHECK(f.host->calls().at(1).argv == std::vector<std::string>{"scancel", "42"});
  f.host->reply("scancel", succeeded("")).reply("scontrol", succeeded(""));
  f.backend->cancel("42_3");  // an array task: the flag is the array's
  CHECK(f.host->calls_of("scontrol").back().argv ==
        std::vector<std::string>{"scontrol", "update", "JobId=42", "Requeue=0"});
  f.host->reply("scancel", failed("scancel: error: Kill job error on job id 43: Access denied\n"));
  CHECK(message_of([&] { f.backend->cancel("43"); }) ==
        "scancel 43 on fakehost: scancel exited with 1: scancel: error: Kill job error on job "
        "id 43: Access denied");

  f.host->make_dirs("/runs/x");
  f.host->write_file("/runs/x/job.out", "line 1\nline 2\n", 0644);
  hpc::LogChunk c = f.backend->read_log("/runs/x/job.out", 7, 100);
  CHECK(c.exists);
  CHECK(c.data == "line 2\n");
  CHECK(c.next_offset == 14);
  CHECK_FALSE(f.backend->read_log("/runs/x/none.out", 0, 100).exists);
}

TEST_CASE("slurm backend: what counts as 'retry later' (exit 69), not as bad input",
          "[slurm-backend]") {
  // A down or busy controller, or the network to it: retry later.
  for (const char* text :
       {"sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect "
        "failure)",
        "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying",
        "sbatch: error: Batch job submission failed: Resource temporarily unavailable",
        "scontrol: error: slurm_receive_msg: Socket timed out on send/recv operation",
        "squeue: error: Connection reset by peer", "sbatch: error: No route to host"})
    CHECK(hpc::is_controller_unreachable(text));
  // What the request itself got wrong: fix it (2).
  for (const char* text : {"sbatch: error: Batch job submission failed: Invalid partition name "
                           "specified",
                           "sbatch: error: Batch job submission failed: Node count specification "
                           "invalid",
                           "sbatch: error: Invalid account or account/partition combination"})
    CHECK_FALSE(hpc::is_controller_unreachable(text));
}

TEST_CASE("submit: an array's tasks log into run directories of their own, made while held",
          "[slurm_backend][submit][array]") {
  Fixture f;
  f.host->reply("sbatch", succeeded("42\n")).reply("scontrol", succeeded(""));
  hpc::SubmitRequest r = request();
  r.output = "%x-%A_%a.out";
  r.error = "";
  r.array_tasks = {0, 4, 8};
  f.backend->submit(r);
  const auto argv = f.host->calls_of("sbatch").at(0).argv;
  CHECK(argv.at(4) == "--output=/home/user/runs/gpt_tiny-%A_%a/%x-%A_%a.out");
  for (const char* task : {"_0", "_4", "_8"}) CHECK(f.host->dirs().count(kRunDir + task));
  CHECK_FALSE(f.host->dirs().count(kRunDir + "_1"));
  CHECK(f.host->files().count(kRunDir + "/script.sbatch"));
}

namespace {
// `scontrol show job -o 42` of an array 42 with tasks 0-4: 0 and 1 ran, 2 runs, 3-4 wait.
std::string array_lines(const std::string& task0, const std::string& task1,
                        const std::string& task2, const std::string& pending) {
  std::string out = "JobId=43 ArrayJobId=42 ArrayTaskId=0 JobName=t JobState=" + task0 +
                    " Reason=None ExitCode=" + (task0 == "FAILED" ? "3:0" : "0:0") +
                    " RunTime=00:00:05 StdOut=/r/t-42_0/t-42_0.out\n"
                    "JobId=44 ArrayJobId=42 ArrayTaskId=1 JobName=t JobState=" +
                    task1 + " Reason=None ExitCode=" + (task1 == "FAILED" ? "1:0" : "0:0") +
                    " RunTime=00:00:07 StdOut=/r/t-42_1/t-42_1.out\n"
                    "JobId=45 ArrayJobId=42 ArrayTaskId=2 JobName=t JobState=" +
                    task2 +
                    " Reason=None ExitCode=0:0 RunTime=00:00:02 StdOut=/r/t-42_2/t-42_2.out\n";
  if (!pending.empty())
    out += "JobId=42 ArrayJobId=42 ArrayTaskId=" + pending +
           " JobName=t JobState=PENDING Reason=JobArrayTaskLimit ExitCode=0:0 RunTime=00:00:00 "
           "StdOut=/r/t-42_4294967294/t-42_4294967294.out\n";
  return out;
}
}  // namespace

TEST_CASE("status: an array is its worst task, a task is its own line or the pending record",
          "[slurm_backend][status][array]") {
  SECTION("tasks still running or waiting: RUNNING, each task's state listed") {
    Fixture f;
    f.host->reply("scontrol", succeeded(array_lines("COMPLETED", "FAILED", "RUNNING", "3-4%3")));
    hpc::JobStatus s = f.backend->status("42");
    CHECK(s.id == "42");
    CHECK(s.state == "RUNNING");
    CHECK(s.exit_code == -1);
    CHECK(s.array_tasks ==
          std::vector<std::pair<std::string, std::string>>{
              {"0", "COMPLETED"}, {"1", "FAILED"}, {"2", "RUNNING"}, {"3-4%3", "PENDING"}});
    CHECK(s.detail == "(array: 1 COMPLETED, 1 FAILED, 1 RUNNING, 1 PENDING)");
    CHECK(s.stdout_path.empty());
  }
  SECTION("all ended: the state and exit code of the worst task") {
    Fixture f;
    f.host->reply("scontrol", succeeded(array_lines("FAILED", "FAILED", "COMPLETED", "")));
    hpc::JobStatus s = f.backend->status("42");
    CHECK(s.state == "FAILED");
    CHECK(s.exit_code == 3);  // task 0 exited 3, task 1 exited 1
    CHECK(s.detail == "(array: 2 FAILED, 1 COMPLETED); worst: task 0");
    CHECK(f.host->programs_run() == "scontrol");  // no sacct for an array
  }
  SECTION("tasks are listed by index, as scontrol does not (newest first)") {
    Fixture f;
    std::string lines = array_lines("COMPLETED", "FAILED", "RUNNING", "3-4");
    std::vector<std::string> split;
    for (size_t at = 0, nl; (nl = lines.find('\n', at)) != std::string::npos; at = nl + 1)
      split.push_back(lines.substr(at, nl - at + 1));
    f.host->reply("scontrol", succeeded(split[3] + split[2] + split[1] + split[0]));
    hpc::JobStatus s = f.backend->status("42");
    CHECK(s.array_tasks ==
          std::vector<std::pair<std::string, std::string>>{
              {"0", "COMPLETED"}, {"1", "FAILED"}, {"2", "RUNNING"}, {"3-4", "PENDING"}});
  }
  SECTION("all completed") {
    Fixture f;
    f.host->reply("scontrol", succeeded(array_lines("COMPLETED", "COMPLETED", "COMPLETED", "")));
    hpc::JobStatus s = f.backend->status("42");
    CHECK(s.state == "COMPLETED");
    CHECK(s.exit_code == 0);
    CHECK(s.detail == "(array: 3 COMPLETED)");
  }
  SECTION("one task that ran: its own line, under the id asked for") {
    Fixture f;
    f.host->reply("scontrol", succeeded(array_lines("COMPLETED", "FAILED", "RUNNING", "3-4")));
    hpc::JobStatus s = f.backend->status("42_1");
    CHECK(s.id == "42_1");
    CHECK(s.state == "FAILED");
    CHECK(s.exit_code == 1);
    CHECK(s.stdout_path == "/r/t-42_1/t-42_1.out");
    CHECK(s.array_tasks.empty());
    CHECK(f.host->calls_of("scontrol").at(0).argv ==
          std::vector<std::string>{"scontrol", "show", "job", "--oneliner", "42_1"});
  }
  SECTION("one task not started yet: PENDING from the array's record, no log yet") {
    Fixture f;
    f.host->reply("scontrol", succeeded(array_lines("COMPLETED", "FAILED", "RUNNING", "3-4")));
    hpc::JobStatus s = f.backend->status("42_4");
    CHECK(s.state == "PENDING");
    CHECK(s.reason == "JobArrayTaskLimit");
    CHECK(s.stdout_path.empty());
  }
  SECTION("a task the array does not have: an error, not someone else's state") {
    Fixture f;
    f.host->reply("scontrol", succeeded(array_lines("COMPLETED", "FAILED", "RUNNING", "3-4")));
    CHECK_THROWS_AS(f.backend->status("42_9"), hpc::BackendError);
  }
}

TEST_CASE("signal_tasks: scancel --signal to the steps' tasks, never the batch shell",
          "[slurm_backend][signal]") {
  Fixture f;
  f.host->reply("scancel", succeeded(""));
  f.backend->signal_tasks("42", "23");
  REQUIRE(f.host->calls_of("scancel").size() == 1);
  // No --batch (the batch shell only) and no --full (the shell too: a trap could end it).
  CHECK(f.host->calls_of("scancel").at(0).argv ==
        std::vector<std::string>{"scancel", "--signal=23", "42"});
  f.host->reply("scancel", failed("scancel: error: Kill job error on job id 42: Invalid job id\n"));
  CHECK(message_of([&] { f.backend->signal_tasks("42", "23"); }).find("scancel --signal=23 42") !=
        std::string::npos);
  CHECK(message_of([&] { f.backend->signal_tasks("-1", "23"); }) != "");
}
