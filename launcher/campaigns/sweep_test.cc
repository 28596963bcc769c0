// The sweep's arithmetic and files: steady-state tokens/s, speedup and efficiency, results.csv
// round trips, the batch size of each point in strong and weak scaling, sweep files.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "campaigns/plot.h"
#include "campaigns/sweep.h"
#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "support/scripted_backend.h"

namespace fs = std::filesystem;
using namespace hpc;

namespace {
ResultRow row(const std::string& preset, const std::string& strategy, int nodes, int gpus,
              const std::string& job_id = "", const std::string& state = "COMPLETED") {
  ResultRow r;
  r.preset = preset;
  r.strategy = strategy;
  r.nodes = nodes;
  r.gpus = gpus;
  r.job_id = job_id;
  r.state = state;
  return r;
}
}  // namespace

TEST_CASE("steady state drops warm-up steps and reports mean and sample std", "[sweep]") {
  std::vector<double> v = {10, 50, 90, 100, 102, 98, 100, 100};
  auto t = steady_state(v);  // default: max(3, 20% of 8 = 2) = 3 warm-up steps
  REQUIRE(t);
  CHECK(t->warmup == 3);
  CHECK(t->steps_used == 5);
  CHECK(t->mean == Approx(100.0));
  CHECK(t->std == Approx(std::sqrt(8.0 / 4)));  // deviations 0,2,-2,0,0
  auto all = steady_state(v, 0);
  CHECK(all->steps_used == 8);
  // 20% wins for long runs.
  std::vector<double> many(100, 5.0);
  CHECK(steady_state(many)->warmup == 20);
  // Always keep one step; none is no measurement.
  auto one = steady_state({7.0});
  CHECK(one->steps_used == 1);
  CHECK(one->mean == 7.0);
  CHECK(one->std == 0.0);
  CHECK_FALSE(steady_state({}));
}

TEST_CASE("metrics lines give tokens/s by step, skipping eval lines and a cut last line",
          "[sweep]") {
  std::string jsonl =
      "{\"step\":0,\"loss\":10,\"tokens_per_s\":100}\n"
      "{\"step\":1,\"loss\":9,\"tokens_per_s\":200}\n"
      "{\"step\":1,\"val_loss\":9.5}\n"
      "\n"
      "{\"step\":1,\"loss\":9,\"tokens_per_s\":250}\n"  // a resumed run repeats step 1
      "{\"step\":2,\"loss\":8,\"tokens_per_s\":300}\n"
      "{\"step\":3,\"lo";
  auto v = tokens_per_s_from_metrics(jsonl);
  REQUIRE(v.size() == 3);
  CHECK(v[0] == 100);
  CHECK(v[1] == 250);
  CHECK(v[2] == 300);
  CHECK_THROWS_WITH(tokens_per_s_from_metrics("garbage\n{\"step\":0,\"tokens_per_s\":1}\n"),
                    Catch::Contains("line 1"));
}

TEST_CASE("speedup and efficiency are per strategy, against the fewest GPUs measured", "[sweep]") {
  std::vector<ResultRow> rows(5);
  rows[0] = row("1n1g", "ddp", 1, 1);
  rows[0].tokens_per_s = 1000;
  rows[1] = row("1n2g", "ddp", 1, 2);
  rows[1].tokens_per_s = 1800;
  rows[2] = row("2n2g", "ddp", 2, 4);
  rows[2].state = "FAILED";
  rows[3] = row("1n2g", "fsdp", 1, 2);
  rows[3].tokens_per_s = 1500;
  rows[4] = row("2n2g", "fsdp", 2, 4);
  rows[4].tokens_per_s = 2400;
  compute_scaling(rows);
  CHECK(*rows[0].speedup == Approx(1.0));
  CHECK(*rows[1].speedup == Approx(1.8));
  CHECK(*rows[1].efficiency == Approx(0.9));
  CHECK_FALSE(rows[2].speedup);
  CHECK(*rows[3].speedup == Approx(1.0));  // fsdp's smallest point is 2 GPUs
  CHECK(*rows[4].speedup == Approx(1.6));
  CHECK(*rows[4].efficiency == Approx(0.8));
  CHECK(*rows[1].tokens_per_s_per_gpu() == Approx(900));
}

