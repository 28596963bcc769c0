// The figure a user's program prints: rank labels, the last match of rank 0, bad regexes, and a
// sweep measured from its jobs' logs through the scripted backend.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "campaigns/log_metric.h"
#include "campaigns/plot.h"
#include "campaigns/sweep.h"
#include "error.h"
#include "input_file.h"
#include "support/scripted_backend.h"

namespace fs = std::filesystem;
using namespace hpc;

TEST_CASE("rank labels: srun's N: and torch's [rankN]:", "[log_metric]") {
  CHECK(split_rank_label("0: step 1").srun_label == 0);
  CHECK(split_rank_label("0: step 1").text == "step 1");
  CHECK(split_rank_label(" 3: x").srun_label == 3);  // srun pads labels when there are 10+ tasks
  CHECK(split_rank_label("step 1").srun_label == -1);
  CHECK(split_rank_label("step 1").torch_rank == -1);
  CHECK(split_rank_label("step 1").text == "step 1");
  CHECK(split_rank_label("[rank2]: x").torch_rank == 2);
  CHECK(split_rank_label("1: [rank0]: x").srun_label == 1);
  CHECK(split_rank_label("1: [rank0]: x").torch_rank == 0);
  CHECK(split_rank_label("1: [rank0]: x").text == "x");
  CHECK(split_rank_label("0: [default1]:x").torch_rank == -1);  // a local rank: not read
}

TEST_CASE("under torchrun srun's label is a node: rank 0 may print from node 1", "[log_metric]") {
  LogMetric m = make_log_metric("tokens/s: ([0-9.]+)", "--metric-regex");
  std::string log = "1: tokens/s: 70\n0: something else\n";
  CHECK_FALSE(last_metric_value(m, log, SrunLabels::kRanks));
  REQUIRE(last_metric_value(m, log, SrunLabels::kNodes));
  CHECK(*last_metric_value(m, log, SrunLabels::kNodes) == Approx(70));
  // torch's own global-rank prefix still tells ranks apart.
  CHECK(*last_metric_value(m, "0: [rank0]: tokens/s: 5\n1: [rank3]: tokens/s: 9\n",
                           SrunLabels::kNodes) == Approx(5));
}

TEST_CASE("the metric is rank 0's last matching line, group 1 or the whole match", "[log_metric]") {
  LogMetric m = make_log_metric("tokens/s: ([0-9.]+)", "--metric-regex");
  std::string log =
      "hpclaunch: job 7: 2 node(s)\n"
      "0: tokens/s: 100\n"
      "1: tokens/s: 999\n"  // another rank's line
      "0: tokens/s: 250.5\r\n"
      "0: done\n";
  REQUIRE(last_metric_value(m, log));
  CHECK(*last_metric_value(m, log) == Approx(250.5));
  CHECK(*last_metric_value(m, "tokens/s: 42\n") == Approx(42));  // unlabelled: rank 0's
  CHECK_FALSE(last_metric_value(m, "1: tokens/s: 5\nnothing here\n"));
  LogMetric whole = make_log_metric("[0-9]+\\.[0-9]+", "x");
  CHECK(*last_metric_value(whole, "took 1.5 s\n") == Approx(1.5));
  LogMetric wrong = make_log_metric("tokens/s: (\\S+)", "x");
  CHECK_THROWS_WITH(last_metric_value(wrong, "a\ntokens/s: fast\n"),
                    Catch::Contains("line 2: \"fast\"") && Catch::Contains("is not a number"));
}

