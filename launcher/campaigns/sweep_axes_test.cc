// Sweep axes: reading them from a sweep file (line:column errors), grid and zip, point names
// from values (hostile values stay text, and distinct), and how a value reaches the spec.
#include <catch2/catch.hpp>

#include "campaigns/sweep_axes.h"
#include "error.h"
#include "json_file.h"

using namespace hpc;
using nlohmann::json;

namespace {
SweepAxes axes_of(const std::string& text) {
  json j = parse_json_text(text, "s.json");
  return read_sweep_axes("s.json", text, j["axes"],
                         j.contains("combine") ? &j["combine"] : nullptr);
}
}  // namespace

TEST_CASE("axes expand as a grid, first axis slowest, or zipped", "[sweep][axes]") {
  SweepAxes grid = axes_of(R"({"axes": [{"key": "trainer.args.micro_batch", "values": [4, 8]},
                                        {"key": "seed", "values": [1, 2, 3]}]})");
  auto points = expand_axes(grid);
  REQUIRE(points.size() == 6);
  CHECK(points[0] == AxisValues{{"trainer.args.micro_batch", "4"}, {"seed", "1"}});
  CHECK(points[5] == AxisValues{{"trainer.args.micro_batch", "8"}, {"seed", "3"}});
  SweepAxes zip = axes_of(R"({"combine": "zip",
      "axes": [{"key": "shape.gpus_per_node", "values": [1, 2]},
               {"key": "trainer.args.micro_batch", "values": [8, 4]}]})");
  points = expand_axes(zip);
  REQUIRE(points.size() == 2);
  CHECK(points[1] == AxisValues{{"shape.gpus_per_node", "2"}, {"trainer.args.micro_batch", "4"}});
  CHECK(expand_axes(SweepAxes{}).size() == 1);
}

TEST_CASE("bad axes are one line with the file's line and column", "[sweep][axes]") {
  CHECK_THROWS_WITH(
      axes_of("{\"axes\": [\n  {\"key\": \"shape.gpus_per_nod\", \"values\": [1]}]}"),
      Catch::StartsWith("s.json:2:4: axes[0].key") && Catch::Contains("gpus_per_node"));
  CHECK_THROWS_WITH(
      axes_of("{\"axes\": [{\"key\": \"seed\",\n \"values\": []}]}"),
      Catch::StartsWith("s.json:2:2: axes[0].values") && Catch::Contains("non-empty"));
  CHECK_THROWS_WITH(axes_of(R"({"axes": [{"key": "seed", "values": [1, 1]}]})"),
                    Catch::Contains("listed twice"));
  CHECK_THROWS_WITH(axes_of(R"({"axes": [{"key": "seed", "values": [[1]]}]})"),
                    Catch::Contains("strings, numbers or booleans"));
  CHECK_THROWS_WITH(axes_of(R"({"combine": "zip", "axes": [{"key": "seed", "values": [1, 2]},
                               {"key": "trainer.args.lr", "values": [1]}]})"),
                    Catch::Contains("axes[1].values") && Catch::Contains("same number"));
  CHECK_THROWS_WITH(axes_of(R"({"combine": "cross", "axes": []})"),
                    Catch::Contains("combine") && Catch::Contains("grid"));
  CHECK_THROWS_WITH(axes_of(R"({"axes": [{"key": "shape.nodes", "values": ["two"]}]})"),
                    Catch::Contains("axes[0].key"));
  CHECK_THROWS_WITH(axes_of(R"({"axes": [{"key": "launch", "values": ["hpctrain"]}]})"),
                    Catch::Contains("cannot be an axis value"));
  CHECK_THROWS_WITH(axes_of(R"({"axes": [{"key": "preset", "values": ["1n1g"]}]})"),
                    Catch::Contains("\"presets\""));
  CHECK_THROWS_WITH(axes_of(R"({"axes": [{"key": "seed", "values": [1], "vals": 2}]})"),
                    Catch::Contains("axes[0].vals: unknown key"));
}

TEST_CASE("point words are safe file names, and hostile values stay distinct", "[sweep][axes]") {
  CHECK(safe_value_word("Ring") == "Ring");
  CHECK(safe_value_word("1e-4") == "1e-4");
  const std::string hostile = safe_value_word("$(touch /tmp/x)");
  CHECK(hostile.rfind("__touch__tmp_x__", 0) == 0);
  CHECK(hostile.size() == std::string("__touch__tmp_x_").size() + 9);
  CHECK(safe_value_word("a/b") != safe_value_word("a b"));
  CHECK(safe_value_word("../etc").find('/') == std::string::npos);
  CHECK(safe_value_word(".hidden")[0] != '.');
  CHECK(safe_value_word("").size() == 8);
  CHECK(safe_value_word(std::string(200, 'a')).size() == 49);
  CHECK(axis_short_name("profile.nccl.NCCL_ALGO") == "NCCL_ALGO");
  CHECK(axis_short_name("trainer.args.--micro_batch") == "micro_batch");
}