TEST_CASE("results.csv round-trips, quoting commas, quotes and newlines", "[sweep]") {
  ResultRow a = row("1n1g", "ddp", 1, 1, "42", "COMPLETED");
  a.tokens_per_s = 1234.5;
  a.tokens_per_s_std = 12.25;
  a.steps_used = 5;
  a.run_dir = "/runs/x-42";
  a.log = "/runs/x-42/x-42.out";
  a.startup_queue_s = 1.5;
  a.startup_environment_s = 0.25;
  a.startup_rendezvous_s = 7.3;
  a.startup_first_step_s = 2;
  ResultRow b = row("1n2g", "ddp", 1, 2, "43", "FAILED");
  b.message = "job ended FAILED (exit code 1), \"see\" the log\nsecond line";
  b.log = "/runs/a,b/log.out";
  std::vector<ResultRow> rows = {a, b};
  compute_scaling(rows);
  std::string csv = results_csv(rows);
  CHECK(csv.rfind("preset,strategy,nodes,gpus,job_id,state,tokens_per_s_mean,", 0) == 0);
  auto back = parse_results_csv(csv, "results.csv");
  REQUIRE(back.size() == 2);
  CHECK(back[0].preset == "1n1g");
  CHECK(*back[0].tokens_per_s == Approx(1234.5));
  CHECK(*back[0].tokens_per_s_std == Approx(12.25));
  CHECK(back[0].steps_used == 5);
  CHECK(back[0].job_id == "42");
  CHECK(csv.find(",startup_queue_s,startup_environment_s,startup_rendezvous_s,"
                 "startup_first_step_s\n") != std::string::npos);
  CHECK(*back[0].startup_queue_s == Approx(1.5));
  CHECK(*back[0].startup_environment_s == Approx(0.25));
  CHECK(*back[0].startup_rendezvous_s == Approx(7.3));
  CHECK(*back[0].startup_first_step_s == Approx(2));
  CHECK_FALSE(back[1].startup_queue_s);  // not measured: an empty field
  CHECK_FALSE(back[1].tokens_per_s);
  CHECK(back[1].state == "FAILED");
  CHECK(back[1].message == b.message);
  CHECK(back[1].log == b.log);
  CHECK_THROWS_WITH(parse_results_csv("preset,strategy\n", "r.csv"),
                    Catch::Contains("r.csv:1: no column \"gpus\""));
  CHECK_THROWS_WITH(parse_results_csv(csv + "1n4g,ddp,1,four,,X,,,,,,0,,,\n", "r.csv"),
                    Catch::Contains("r.csv:5: gpus") && Catch::Contains("not a number"));
}

// Found by fuzzing (fuzz/results_csv_fuzz.cc, UBSan): counts outside int's range were cast to int,
// which is undefined; on x86 "1e10" and "nan" became -2147483648 and report wrote that back.
TEST_CASE("results.csv counts are whole numbers within int's range", "[sweep]") {
  const std::string header =
      results_csv({}) + "1n1g,ddp,1,1,42,COMPLETED,1000,,,,,5,,,\n";  // a good first row
  for (const std::string bad : {"1e10", "nan", "-1", "2.9", "2147483648", "inf"}) {
    INFO(bad);
    const std::string nodes = header + "1n2g,ddp," + bad + ",2,43,COMPLETED,,,,,,0,,,\n";
    CHECK_THROWS_WITH(parse_results_csv(nodes, "r.csv"),
                      Catch::Contains("r.csv:3: nodes: \"" + bad + "\" is not a"));
    const std::string steps = header + "1n2g,ddp,1,2,43,COMPLETED,,,,,," + bad + ",,,\n";
    CHECK_THROWS_WITH(parse_results_csv(steps, "r.csv"), Catch::Contains("r.csv:3: steps_used"));
  }
  auto rows = parse_results_csv(header + "1n2g,ddp,1e0,2147483647,43,X,,,,,,0,,,\n", "r.csv");
  CHECK(rows[1].nodes == 1);
  CHECK(rows[1].gpus == 2147483647);
}

TEST_CASE("strong scaling keeps the global batch, weak scales it with the world size", "[sweep]") {
  std::vector<std::string> args = {"--model",   "tiny", "--micro-batch", "4",
                                   "--seq-len", "64",   "--max-steps",   "100"};
  auto strong1 = point_trainer_args(args, "strong", 8, 1, 1, 4);
  auto strong4 = point_trainer_args(args, "strong", 8, 4, 1, 4);
  auto tail = [](const std::vector<std::string>& v) {
    return std::vector<std::string>(v.end() - 4, v.end());
  };
  CHECK(tail(strong1) ==
        std::vector<std::string>{"--max-steps", "8", "--total-batch-tokens", "1024"});
  CHECK(tail(strong4) == tail(strong1));
  CHECK(std::count(strong1.begin(), strong1.end(), "--max-steps") == 1);
  auto weak1 = point_trainer_args(args, "weak", 0, 1, 1, 4);
  auto weak4 = point_trainer_args(args, "weak", 0, 4, 1, 4);
  CHECK(weak1.back() == "256");
  CHECK(weak4.back() == "1024");
  // A given total is the strong batch, or the smallest point's batch under weak scaling.
  std::vector<std::string> given = {"--total-batch-tokens=2048"};
  CHECK(point_trainer_args(given, "strong", 0, 2, 1, 4).back() == "2048");
  CHECK(point_trainer_args(given, "weak", 0, 2, 1, 4).back() == "4096");
  // Nothing known: strong leaves the trainer's default alone.
  CHECK(point_trainer_args({}, "strong", 0, 2, 1, 4).empty());
}

