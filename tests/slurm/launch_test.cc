// --launch srun on the real cluster: a plain bash program (not hpctrain) runs once per GPU slot
// and sees torch.distributed's env:// variables, set per task from Slurm's own: RANK 0..W-1,
// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK, one MASTER_ADDR/MASTER_PORT, on the
// nodes Slurm chose, with its arguments intact. The torchrun script is checked by
// `sbatch --test-only` here; real torchrun runs belong to the tests with torch installed.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "harness.h"

using namespace slt;
namespace fs = std::filesystem;

namespace {

// The user's program: what one task sees.
const char kRankProgram[] = R"(#!/bin/bash
echo "rankenv rank=${RANK:-unset} local=${LOCAL_RANK:-unset} world=${WORLD_SIZE:-unset} \
lworld=${LOCAL_WORLD_SIZE:-unset} node=${NODE_RANK:-unset} addr=${MASTER_ADDR:-unset} \
port=${MASTER_PORT:-unset} host=$(hostname) procid=${SLURM_PROCID:-unset} args=[$1][$2]"
)";

struct RankLine {
  int label, rank, local, world, lworld, node;
  std::string addr, port, host, procid, args;
};

std::vector<RankLine> rank_lines(const std::string& out) {
  static const std::regex line(
      R"(^\s*(\d+): rankenv rank=(\d+) local=(\d+) world=(\d+) lworld=(\d+) node=(\d+) )"
      R"(addr=(\S+) port=(\S+) host=(\S+) procid=(\S+) args=(.*)$)");
  std::vector<RankLine> found;
  for (const auto& l : lines_of(out)) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    found.push_back({std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3]), std::stoi(m[4]),
                     std::stoi(m[5]), std::stoi(m[6]), m[7], m[8], m[9], m[10], m[11]});
  }
  return found;
}

std::vector<std::string> launch_args(const Workspace& ws, const std::string& verb,
                                     const std::string& mode,
                                     const std::vector<std::string>& command) {
  std::vector<std::string> a = {verb,       "--no-project",
                                "--preset", "2n2g",
                                "--launch", mode,
                                "--set",    "shape.cpus_per_gpu=1",
                                "--set",    "job.name=" + ws.job_name(),
                                "--"};
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

}  // namespace

TEST_CASE("launch srun on 2n2g: 4 tasks of a bash program see RANK 0-3 and one rendezvous",
          "[slurm][launch]") {
  Workspace ws("launch-srun");
  const std::string program = ws.dir() + "/rank env.sh";
  { std::ofstream(program) << kRankProgram; }
  auto r = ws.hpclaunch(launch_args(ws, "run", "srun", {"bash", program, "two words", "$(id)"}));
  INFO("hpclaunch run: " << r.summary() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.err, "COMPLETED with exit code 0"));
  const std::string job = submitted_job_id(r.err);
  REQUIRE(!job.empty());
  const std::vector<std::string> hosts = hostnames(job_fields(job)["NodeList"]);
  REQUIRE(hosts == std::vector<std::string>{"node01", "node02"});

  auto tasks = rank_lines(r.out);
  REQUIRE(tasks.size() == 4);
  const std::string port = std::to_string(20000 + std::stol(job) % 12768);
  std::set<int> ranks;
  std::set<std::string> seen_hosts;
  for (const auto& t : tasks) {
    INFO("rank " << t.rank << " on " << t.host);
    ranks.insert(t.rank);
    seen_hosts.insert(t.host);
    CHECK(t.label == t.rank);  // srun --label: the task's rank
    CHECK(t.procid == std::to_string(t.rank));
    CHECK(t.local == t.rank % 2);
    CHECK(t.node == t.rank / 2);
    CHECK(t.world == 4);
    CHECK(t.lworld == 2);
    CHECK(t.host == hosts[static_cast<size_t>(t.node)]);
    CHECK(t.addr == tasks.front().addr);
    CHECK(t.addr == "127.0.0.1");  // node01, as /etc/hosts resolves it
    CHECK(t.port == port);
    CHECK(t.args == "[two words][$(id)]");
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(seen_hosts == std::set<std::string>{"node01", "node02"});
}

TEST_CASE("launch torchrun on 2n2g: the script passes sbatch --test-only", "[slurm][launch]") {
  Workspace ws("launch-torchrun");
  const std::string script = ws.work() + "/job.sbatch";
  auto args = launch_args(ws, "render", "torchrun", {"python3", "train.py", "--lr", "3e-4"});
  args.insert(args.begin() + 1, {"-o", script});
  auto rendered = ws.hpclaunch(args);
  INFO(rendered.summary());
  REQUIRE(rendered.exit_code == 0);
  const std::string text = read_file(script);
  CHECK(contains(text, "\n    --ntasks=2 --ntasks-per-node=1 --cpus-per-task=2\n"));
  CHECK(contains(text, "\n  hpc_torchrun=(torchrun --nnodes=2 --nproc_per_node=2 "));
  auto test_only = run({"sbatch", "--test-only", script}, 60s, {}, ws.work());
  INFO(test_only.summary());
  CHECK(test_only.exit_code == 0);
  CHECK(contains(test_only.err, "to start at"));
}
