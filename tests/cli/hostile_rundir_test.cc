// Hostile run directories (issue 35, docs/security.md "What a run directory is trusted for"):
// what report, logs, rerun, status and list read back from runs/NAME-ID goes through the input
// reader (common/input_file.h) or its streaming twin, so a FIFO, a /proc file, a folder, a huge
// or damaged file is one line naming it (exit 2), never a hang; an unreachable cluster is 69; a
// command hpclaunch starts (gnuplot here) ends with it; a recorded ssh_config runs no command.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "hostile_cases.h"
#include "sha256.h"

using namespace cli_test;
using Catch::Matchers::Contains;

namespace {

const std::string kRecord =
    "{\"job_id\": \"5\", \"name\": \"x\", \"backend\": \"local\", \"run_dir\": "
    "\"runs/x-5\", \"submitted_at\": \"2026-11-25T10:00:00Z\"}";
const std::string kStart =
    "{\"event\":\"start\",\"time\":1795600810.5,\"restart\":0,\"nodes\":\"1\"}\n";
// A local job that has ended, its log in the run directory.
const std::vector<std::pair<std::string, std::string>> kEndedLocalJob = {
    {"work/runs/x-5/run.json", kRecord},
    {"work/runs/x-5/local-job.json",
     "{\"job_id\": \"5\", \"job_name\": \"x\", \"run_dir\": \"runs/x-5\", \"runs_root\": "
     "\"runs\", \"script\": \"runs/x-5/script.sbatch\", \"workdir\": \".\", \"stdout\": "
     "\"runs/x-5/slurm-5.out\", \"stderr\": \"runs/x-5/slurm-5.out\", \"open_mode\": "
     "\"truncate\", \"time_limit_seconds\": 0, \"signal\": {\"number\": 0, \"seconds\": 0, "
     "\"batch_only\": false}, \"requeue_allowed\": false, \"max_restarts\": 0, "
     "\"kill_wait_seconds\": 1, \"submit_time\": 1, \"env\": {}}"},
    {"work/runs/x-5/local-state.json",
     "{\"job_id\": \"5\", \"state\": \"COMPLETED\", \"exit_code\": 0, \"start_time\": 1, "
     "\"end_time\": 2}"}};

std::vector<std::pair<std::string, std::string>> with(
    std::vector<std::pair<std::string, std::string>> files,
    const std::vector<std::pair<std::string, std::string>>& more) {
  files.insert(files.end(), more.begin(), more.end());
  return files;
}

PreparedCase fifo_at(BadCase c, const std::string& rel) {
  return {std::move(c), [rel](const Sandbox& sb) { make_fifo(sb, rel); }};
}
PreparedCase link_at(BadCase c, const std::string& rel, const std::string& target) {
  return {std::move(c), [rel, target](const Sandbox& sb) { make_link(sb, rel, target); }};
}

// A timeline of `lines` start events, written without holding it in memory twice.
void write_long_timeline(const fs::path& file, long lines) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file);
  for (long i = 0; i < lines; ++i)
    out << "{\"event\":\"start\",\"time\":" << 1795600810 + i << ",\"restart\":" << i << "}\n";
}

// A saved spec that hpclaunch render wrote, and a run.json whose spec_hash is `hash` ("" = the
// file's own).
void prepare_rerun(const Sandbox& sb, const std::vector<std::string>& sets, std::string hash,
                   const std::string& backend = "local") {
  std::vector<std::string> args = {
      "render", "--no-project", "--preset", "1n2g",       "--strategy",
      "ddp",    "-o",           "x.sbatch", "--spec-out", "runs/x-5/spec.json"};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  fs::create_directories(sb.work() / "runs/x-5");
  Run r = sb.hpclaunch(args);
  REQUIRE(r.status == 0);
  fs::remove(sb.work() / "x.sbatch");
  const std::string spec = read_file(sb.work() / "runs/x-5/spec.json");
  if (hash.empty()) hash = hpc::sha256_hex(spec);
  write_file(sb.work() / "runs/x-5/run.json",
             "{\"job_id\": \"5\", \"name\": \"x\", \"backend\": \"" + backend +
                 "\", \"run_dir\": \"runs/x-5\", \"spec_hash\": \"" + hash + "\"}");
}

}  // namespace

