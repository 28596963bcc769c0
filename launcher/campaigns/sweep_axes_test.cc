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
