// Job arrays and dependencies on the real test cluster (docs/jobs.md): each array task gets its
// own SLURM_ARRAY_TASK_ID, log and run directory; `run` follows an array to its worst task;
// a job --after another starts only once that one ended well, and never after it failed.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>

#include <sys/stat.h>

#include <fstream>

#include "harness.h"

using namespace slt;
using nlohmann::json;

namespace {

// A trainer that says which array task it is, then exits with TASK_EXIT if it is TASK_FAILING.
std::string write_task_program(const Workspace& ws) {
  const std::string path = ws.dir() + "/task.sh";
  std::ofstream(path)
      << "#!/bin/bash\n"
         "echo \"task id=${SLURM_ARRAY_TASK_ID:-unset} "
         "array=${SLURM_ARRAY_JOB_ID:-unset} job=${SLURM_JOB_ID}\"\n"
         "echo \"{\\\"task\\\": ${SLURM_ARRAY_TASK_ID:-0}}\" > \"$HPCTRAIN_METRICS\"\n"
         "sleep \"${TASK_SLEEP:-0}\"\n"
         "if [[ \"${SLURM_ARRAY_TASK_ID:-}\" == \"${TASK_FAILING:-none}\" ]]; then\n"
         "  exit \"${TASK_EXIT:-0}\"\n"
         "fi\n";
  chmod(path.c_str(), 0755);
  return path;
}

json status_json(const Workspace& ws, const std::string& job) {
  auto r = ws.hpclaunch({"status", job, "--json"});
  if (r.exit_code != 0) return json::object();
  return json::parse(r.out, nullptr, false);
}

// Waits until `hpclaunch status JOB --json` shows one of `states`; returns the last state.
std::string wait_status(const Workspace& ws, const std::string& job,
                        const std::vector<std::string>& states,
                        std::chrono::milliseconds timeout = 60s) {
  std::string state;
  wait_until(
      [&] {
        json s = status_json(ws, job);
        state = s.value("state", "");
        for (const auto& want : states)
          if (state == want) return true;
        return false;
      },
      timeout);
  return state;
}

}  // namespace

TEST_CASE("a 3-task array: each task its own SLURM_ARRAY_TASK_ID, log and run directory",
          "[slurm][jobs][array]") {
  Workspace ws("array");
  const std::string program = write_task_program(ws);
  auto sub = ws.hpclaunch(
      ws.job_args("submit", "1n1g", {"--set", "trainer.program=" + program, "--array", "0-2"}));
  INFO(sub.summary() << "\nstdout:\n" << sub.out << "\nstderr:\n" << sub.err);
  REQUIRE(sub.exit_code == 0);
  REQUIRE(std::regex_match(sub.out, std::regex("\\d+\n")));
  const std::string job = lines_of(sub.out).at(0);
  CHECK(contains(sub.err, "is an array of 3 task(s) (0-2)"));

  REQUIRE(wait_status(ws, job, {"COMPLETED", "FAILED", "CANCELLED"}) == "COMPLETED");
  json s = status_json(ws, job);
  INFO(s.dump(2));
  CHECK(s["array_tasks"] == json({{"0", "COMPLETED"}, {"1", "COMPLETED"}, {"2", "COMPLETED"}}));
  CHECK(s["exit_code"] == 0);

  // The array's own directory: script, spec, record; one directory per task with its log.
  const std::string array_dir = ws.work() + "/runs/" + ws.job_name() + "-" + job;
  CHECK(contains(read_file(array_dir + "/script.sbatch"), "#SBATCH --array=0-2\n"));
  CHECK(contains(read_file(array_dir + "/script.sbatch"), "#SBATCH --output=%x-%A_%a.out\n"));
  CHECK(json::parse(read_file(array_dir + "/run.json"))["array"] == "0-2");
  for (int task = 0; task < 3; ++task) {
    const std::string id = job + "_" + std::to_string(task);
    const std::string log =
        ws.work() + "/runs/" + ws.job_name() + "-" + id + "/" + ws.job_name() + "-" + id + ".out";
    INFO("task log " << log);
    REQUIRE(file_exists(log));
    const std::string text = read_file(log);
    CHECK(contains(text, "task id=" + std::to_string(task) + " array=" + job + " "));
    CHECK(count_lines_with(text, "task id=") == 1);  // its own file, no other task's lines
    // The trainer's metrics (HPCTRAIN_METRICS) land in the task's directory too.
    const std::string metrics = ws.work() + "/runs/" + ws.job_name() + "-" + id + "/metrics.jsonl";
    CHECK(read_file(metrics) == "{\"task\": " + std::to_string(task) + "}\n");

    // status and logs of one task, by its Slurm id.
    auto one = ws.hpclaunch({"status", id});
    INFO(one.summary() << "\n" << one.out);
    CHECK(one.exit_code == 0);
    CHECK(std::regex_search(one.out, std::regex("(^|\n)job +" + id + "\n")));
    CHECK(std::regex_search(one.out, std::regex("\nstate +COMPLETED\n")));
    auto logs = ws.hpclaunch({"logs", id});
    INFO(logs.summary() << "\n" << logs.out);
    CHECK(logs.exit_code == 0);
    CHECK(contains(logs.out, "task id=" + std::to_string(task) + " "));
  }
  auto whole = ws.hpclaunch({"status", job});
  CHECK(
      std::regex_search(whole.out, std::regex("\ntasks +0 COMPLETED, 1 COMPLETED, 2 COMPLETED\n")));
  // The whole array has no one log: say which to ask for.
  auto logs = ws.hpclaunch({"logs", job});
  CHECK(logs.exit_code == 2);
  CHECK(count_nonempty_lines(logs.err) == 1);
  CHECK(contains(logs.err, "each task has its own log; name one task: hpclaunch logs " + job));
}

