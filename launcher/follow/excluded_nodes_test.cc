#include "follow/excluded_nodes.h"

#include <unistd.h>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "error.h"
#include "spec/spec.h"

namespace fs = std::filesystem;
using hpc::ExcludedNode;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("hpc-excluded-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST_CASE("the node check's log line gives each slow node its own figures", "[excluded-nodes]") {
  auto one = hpc::parse_node_check_line(
      "hpclaunch: node check: slow node(s) node02 (node02 gemm 5.8 GFLOP/s is 54% below the "
      "median 12.55): requeueing job 6 once without them");
  REQUIRE(one);
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].node == "node02");
  CHECK((*one)[0].figures == "node02 gemm 5.8 GFLOP/s is 54% below the median 12.55");

  auto two = hpc::parse_node_check_line(
      "hpclaunch: node check: slow node(s) gpu-a1,gpu-b7 (gpu-a1 gemm 1 GFLOP/s is 90% below the "
      "median 10; link 2 GB/s is 80% below the median 10;gpu-b7 link 1 GB/s is 90% below the "
      "median 10): not requeued: without them partition p has 1 usable node(s), the job needs 2");
  REQUIRE(two);
  REQUIRE(two->size() == 2);
  CHECK((*two)[0].node == "gpu-a1");
  CHECK((*two)[0].figures ==
        "gpu-a1 gemm 1 GFLOP/s is 90% below the median 10; link 2 GB/s is 80% below the median 10");
  CHECK((*two)[1].figures == "gpu-b7 link 1 GB/s is 90% below the median 10");
}

TEST_CASE("other lines and hostile names are not slow nodes", "[excluded-nodes]") {
  CHECK_FALSE(hpc::parse_node_check_line("0: hpctrain node-check: slow nodes: node02"));
  CHECK_FALSE(hpc::parse_node_check_line("hpclaunch: node check: skipped (one node)"));
  // Only Slurm node names: no shell, no paths, no options.
  CHECK_FALSE(hpc::parse_node_check_line(
      "hpclaunch: node check: slow node(s) $(touch${IFS}x) (x): requeueing job 1 once"));
  CHECK_FALSE(hpc::parse_node_check_line(
      "hpclaunch: node check: slow node(s) node01,-x (x): requeueing job 1 once"));
  CHECK_FALSE(hpc::parse_node_check_line(
      "hpclaunch: node check: slow node(s) ../etc (x): requeueing job 1 once"));
}

TEST_CASE("remembered nodes expire after kExcludedNodeDays, and are forgotten on demand",
          "[excluded-nodes]") {
  const fs::path dir = fresh_dir("expire");
  const fs::path file = dir / "hpclaunch" / "excluded-nodes.json";
  CHECK(hpc::remembered_nodes(file, "jsc").empty());  // no file yet

  hpc::remember_nodes(file, "jsc", {{"node02", "", "17", "node02 gemm 1"}}, "2026-11-01");
  hpc::remember_nodes(file, "daic", {{"gpu01", "", "9", "gpu01 link 1"}}, "2026-11-01");
  auto jsc = hpc::remembered_nodes(file, "jsc");
  REQUIRE(jsc.size() == 1);
  CHECK(jsc[0].date == "2026-11-01");
  CHECK(jsc[0].job == "17");
  CHECK(hpc::excluded_now(jsc, "2026-11-14").size() == 1);  // 13 days
  CHECK(hpc::excluded_now(jsc, "2026-11-15").empty());      // 14 days: expired

  // The same job's log read again keeps the date; another job's check refreshes it.
  hpc::remember_nodes(file, "jsc", {{"node02", "", "17", "node02 gemm 1"}}, "2026-11-05");
  CHECK(hpc::remembered_nodes(file, "jsc")[0].date == "2026-11-01");
  hpc::remember_nodes(file, "jsc", {{"node02", "", "18", "node02 gemm 2"}}, "2026-11-05");
  CHECK(hpc::remembered_nodes(file, "jsc")[0].date == "2026-11-05");
  CHECK(hpc::remembered_nodes(file, "jsc")[0].figures == "node02 gemm 2");

  // Writing drops what has expired.
  hpc::remember_nodes(file, "jsc", {{"node07", "", "30", "node07 gemm 1"}}, "2026-12-01");
  jsc = hpc::remembered_nodes(file, "jsc");
  REQUIRE(jsc.size() == 1);
  CHECK(jsc[0].node == "node07");

  CHECK(hpc::forget_nodes(file, "jsc") == 1);
  CHECK(hpc::remembered_nodes(file, "jsc").empty());
  CHECK(hpc::remembered_nodes(file, "daic").size() == 1);  // other clusters stay
  CHECK(hpc::forget_nodes(file, "jsc") == 0);
  fs::remove_all(dir);
}

TEST_CASE("a broken file is one clear error", "[excluded-nodes]") {
  const fs::path dir = fresh_dir("broken");
  const fs::path file = dir / "excluded-nodes.json";
  std::ofstream(file) << "[1, 2]";
  CHECK_THROWS_AS(hpc::remembered_nodes(file, "jsc"), hpc::UserError);
  std::ofstream(file) << "{\"jsc\": 3}";
  CHECK_THROWS_AS(hpc::remembered_nodes(file, "jsc"), hpc::UserError);
  fs::remove_all(dir);
}

TEST_CASE("run and submit add the remembered nodes to --exclude", "[excluded-nodes]") {
  const fs::path dir = fresh_dir("submit");
  const char* old = std::getenv("XDG_CONFIG_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
  const fs::path file = dir / "hpclaunch" / "excluded-nodes.json";
  hpc::remember_nodes(file, "jsc", {{"node02", "", "5", "f"}, {"node09", "", "5", "g"}},
                      hpc::utc_today());
  hpc::Spec spec;
  spec.cluster = "jsc";
  std::ostringstream note;
  CHECK(hpc::add_remembered_exclusions(spec, note));
  CHECK(spec.profile.sbatch_extra == std::vector<std::string>{"--exclude=node02,node09"});
  CHECK(note.str().rfind("hpclaunch: excluding node02,node09 (", 0) == 0);
  // The user's own --exclude is kept and extended.
  spec.profile.sbatch_extra = {"--exclude=gpu[1-2]"};
  CHECK(hpc::add_remembered_exclusions(spec, note));
  CHECK(spec.profile.sbatch_extra == std::vector<std::string>{"--exclude=gpu[1-2],node02,node09"});
  spec.cluster = "daic";  // nothing remembered there
  CHECK_FALSE(hpc::add_remembered_exclusions(spec, note));
  if (old) {
    ::setenv("XDG_CONFIG_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_CONFIG_HOME");
  }
  fs::remove_all(dir);
}