TEST_CASE("axis values become --set assignments, program arguments or the launch mode",
          "[sweep][axes]") {
  AxisEffect e = axis_effect({{"shape.gpus_per_node", "2"},
                              {"profile.nccl.NCCL_ALGO", "Tree"},
                              {"trainer.args.micro_batch", "8"},
                              {"trainer.args.--exact_name", "x"},
                              {"seed", "3"},
                              {"launch", "torchrun"}});
  CHECK(e.shape);
  CHECK(e.launch == "torchrun");
  REQUIRE(e.sets.size() == 3);
  CHECK(e.sets[0] == "shape.gpus_per_node=2");
  CHECK(e.sets[1] == "profile.nccl.NCCL_ALGO.value=Tree");
  CHECK(e.sets[2].rfind("profile.nccl.NCCL_ALGO.reason=", 0) == 0);
  REQUIRE(e.args.size() == 3);
  CHECK(e.args[0] == std::pair<std::string, std::string>{"--micro-batch", "8"});
  CHECK(e.args[1].first == "--exact_name");
  CHECK(e.args[2].first == "--seed");
  CHECK(with_program_args({"prog.py", "--micro-batch", "4", "--seed=1", "--x"},
                          {{"--micro-batch", "8"}, {"--seed", "2"}}) ==
        std::vector<std::string>{"prog.py", "--x", "--micro-batch", "8", "--seed", "2"});
}

TEST_CASE("a sweep's size is counted before its points are built, overflow checked",
          "[sweep][axes][size]") {
  SweepAxes none;
  CHECK(axis_combination_count(none) == std::optional<std::uint64_t>(1));
  SweepAxes forty;  // 40 axes of 2 values: 2^40 combinations, never expanded
  for (int i = 0; i < 40; ++i) forty.axes.push_back({"a" + std::to_string(i), {"0", "1"}});
  CHECK(axis_combination_count(forty) == std::optional<std::uint64_t>(1ULL << 40));
  SweepAxes seventy = forty;  // 2^70: past 64 bits
  for (int i = 40; i < 70; ++i) seventy.axes.push_back({"a" + std::to_string(i), {"0", "1"}});
  CHECK_FALSE(axis_combination_count(seventy));
  SweepAxes zip = axes_of(R"({"combine": "zip",
      "axes": [{"key": "shape.gpus_per_node", "values": [1, 2, 4]},
               {"key": "trainer.args.micro_batch", "values": [8, 4, 2]}]})");
  CHECK(axis_combination_count(zip) == std::optional<std::uint64_t>(3));

  CHECK_NOTHROW(check_sweep_size(none, 3, 2, 100));         // 600 runs
  CHECK_NOTHROW(check_sweep_size(zip, 10, 1, 100));         // 3000 runs
  CHECK_NOTHROW(check_sweep_size(none, 10000, 1, 1));       // exactly the limit
  CHECK_THROWS_WITH(check_sweep_size(none, 10001, 1, 1),
                    Catch::Contains("sweep: 10001 points (10001 presets x 1 series x 1 axis "
                                    "combination) x 1 repeat = 10001 runs, over the limit of "
                                    "10000 runs; pass fewer"));
  CHECK_THROWS_WITH(check_sweep_size(none, 200, 1, 100),
                    Catch::Contains("200 points") && Catch::Contains("x 100 repeats = 20000 runs"));
  CHECK_THROWS_WITH(check_sweep_size(forty, 1, 1, 1),
                    Catch::Contains("1099511627776 points") &&
                        Catch::Contains("1099511627776 axis combinations"));
  CHECK_THROWS_WITH(check_sweep_size(seventy, 1, 1, 1),
                    Catch::Contains("more than 18446744073709551615 points"));
  // 2^40 combinations x 2^24 presets fits no 64-bit count either.
  CHECK_THROWS_WITH(check_sweep_size(forty, 1ULL << 24, 1, 1),
                    Catch::Contains("more than 18446744073709551615 points"));
  CHECK_THROWS_AS(check_sweep_size(forty, 1, 1, 1), UserError);
}