TEST_CASE("hostile run directories: report reads the timeline and metrics through the reader",
          "[hostile][rundir]") {
  const std::vector<std::pair<std::string, std::string>> run = {
      {"work/runs/x-5/run.json", kRecord}};
  check_all_prepared({
      fifo_at({"timeline.jsonl is a FIFO",
               {"report", "runs/x-5"},
               run,
               {"runs/x-5/timeline.jsonl: is a FIFO (named pipe)", "replace it"}},
              "work/runs/x-5/timeline.jsonl"),
      fifo_at({"metrics.jsonl is a FIFO",
               {"report", "runs/x-5"},
               with(run, {{"work/runs/x-5/timeline.jsonl", kStart}}),
               {"runs/x-5/metrics.jsonl: is a FIFO (named pipe)"}},
              "work/runs/x-5/metrics.jsonl"),
      fifo_at({"metrics.jsonl is a FIFO, --json",
               {"report", "5", "--json"},
               with(run, {{"work/runs/x-5/timeline.jsonl", kStart}}),
               {"runs/x-5/metrics.jsonl: is a FIFO (named pipe)"}},
              "work/runs/x-5/metrics.jsonl"),
      link_at({"timeline.jsonl links to /proc/self/environ (its size says 0)",
               {"report", "runs/x-5"},
               run,
               {"runs/x-5/timeline.jsonl: is a file of /proc or /sys", "replace it"}},
              "work/runs/x-5/timeline.jsonl", "/proc/self/environ"),
      {{"timeline.jsonl is a directory",
        {"report", "runs/x-5"},
        with(run, {{"work/runs/x-5/timeline.jsonl", "<dir>"}}),
        {"runs/x-5/timeline.jsonl: is a directory", "replace it"}},
       nullptr},
      {{"a timeline of 10^6 lines",
        {"report", "runs/x-5"},
        run,
        {"runs/x-5/timeline.jsonl: is larger than 16 MiB", "check the run"}},
       [](const Sandbox& sb) {
         write_long_timeline(sb.work() / "runs/x-5/timeline.jsonl", 1000000);
       }},
      {{"a timeline with a negative time",
        {"report", "runs/x-5"},
        with(run, {{"work/runs/x-5/timeline.jsonl", "{\"event\":\"start\",\"time\":-5}\n"}}),
        {"runs/x-5/timeline.jsonl:1: \"time\" is -5", "remove or fix that line"}},
       nullptr},
      {{"a timeline whose end is before its start",
        {"report", "runs/x-5", "--json"},
        with(run, {{"work/runs/x-5/timeline.jsonl",
                    kStart + "{\"event\":\"end\",\"time\":1795600000,\"exit\":0}\n"}}),
        {"runs/x-5/timeline.jsonl:2: \"time\" is 1795600000, before the start of its run",
         "comes after its start"}},
       nullptr},
  });
}

TEST_CASE("hostile run directories: logs of an ended job reads its files through the reader",
          "[hostile][rundir]") {
  check_all_prepared({
      fifo_at({"the job's log is a FIFO",
               {"logs", "5"},
               kEndedLocalJob,
               {"runs/x-5/slurm-5.out: is a FIFO (named pipe)", "replace it"}},
              "work/runs/x-5/slurm-5.out"),
      link_at({"the job's log links to /proc/self/environ",
               {"logs", "5"},
               kEndedLocalJob,
               {"runs/x-5/slurm-5.out: is a file of /proc or /sys", "replace it"}},
              "work/runs/x-5/slurm-5.out", "/proc/self/environ"),
      fifo_at({"metrics.jsonl is a FIFO",
               {"logs", "5"},
               with(kEndedLocalJob, {{"work/runs/x-5/slurm-5.out", "done\n"}}),
               {"runs/x-5/metrics.jsonl: is a FIFO (named pipe)", "replace it"}},
              "work/runs/x-5/metrics.jsonl"),
  });
}

// logs -f says the job's state as it follows, then the error: the error is its last line.
TEST_CASE("hostile run directories: logs -f of an ended job whose log is a FIFO",
          "[hostile][rundir]") {
  Sandbox sb;
  for (const auto& [path, content] : kEndedLocalJob) sb.write(path, content);
  make_fifo(sb, "work/runs/x-5/slurm-5.out");
  const auto before = sb.snapshot();
  Run r =
      spawn({hpclaunch_binary(), "logs", "-f", "5"}, sb.work(), sb.env(), std::chrono::seconds(20));
  INFO(r.describe());
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  const auto lines = split_lines(r.err);
  REQUIRE_FALSE(lines.empty());
  CHECK_THAT(lines.back(), Contains("hpclaunch: error: runs/x-5/slurm-5.out: is a FIFO"));
  CHECK(sb.snapshot() == before);
}

