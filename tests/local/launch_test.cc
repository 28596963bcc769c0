// --launch srun on the local backend: `hpclaunch run --local` with a user's bash program (not
// hpctrain) gives each of its tasks torch.distributed's env:// variables, as on a real cluster
// (tests/slurm/launch_test.cc), and the job is named after the program.
#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "local_harness.h"

using namespace local_test;

TEST_CASE("launch srun: a user's program gets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT") {
  Sandbox box;
  const fs::path program = box.work() / "rank env.sh";
  write_file(program, R"(#!/bin/bash
echo "rankenv rank=${RANK:-unset} local=${LOCAL_RANK:-unset} world=${WORLD_SIZE:-unset} \
lworld=${LOCAL_WORLD_SIZE:-unset} node=${NODE_RANK:-unset} addr=${MASTER_ADDR:-unset} \
port=${MASTER_PORT:-unset} job=${SLURM_JOB_NAME:-unset} args=[$1][$2]"
)");
  auto r = box.hpclaunch({"run", "--local", "--no-project", "--preset", "1n2g", "--launch", "srun",
                          "--set", "shape.cpus_per_gpu=1", "--runs-dir", box.runs().string(), "--",
                          "bash", "rank env.sh", "a b", "$(touch CANARY)"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  static const std::regex submitted(R"(submitted job (\d+) )");
  std::smatch m;
  REQUIRE(std::regex_search(r.err, m, submitted));
  const std::string job = m[1];
  CHECK(fs::exists(box.runs() / ("rank_env-" + job)));  // the job is named after the program

  std::set<std::string> ranks;
  static const std::regex line(
      R"(^(\d): rankenv rank=(\d) local=(\d) world=2 lworld=2 node=0 addr=127\.0\.0\.1 )"
      R"(port=(\d+) job=rank_env args=\[a b\]\[\$\(touch CANARY\)\]$)");
  for (const auto& l : lines_with(r.out, "rankenv")) {
    INFO(l);
    std::smatch f;
    REQUIRE(std::regex_match(l, f, line));
    CHECK(f[1] == f[2]);  // srun --label: the rank
    CHECK(f[2] == f[3]);  // one node: the local rank is the rank
    CHECK(f[4] == std::to_string(20000 + std::stol(job) % 12768));
    ranks.insert(f[2]);
  }
  CHECK(ranks == std::set<std::string>{"0", "1"});
  CHECK_FALSE(fs::exists(box.work() / "CANARY"));
}