TEST_CASE("sweep files: keys, lists and one-line errors", "[sweep]") {
  fs::path dir = fs::temp_directory_path() / ("sweep_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& text) {
    std::ofstream(dir / "s.json") << text;
    return dir / "s.json";
  };
  auto c = read_sweep_file(
      write("// a sweep\n{\"presets\": \"1n1g, 1n2g\", \"strategies\": [\"ddp\"], \"steps\": 8,\n"
            " \"max_concurrent\": 2, \"trainer_args\": [\"--model\", \"tiny\"]}"));
  CHECK(c.presets == std::vector<std::string>{"1n1g", "1n2g"});
  CHECK(c.strategies == std::vector<std::string>{"ddp"});
  CHECK(c.steps == 8);
  CHECK(c.max_concurrent == 2);
  CHECK(c.trainer_args.size() == 2);
  CHECK_THROWS_WITH(read_sweep_file(write("{\"preset\": [\"1n1g\"]}")),
                    Catch::Contains("s.json: preset: unknown key") && Catch::Contains("presets"));
  CHECK_THROWS_WITH(read_sweep_file(write("{\"steps\": \"8\"}")),
                    Catch::Contains("steps: expected an integer"));
  CHECK_THROWS_WITH(read_sweep_file(write("{\"presets\": [1]}")),
                    Catch::Contains("presets: expected a list of strings"));
  CHECK_THROWS_WITH(read_sweep_file(write("{\"presets\": [\"1n1g\",]}")),
                    Catch::Contains("s.json:1:"));
  CHECK_THROWS_AS(read_sweep_file(dir / "missing.json"), UserError);
  CHECK(split_comma_list("").empty());
  CHECK(split_comma_list("a,,b") == std::vector<std::string>{"a", "", "b"});
  fs::remove_all(dir);
}

namespace {
// Jobs that do what the test says, poll by poll.
const std::string kMetrics = "{\"step\":0,\"tokens_per_s\":1}\n{\"step\":1,\"tokens_per_s\":500}\n";
test::ScriptedJob completed() {
  return {{{"COMPLETED", 0, "log\n"}}, {{"metrics.jsonl", kMetrics}}};
}
test::ScriptedJob failed() { return {{{"FAILED", 0, "log\n", 3}}, {}}; }
test::ScriptedJob pending() { return {{{"PENDING", 0, "log\n", -1, "Resources"}}, {}}; }
test::ScriptedJob preempted() { return {{{"PREEMPTED", 0, "log\n"}}, {}}; }
// As Slurm shows a preempted and requeued job, poll by poll.
test::ScriptedJob preempted_then_requeued() {
  return {{{"RUNNING", 0, "log\n"},
           {"PREEMPTED"},
           {"PREEMPTED"},
           {"PENDING", 0, "", -1, "Resources"},
           {"RUNNING"},
           {"COMPLETED"}},
          {{"metrics.jsonl", kMetrics}}};
}
// A controller restart in the middle: "Invalid job id" twice, then the job again.
test::ScriptedJob unknown_for_a_moment() {
  return {{{"RUNNING", 0, "log\n"}, {"GONE"}, {"GONE"}, {"RUNNING"}, {"COMPLETED"}},
          {{"metrics.jsonl", kMetrics}}};
}
}  // namespace

TEST_CASE("a point the controller does not know for a moment is measured, not LOST", "[sweep]") {
  fs::path dir = fs::temp_directory_path() / ("sweep_lost_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "runs");
  SweepConfig c;
  c.presets = {"1n1g"};
  c.strategies = {"ddp"};
  c.poll_interval_s = 0.02;
  c.no_project = true;
  c.out_dir = (dir / "sw").string();
  BackendChoice choice;
  choice.runs_dir = (dir / "runs").string();
  test::ScriptedBackend backend("local", 400);
  backend.on_name("-1n1g-", unknown_for_a_moment());
  CHECK(run_sweep(c, choice, {"hpclaunch", "sweep"}, &backend) == 0);
  auto rows = parse_results_csv(read_input_file(dir / "sw/results.csv"), "results.csv");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].state == "COMPLETED");
  CHECK(backend.polls("400") >= 5);
  fs::remove_all(dir);
}