TEST_CASE("hostile run directories: a bad run.json or spec.json is named with what is wrong",
          "[hostile][rundir]") {
  const std::string fix = "fix the file or remove that run directory";
  check_all_prepared({
      {{"run.json is an array",
        {"status", "5"},
        {{"work/runs/x-5/run.json", "[1, 2]"}},
        {"runs/x-5/run.json: is an array, not a run record", fix}},
       nullptr},
      {{"run.json holds a NUL byte",
        {"rerun", "5"},
        {{"work/runs/x-5/run.json", std::string("{\"job_id\": \"5\"\0}", 17)}},
        {"runs/x-5/run.json:1:", "NUL"}},
       nullptr},
      fifo_at({"run.json is a FIFO",
               {"logs", "x-5"},
               {{"work/runs/x-5/timeline.jsonl", kStart}},
               {"runs/x-5/run.json: is a FIFO (named pipe)", "replace it"}},
              "work/runs/x-5/run.json"),
      {{"run.json of 5 MB",
        {"rerun", "runs/x-5"},
        {{"work/runs/x-5/run.json",
          "{\"job_id\": \"5\", \"pad\": \"" + std::string(5 << 20, 'a') + "\"}"}},
        {"runs/x-5/run.json: is 5242906 bytes, more than the 4 MiB"}},
       nullptr},
      {{"spec.json is an array",
        {"rerun", "5"},
        {{"work/runs/x-5/run.json", kRecord}, {"work/runs/x-5/spec.json", "[]"}},
        {"runs/x-5/spec.json: is an array, not a spec", "restore the file"}},
       nullptr},
      {{"spec.json is null",
        {"rerun", "5"},
        {{"work/runs/x-5/run.json", kRecord}, {"work/runs/x-5/spec.json", "null"}},
        {"runs/x-5/spec.json: is null, not a spec", "restore the file"}},
       nullptr},
  });
}

TEST_CASE(
    "hostile run directories: rerun of an edited spec.json needs --force, an unset "
    "secret is one line",
    "[hostile][rundir]") {
  check_all_prepared({
      {{"spec.json edited since the run (its hash differs)",
        {"rerun", "5"},
        {},
        {"runs/x-5/spec.json: the file changed since the run", "pass --force"}},
       [](const Sandbox& sb) { prepare_rerun(sb, {}, std::string(64, '0')); }},
      {{"the run's secret is not set in this shell", {"rerun", "5"}, {}, {"HPC_TEST_SECRET"}},
       [](const Sandbox& sb) {
         prepare_rerun(sb, {"job.env_from_submit=[\"HPC_TEST_SECRET\"]"}, "");
       }},
  });
}

TEST_CASE("hostile run directories: an ssh_config named by run.json runs no command",
          "[hostile][rundir]") {
  for (const std::string verb : {"status", "logs", "cancel"}) {
    DYNAMIC_SECTION(verb) {
      Sandbox sb;
      const std::string canary = (sb.root() / "PROXY_RAN").string();
      sb.write("home/evil_config", "Host login\n  ProxyCommand touch " + canary + "\n");
      sb.write("work/runs/x-5/run.json",
               "{\"job_id\": \"5\", \"name\": \"x\", \"backend\": \"ssh\", \"ssh_target\": "
               "\"login\", \"ssh_config\": \"" +
                   (sb.root() / "home/evil_config").string() + "\", \"run_dir\": \"/r/x-5\"}");
      const auto before = sb.snapshot();
      Run r = spawn({hpclaunch_binary(), verb, "5"}, sb.work(), sb.env(), std::chrono::seconds(20));
      INFO(r.describe());
      CHECK(r.status == 2);
      CHECK(r.err.find('\n') == r.err.size() - 1);
      CHECK_THAT(r.err, Contains("evil_config:2: \"ProxyCommand\" in the ssh_config that run.json "
                                 "names") &&
                            Contains("pass --ssh-config"));
      CHECK_FALSE(fs::exists(canary));
      CHECK(sb.snapshot() == before);
    }
  }
}

