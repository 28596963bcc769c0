#include "follow/run_diff.h"

#include <catch2/catch.hpp>

using nlohmann::json;

namespace {

// The file the batch script writes (templates/sbatch.sh.mustache, "run record").
const char* const kRestartZero =
    R"({
  "restart": 0,
  "started_at": "2026-11-25T14:00:00Z",
  "job_id": "12",
  "nodelist": "node[01-02]",
  "batch_host": "node01",
  "versions": {
    "slurm": "slurm 22.05.8",
    "program": )"
    R"("hpctrain 0.9.0 (git 3f2a1b0)\nLibTorch 1.13.1 (C++11 ABI: yes)\n)"
    R"(CUDA: not compiled in (CPU LibTorch)\nNCCL: not compiled in",
    "nvidia_driver": "  "
  }
})";

hpc::RunSnapshot snapshot(const std::string& job, json spec,
                          std::vector<hpc::RestartRecord> restarts) {
  hpc::RunSnapshot s;
  s.record.job_id = job;
  s.record.local_dir = "runs/tiny-" + job;
  s.record.hpclaunch_version = "0.9.0";
  s.spec = std::move(spec);
  s.restarts = std::move(restarts);
  return s;
}

const hpc::RunDifference* find(const std::vector<hpc::RunDifference>& diffs,
                               const std::string& key) {
  for (const auto& d : diffs)
    if (d.key == key) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE("a restart record: nodes, and the program's version lines by their first word") {
  hpc::RestartRecord r = hpc::parse_restart_record(kRestartZero, "restart-0.json");
  CHECK(r.problem.empty());
  CHECK(r.restart == 0);
  CHECK(r.nodelist == "node[01-02]");
  CHECK(r.started_at == "2026-11-25T14:00:00Z");
  CHECK(r.versions.at("slurm") == "slurm 22.05.8");
  CHECK(r.versions.at("program: hpctrain") == "0.9.0 (git 3f2a1b0)");
  CHECK(r.versions.at("program: LibTorch") == "1.13.1 (C++11 ABI: yes)");
  CHECK(r.versions.at("program: CUDA") == "not compiled in (CPU LibTorch)");
  CHECK(r.versions.count("nvidia_driver") == 0);  // blank: the probe said nothing
}

TEST_CASE("a restart record that is not one says so and is not thrown") {
  CHECK(hpc::parse_restart_record("{\"restart\": ", "f").problem.rfind("unreadable", 0) == 0);
  CHECK(hpc::parse_restart_record("[1]", "f").problem.rfind("unreadable", 0) == 0);
  CHECK(hpc::parse_restart_record(R"({"restart": "0"})", "f").problem.rfind("unreadable", 0) == 0);
}

TEST_CASE("figures from metrics.jsonl: steps, final loss, val loss, step time, bad lines skipped") {
  const std::string jsonl = R"({"step":0,"loss":10.5,"step_ms":100,"tokens_per_s":1000})"
                            "\n"
                            "not json\n"
                            R"({"step":1,"loss":9.25,"step_ms":50,"tokens_per_s":2000})"
                            "\n"
                            R"({"step":1,"val_loss":9.5})"
                            "\n"
                            // A resumed run repeats step 1: it counts once, with the last value.
                            R"({"step":1,"loss":9.0,"step_ms":60,"tokens_per_s":2100})"
                            "\n";
  hpc::RunFigures f = hpc::figures_from_metrics(jsonl);
  REQUIRE(f.steps);
  CHECK(*f.steps == 2);
  CHECK(*f.final_loss == Approx(9.0));
  CHECK(*f.final_val_loss == Approx(9.5));
  CHECK(*f.train_seconds == Approx(0.16));
  CHECK_FALSE(hpc::figures_from_metrics("").steps);
}

TEST_CASE("flattened spec keys: objects descended, arrays and values leaves") {
  auto flat = hpc::flatten_json(json::parse(R"({"a": {"b": 1, "c": {"d": "x"}}, "e": [1, 2],
                                                  "f": {}, "g": null})"));
  CHECK(flat.at("a.b") == "1");
  CHECK(flat.at("a.c.d") == "x");
  CHECK(flat.at("e") == "[1,2]");
  CHECK(flat.at("f") == "{}");
  CHECK(flat.at("g") == "null");
}

TEST_CASE("two identical runs: no differences, and the table says so") {
  json spec = json::parse(R"({"shape": {"nodes": 2}, "trainer": {"args": ["--model", "tiny"]}})");
  auto r0 = hpc::parse_restart_record(kRestartZero, "f");
  auto a = snapshot("12", spec, {r0});
  auto b = snapshot("13", spec, {r0});
  auto diffs = hpc::diff_runs(a, b);
  CHECK(diffs.empty());
  CHECK(hpc::format_run_differences(diffs, a, b).find("identical") != std::string::npos);
  CHECK(hpc::run_differences_json(diffs, a, b)["identical"] == true);
}

TEST_CASE("differences by section: spec keys, program, versions, nodes per restart, figures") {
  json spec_a = json::parse(R"({"shape": {"nodes": 2, "time": "01:00:00"}, "job": {"name": "t"}})");
  json spec_b = json::parse(R"({"shape": {"nodes": 1, "time": "01:00:00"}})");
  auto r0 = hpc::parse_restart_record(kRestartZero, "f");
  auto r0b = r0;
  r0b.nodelist = "node02";
  r0b.versions["slurm"] = "slurm 23.02.1";
  auto r1 = r0;
  r1.restart = 1;
  auto a = snapshot("12", spec_a, {r0, r1});
  auto b = snapshot("13", spec_b, {r0b});
  a.record.program_recorded = b.record.program_recorded = true;
  a.record.program.work_tree = b.record.program.work_tree = "/home/u/proj";
  a.record.program.revision = "aaaa";
  b.record.program.revision = "bbbb";
  b.has_metrics = true;
  b.figures.steps = 20;
  auto diffs = hpc::diff_runs(a, b);

  REQUIRE(find(diffs, "shape.nodes"));
  CHECK(find(diffs, "shape.nodes")->a == "2");
  CHECK(find(diffs, "shape.nodes")->b == "1");
  CHECK(find(diffs, "job.name")->b == "-");
  CHECK_FALSE(find(diffs, "shape.time"));
  CHECK(find(diffs, "git revision")->section == "program");
  CHECK(find(diffs, "slurm")->b == "slurm 23.02.1");
  CHECK(find(diffs, "restart 0")->b == "node02");
  CHECK(find(diffs, "restart 1")->a == "node[01-02]");
  CHECK(find(diffs, "restart 1")->b == "-");
  CHECK(find(diffs, "steps")->b == "20");
  // Sections in order: spec, program, versions, nodes, figures.
  std::vector<std::string> order;
  for (const auto& d : diffs)
    if (order.empty() || order.back() != d.section) order.push_back(d.section);
  CHECK(order == std::vector<std::string>{"spec", "program", "versions", "nodes", "figures"});
  std::string table = hpc::format_run_differences(diffs, a, b);
  CHECK(table.find("tiny-12 (job 12)") != std::string::npos);
  CHECK(table.find("identical") == std::string::npos);
}

TEST_CASE("a hostile value in a record stays one printable line in the table") {
  json spec_a = json::parse(R"({"job": {"name": "$(touch /tmp/x)\nsecond line"}})");
  auto a = snapshot("12", spec_a, {});
  auto b = snapshot("13", json::object(), {});
  auto diffs = hpc::diff_runs(a, b);
  std::string table = hpc::format_run_differences(diffs, a, b);
  CHECK(table.find("$(touch /tmp/x)\\nsecond line") != std::string::npos);
  CHECK(table.find("x)\nsecond") == std::string::npos);
}
