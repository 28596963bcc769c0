// `hpclaunch clusters diff`: one line per differing resolved key, env vars with their reason.
#include "campaigns/clusters_diff.h"

#include <catch2/catch.hpp>

using namespace hpc;
using nlohmann::json;

namespace {
bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("clusters diff: one line per differing key, env vars with their reason", "[tune]") {
  json a = json::parse(
      R"({"partition": "gpu", "nccl": {"NCCL_P2P_DISABLE": {"value": 1, "reason": "SYS"}},
                           "modules": ["cuda"], "port_range": {"min": 20000, "max": 32767}})");
  json b = json::parse(
      R"({"partition": "booster", "nccl": {"NCCL_P2P_DISABLE": {"value": 1, "reason": "measured"},
                           "NCCL_ALGO": {"value": "Tree", "reason": "tune: faster"}},
                           "modules": ["cuda"], "port_range": {"min": 20000, "max": 30000},
                           "tuning": {"preset": "2n4g", "date": "d",
                           "winner": "c2", "candidates": [1, 2]}})");
  auto lines = diff_cluster_profiles(a, b);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "partition: \"gpu\" -> \"booster\"");
  CHECK(lines[1] == "port_range.max: 32767 -> 30000");
  CHECK(lines[2] == "nccl.NCCL_ALGO: (unset) -> \"Tree\" (tune: faster)");
  CHECK(lines[3] == "nccl.NCCL_P2P_DISABLE: 1, reason \"SYS\" -> \"measured\"");
  CHECK(has(lines[4], "tuning"));
  CHECK(has(lines[4], "(none) -> 2n4g on d, 2 candidates, winner c2"));
  CHECK(diff_cluster_profiles(a, a).empty());
  auto back = diff_cluster_profiles(b, a);
  CHECK(back[2] == "nccl.NCCL_ALGO: \"Tree\" -> (unset)");
}