TEST_CASE("hostile run directories: run.json's jump hosts are host names, never options",
          "[hostile][rundir]") {
  Sandbox sb;
  const std::string canary = (sb.root() / "PROXY_RAN").string();
  sb.write("work/runs/x-5/run.json",
           "{\"job_id\": \"5\", \"name\": \"x\", \"backend\": \"ssh\", \"ssh_target\": "
           "\"login\", \"ssh_jump\": \"bastion,-oProxyCommand=touch " +
               canary + "\", \"run_dir\": \"/r/x-5\"}");
  const auto before = sb.snapshot();
  Run r = spawn({hpclaunch_binary(), "status", "5"}, sb.work(), sb.env(), std::chrono::seconds(20));
  INFO(r.describe());
  CHECK(r.status == 2);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK_THAT(r.err, Contains("is not a jump host"));
  CHECK_FALSE(fs::exists(canary));
  CHECK(sb.snapshot() == before);
}

TEST_CASE("hostile run directories: an unreachable cluster is 69 in one line from rerun and logs",
          "[hostile][rundir]") {
  Sandbox sb;
  const std::string stub =
      "#!/bin/sh\n"
      "echo \"${0##*/}: error: Unable to contact slurm controller (connect failure)\" >&2\n"
      "exit 1\n";
  for (const char* name : {"scontrol", "scancel", "sacct", "sbatch", "squeue"}) {
    sb.write("stubs/" + std::string(name), stub);
    fs::permissions(sb.root() / "stubs" / name, fs::perms::owner_all);
  }
  prepare_rerun(sb, {}, "", "slurm");
  sb.write("work/runs/x-5/slurm-5.out", "a line of the job\n");
  std::vector<std::string> env = sb.env();
  for (auto& e : env)
    if (e.rfind("PATH=", 0) == 0) e = "PATH=" + (sb.root() / "stubs").string() + ":" + e.substr(5);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"rerun", "5"}, {"logs", "5"}}) {
    DYNAMIC_SECTION(args[0]) {
      std::vector<std::string> argv = {hpclaunch_binary()};
      argv.insert(argv.end(), args.begin(), args.end());
      Run r = spawn(argv, sb.work(), env, std::chrono::seconds(60));
      INFO(r.describe());
      CHECK(r.status == 69);
      REQUIRE_FALSE(r.err.empty());
      CHECK(r.err.find('\n') == r.err.size() - 1);
      CHECK_THAT(r.err, Contains("slurm controller"));
    }
  }
}

TEST_CASE("hostile run directories: gnuplot ends with report on SIGTERM and SIGINT",
          "[hostile][rundir]") {
  for (int sig : {SIGTERM, SIGINT}) {
    DYNAMIC_SECTION("signal " << sig) {
      Sandbox sb;
      const fs::path pid_file = sb.root() / "gnuplot.pid";
      // A gnuplot that takes its time, in a process group of its own as hpclaunch starts it.
      sb.write("stubs/gnuplot", "#!/bin/sh\necho $$ > " + pid_file.string() + "\nexec sleep 60\n");
      fs::permissions(sb.root() / "stubs/gnuplot", fs::perms::owner_all);
      sb.write("work/runs/x-5/run.json", kRecord);
      sb.write("work/runs/x-5/timeline.jsonl", kStart);
      std::vector<std::string> env = sb.env();
      for (auto& e : env)
        if (e.rfind("PATH=", 0) == 0)
          e = "PATH=" + (sb.root() / "stubs").string() + ":" + e.substr(5);
      std::vector<std::string> args = {hpclaunch_binary(), "report", "runs/x-5"};
      std::vector<char*> argv, envp;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      for (auto& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
      posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
      posix_spawn_file_actions_addchdir_np(&actions, sb.work().c_str());
      pid_t pid = 0;
      REQUIRE(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()) == 0);
      posix_spawn_file_actions_destroy(&actions);
      pid_t gnuplot = 0;
      for (int i = 0; i < 200 && gnuplot <= 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::error_code ec;
        if (fs::exists(pid_file, ec)) gnuplot = std::atoi(read_file(pid_file).c_str());
      }
      REQUIRE(gnuplot > 0);
      kill(pid, sig);
      int status = 0;
      REQUIRE(waitpid(pid, &status, 0) == pid);
      CHECK(WIFSIGNALED(status));
      // Gone, or a zombie nobody reaped yet (a container's init may not reap).
      auto ended = [](pid_t p) {
        if (kill(p, 0) != 0) return true;
        std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
        std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        const size_t paren = text.rfind(')');
        return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
      };
      bool gone = false;
      for (int i = 0; i < 100 && !gone; ++i) {
        gone = ended(gnuplot);
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!gone) kill(-gnuplot, SIGKILL);
      CHECK(gone);
    }
  }
}