TEST_CASE("a bad regex is one line naming where it came from", "[log_metric]") {
  CHECK_THROWS_WITH(make_log_metric("tokens/s: ([0-9.]+", "sweep.json: metric.regex"),
                    Catch::StartsWith("sweep.json: metric.regex: \"tokens/s: ([0-9.]+\" is not a "
                                      "valid regular expression"));
  CHECK_THROWS_AS(make_log_metric("", "--metric-regex"), UserError);
  try {
    make_log_metric("a{2,1}", "--metric-regex");
    FAIL("no error");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}

TEST_CASE("RE2: linear time on long lines, its syntax refused in one line", "[log_metric]") {
  // std::regex overflowed its stack on a 200 KB line with these, and took 81 s for (a+)+$.
  const std::string long_line = std::string(200000, 'a') + " tps 42";
  for (const char* pattern : {".*tps ([0-9]+)", "(a|b)*x", "(a+)+$", "(?:a*)*b"}) {
    LogMetric m = make_log_metric(pattern, "--metric-regex");
    auto started = std::chrono::steady_clock::now();
    std::optional<double> v = last_metric_value(m, "0: " + long_line + "\n");
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
    if (std::string(pattern) == ".*tps ([0-9]+)") CHECK(v == std::optional<double>(42));
  }
  LogMetric nested = make_log_metric("(a+)+$", "--metric-regex");
  CHECK_FALSE(last_metric_value(nested, std::string(30, 'a') + "b\n"));
  // The labels of a line that is all padding, or all digits, are read in one pass too.
  CHECK(split_rank_label(std::string(300000, ' ') + "0: x").srun_label == 0);
  CHECK(split_rank_label(std::string(300000, '1') + ": x").srun_label == -1);
  // What RE2 does not accept: one line naming the flag, the syntax and where it is described.
  for (const char* pattern : {"(a)\\1", "tps (?=[0-9])", "(?<=x)y"}) {
    try {
      make_log_metric(pattern, "--metric-regex");
      FAIL("no error for " << pattern);
    } catch (const UserError& e) {
      const std::string what = e.what();
      CHECK(what.find('\n') == std::string::npos);
      CHECK_THAT(what, Catch::StartsWith("--metric-regex: \""));
      CHECK_THAT(what, Catch::Contains("is not a valid regular expression (RE2: "));
      CHECK_THAT(what, Catch::Contains("https://github.com/google/re2/wiki/Syntax"));
    }
  }
}

TEST_CASE("sweep files: metric.regex is read and checked", "[log_metric]") {
  fs::path dir = fs::temp_directory_path() / ("log_metric_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& text) {
    std::ofstream(dir / "s.json") << text;
    return dir / "s.json";
  };
  auto c = read_sweep_file(write(R"j({"metric": {"regex": "tokens/s: ([0-9.]+)"
}
})j"));
  REQUIRE(c.metric);
  CHECK(c.metric->pattern == "tokens/s: ([0-9.]+)");
  CHECK_THROWS_WITH(read_sweep_file(write(R"j({"metric": {"regex": "("}})j")),
                    Catch::Contains("s.json: metric.regex: \"(\" is not a valid regular"));
  CHECK_THROWS_WITH(read_sweep_file(write(R"j({"metric": {"regexp": "x"}})j")),
                    Catch::Contains("metric.regexp: unknown key"));
  CHECK_THROWS_WITH(read_sweep_file(write(R"j({"metric": "x"})j")),
                    Catch::Contains("metric: expected an object"));
  CHECK_THROWS_WITH(read_sweep_file(write(R"j({"metric": {"regex": 3}})j")),
                    Catch::Contains("metric.regex: expected a string"));
  fs::remove_all(dir);
}

TEST_CASE("a sweep with a metric regex measures each point from its job's log", "[log_metric]") {
  fs::path dir = fs::temp_directory_path() / ("log_metric_sweep_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "runs");
  SweepConfig c;
  c.presets = {"1n1g", "1n2g"};
  c.strategies = {"ddp"};
  c.poll_interval_s = 0.02;
  c.no_project = true;
  c.out_dir = (dir / "sw").string();
  c.metric = make_log_metric("tokens/s: ([0-9.]+)", "--metric-regex");
  BackendChoice choice;
  choice.runs_dir = (dir / "runs").string();
  test::ScriptedBackend backend("local", 400);
  backend.on_name("-1n1g-", {{{"COMPLETED", 0, "0: tokens/s: 90\n0: tokens/s: 100\n"}}, {}})
      .on_name("-1n2g-", {{{"COMPLETED", 0, "0: tokens/s: 180\n1: tokens/s: 1\n"}}, {}});
  CHECK(run_sweep(c, choice, {"hpclaunch", "sweep"}, &backend) == 0);
  auto rows = parse_results_csv(read_input_file(dir / "sw/results.csv"), "results.csv");
  REQUIRE(rows.size() == 2);
  REQUIRE(rows[0].tokens_per_s);
  CHECK(*rows[0].tokens_per_s == Approx(100));
  REQUIRE(rows[1].speedup);
  CHECK(*rows[1].speedup == Approx(1.8));

  // A log without the figure: a row saying so, exit 1.
  c.out_dir = (dir / "sw2").string();
  test::ScriptedBackend silent("local", 500);
  silent.on_name("-1n", {{{"COMPLETED", 0, "0: hello\n"}}, {}});
  CHECK(run_sweep(c, choice, {"hpclaunch", "sweep"}, &silent) == 1);
  rows = parse_results_csv(read_input_file(dir / "sw2/results.csv"), "results.csv");
  CHECK(rows[0].message.find("matches the metric regex") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a sweep of a user's program: one series named after its launch mode", "[log_metric]") {
  fs::path dir = fs::temp_directory_path() / ("program_sweep_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "runs");
  SweepConfig c;
  c.presets = {"1n1g", "2n2g"};
  c.launch = "srun";
  c.trainer_args = {"python3", "train.py", "--epochs", "1"};
  c.poll_interval_s = 0.02;
  c.no_project = true;
  c.out_dir = (dir / "sw").string();
  c.metric = make_log_metric("([0-9.]+) samples/s", "--metric-regex");
  BackendChoice choice;
  choice.runs_dir = (dir / "runs").string();
  test::ScriptedBackend backend("slurm", 600);
  backend.on_name("-1n1g-srun", {{{"COMPLETED", 0, "0: 10 samples/s\n"}}, {}})
      .on_name("-2n2g-srun", {{{"COMPLETED", 0, "0: 30 samples/s\n"}}, {}});
  CHECK(run_sweep(c, choice, {"hpclaunch", "sweep"}, &backend) == 0);
  REQUIRE(backend.submitted.size() == 2);
  // The program and its words as given: no --max-steps or --total-batch-tokens of hpctrain's.
  const std::string& script = backend.scripts.begin()->second;
  CHECK(script.find("train.py") != std::string::npos);
  CHECK(script.find("--max-steps") == std::string::npos);
  CHECK(script.find("--total-batch-tokens") == std::string::npos);
  auto rows = parse_results_csv(read_input_file(dir / "sw/results.csv"), "results.csv");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].strategy == "srun");
  REQUIRE(rows[1].speedup);
  CHECK(*rows[1].speedup == Approx(3.0));

  c.strategies = {"ddp"};
  CHECK_THROWS_WITH(run_sweep(c, choice, {"hpclaunch", "sweep"}, &backend),
                    Catch::StartsWith("--strategy: a strategy is hpctrain's"));
  c.strategies.clear();
  c.steps = 5;
  CHECK_THROWS_WITH(run_sweep(c, choice, {"hpclaunch", "sweep"}, &backend),
                    Catch::StartsWith("--steps: --steps sets hpctrain's --max-steps"));
  c.steps = 0;
  c.launch = "";
  CHECK_THROWS_WITH(run_sweep(c, choice, {"hpclaunch", "sweep"}, &backend),
                    Catch::StartsWith("--strategy: no strategies to sweep"));
  fs::remove_all(dir);
}