TEST_CASE("a sweep keeps failed and never-started points as rows, and resumes only those",
          "[sweep]") {
  fs::path dir = fs::temp_directory_path() / ("sweep_run_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "runs");
  SweepConfig c;
  c.presets = {"1n1g", "1n2g", "1n4g"};
  c.strategies = {"ddp"};
  c.max_concurrent = 3;
  c.start_timeout_s = 1;
  c.poll_interval_s = 0.05;
  c.no_project = true;
  c.out_dir = (dir / "sw").string();
  BackendChoice choice;
  choice.runs_dir = (dir / "runs").string();
  test::ScriptedBackend backend("local", 100);
  backend.on_name("-1n1g-", completed()).on_name("-1n2g-", failed()).on_name("-1n4g-", pending());
  CHECK(run_sweep(c, choice, {"hpclaunch", "sweep"}, &backend) == 1);
  CHECK(backend.submitted.size() == 3);
  CHECK(backend.cancelled.size() == 1);  // the one that never started
  auto rows = parse_results_csv(read_input_file(dir / "sw/results.csv"), "results.csv");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].state == "COMPLETED");
  CHECK(*rows[0].tokens_per_s == Approx(500));  // the first step is warm-up
  CHECK(rows[1].state == "FAILED");
  CHECK(rows[1].message.find("exit code 3") != std::string::npos);
  CHECK(rows[1].log.find("job.out") != std::string::npos);
  CHECK(rows[2].state == "START_TIMEOUT");
  CHECK(rows[2].message.find("did not start within 1 s (last state PENDING, reason Resources)") !=
        std::string::npos);
  CHECK(fs::exists(dir / "sw/summary.md"));
  CHECK(read_input_file(dir / "sw/summary.md").find("Points without a measurement") !=
        std::string::npos);

  // Again: the completed point stays; the failed and the never-started ones are submitted again.
  test::ScriptedBackend again("local", 200);
  again.on_name("-1n", completed());
  CHECK(run_sweep(c, choice, {"hpclaunch", "sweep"}, &again) == 0);
  CHECK(again.submitted.size() == 2);
  rows = parse_results_csv(read_input_file(dir / "sw/results.csv"), "results.csv");
  CHECK(rows[0].job_id == "100");
  CHECK(rows[1].job_id == "200");
  CHECK(rows[2].state == "COMPLETED");
  REQUIRE(rows[2].speedup);
  REQUIRE(rows[2].efficiency);
  CHECK(*rows[2].speedup == Approx(1.0));  // same tokens/s on 4 GPUs: no speedup
  CHECK(*rows[2].efficiency == Approx(0.25));
  fs::remove_all(dir);
}

TEST_CASE("a preempted point is watched for a requeue: requeued, it is measured, else a row",
          "[sweep]") {
  fs::path dir = fs::temp_directory_path() / ("sweep_preempt_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "runs");
  SweepConfig c;
  c.presets = {"1n1g", "1n2g"};
  c.strategies = {"ddp"};
  c.max_concurrent = 2;
  c.poll_interval_s = 0.02;
  c.requeue_settle_s = 0.5;
  c.no_project = true;
  c.out_dir = (dir / "sw").string();
  BackendChoice choice;
  choice.runs_dir = (dir / "runs").string();
  test::ScriptedBackend backend("local", 300);
  backend.on_name("-1n1g-", preempted_then_requeued()).on_name("-1n2g-", preempted());
  CHECK(run_sweep(c, choice, {"hpclaunch", "sweep"}, &backend) == 1);
  CHECK(backend.submitted.size() == 2);  // the requeue is Slurm's: nothing submitted again
  auto rows = parse_results_csv(read_input_file(dir / "sw/results.csv"), "results.csv");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].state == "COMPLETED");
  CHECK(rows[0].job_id == "300");
  REQUIRE(rows[0].tokens_per_s);
  CHECK(*rows[0].tokens_per_s == Approx(500));
  CHECK(rows[1].state == "PREEMPTED");
  CHECK(rows[1].message.find("job ended PREEMPTED") != std::string::npos);
  fs::remove_all(dir);
}