TEST_CASE("run --array follows every task to the end and exits with the worst task's status",
          "[slurm][jobs][array]") {
  Workspace ws("array-run");
  const std::string program = write_task_program(ws);
  auto r = ws.hpclaunch(
      ws.job_args("run", "1n1g", {"--set", "trainer.program=" + program, "--array", "0-2%2"}),
      {"TASK_FAILING=1", "TASK_EXIT=3"});
  INFO(r.summary() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 3);
  const std::string job = submitted_job_id(r.err);
  REQUIRE(!job.empty());
  CHECK(contains(r.err, "job " + job + " FAILED with exit code 3"));
  CHECK(contains(r.err, "worst: task 1"));
  json s = status_json(ws, job);
  CHECK(s["array_tasks"] == json({{"0", "COMPLETED"}, {"1", "FAILED"}, {"2", "COMPLETED"}}));
  CHECK(contains(read_file(ws.work() + "/runs/" + ws.job_name() + "-" + job + "/script.sbatch"),
                 "#SBATCH --array=0-2%2\n"));
}

TEST_CASE("cancel of one array task, then of the whole array", "[slurm][jobs][array]") {
  Workspace ws("array-cancel");
  const std::string program = write_task_program(ws);
  auto sub = ws.hpclaunch(
      ws.job_args("submit", "1n1g", {"--set", "trainer.program=" + program, "--array", "0-1"}),
      {"TASK_SLEEP=60"});
  INFO(sub.summary() << "\n" << sub.err);
  REQUIRE(sub.exit_code == 0);
  const std::string job = lines_of(sub.out).at(0);
  // Both tasks run at once (two nodes); cancel only once each has started its program.
  for (const char* task : {"_0", "_1"}) {
    const std::string id = job + task;
    REQUIRE(wait_file_contains(
        ws.work() + "/runs/" + ws.job_name() + "-" + id + "/" + ws.job_name() + "-" + id + ".out",
        "task id="));
  }
  auto one = ws.hpclaunch({"cancel", job + "_1"});
  INFO(one.summary() << "\n" << one.err);
  CHECK(one.exit_code == 0);
  CHECK(contains(one.err, "cancel requested for job " + job + "_1"));
  CHECK(wait_status(ws, job + "_1", {"CANCELLED"}) == "CANCELLED");
  CHECK(status_json(ws, job + "_0")["state"] == "RUNNING");
  CHECK(status_json(ws, job)["state"] == "RUNNING");  // the array goes on while a task runs

  auto all = ws.hpclaunch({"cancel", job});
  CHECK(all.exit_code == 0);
  CHECK(wait_status(ws, job, {"CANCELLED", "COMPLETED", "FAILED"}) == "CANCELLED");
  CHECK(status_json(ws, job)["array_tasks"] == json({{"0", "CANCELLED"}, {"1", "CANCELLED"}}));
  auto again = ws.hpclaunch({"cancel", job});
  CHECK(contains(again.err, "already ended (CANCELLED)"));
}

TEST_CASE("dependencies: B --after A starts once A completed, and never after a failed A",
          "[slurm][jobs][dependency]") {
  Workspace ws("after");
  // A runs a little while, so that B is submitted while A still runs.
  auto a = ws.hpclaunch(ws.job_args("submit", "1n1g"), {"PROBE_SLEEP=3"});
  INFO("A: " << a.summary() << "\n" << a.err);
  REQUIRE(a.exit_code == 0);
  const std::string job_a = lines_of(a.out).at(0);
  auto b = ws.hpclaunch(ws.job_args("submit", "1n1g", {"--after", job_a}));
  INFO("B: " << b.summary() << "\n" << b.err);
  REQUIRE(b.exit_code == 0);
  const std::string job_b = lines_of(b.out).at(0);
  CHECK(contains(read_file(ws.work() + "/runs/" + ws.job_name() + "-" + job_b + "/script.sbatch"),
                 "#SBATCH --dependency=afterok:" + job_a + "\n"));
  CHECK(job_fields(job_b)["Dependency"].rfind("afterok:" + job_a, 0) == 0);

  REQUIRE(wait_job_state(job_b, {"COMPLETED", "FAILED", "CANCELLED"}, 60s) == "COMPLETED");
  auto fa = job_fields(job_a);
  auto fb = job_fields(job_b);
  INFO("A ended " << fa["EndTime"] << ", B started " << fb["StartTime"]);
  CHECK(fa["JobState"] == "COMPLETED");
  // ISO 8601 times of one clock compare as text.
  CHECK(fb["StartTime"] >= fa["EndTime"]);

  // A that fails: B (afterok) waits for ever with DependencyNeverSatisfied; C (afternotok) runs.
  auto f = ws.hpclaunch(ws.job_args("submit", "1n1g"), {"PROBE_EXIT=3"});
  REQUIRE(f.exit_code == 0);
  const std::string job_f = lines_of(f.out).at(0);
  auto never = ws.hpclaunch(ws.job_args("submit", "1n1g", {"--after", job_f + ":afterok"}));
  REQUIRE(never.exit_code == 0);
  const std::string job_never = lines_of(never.out).at(0);
  auto c = ws.hpclaunch(ws.job_args("submit", "1n1g", {"--after", job_f + ":afternotok"}));
  REQUIRE(c.exit_code == 0);
  const std::string job_c = lines_of(c.out).at(0);

  CHECK(wait_job_state(job_f, {"FAILED"}) == "FAILED");
  CHECK(wait_job_state(job_c, {"COMPLETED", "FAILED", "CANCELLED"}, 60s) == "COMPLETED");
  REQUIRE(wait_until([&] { return job_fields(job_never)["Reason"] == "DependencyNeverSatisfied"; },
                     60s));
  auto status = ws.hpclaunch({"status", job_never});
  INFO("status: " << status.out);
  CHECK(status.exit_code == 0);
  CHECK(std::regex_search(status.out,
                          std::regex("\nstate +PENDING \\(DependencyNeverSatisfied\\)\n")));
  // Following it ends at once with the reason instead of waiting for ever.
  auto follow = ws.hpclaunch({"logs", "-f", job_never});
  INFO("logs -f: " << follow.summary() << "\n" << follow.err);
  CHECK(follow.exit_code == 76);
  CHECK(contains(follow.err, "will never start"));
  CHECK(contains(follow.err, "hpclaunch cancel " + job_never));
  CHECK(job_fields(job_never)["JobState"] == "PENDING");  // still there: the user decides
}
