// The shape presets on the real cluster: the rendered script passes `sbatch --test-only`, and
// `hpclaunch run` with the probe as trainer shows ranks 0..W-1 once each on the right nodes,
// one MASTER_ADDR/MASTER_PORT for all, the head node's address (with the IB suffix applied
// when the profile has one) and the GPUs asked for (--gpus-per-node, or --gres as on DAIC).
#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "harness.h"

using namespace slt;

namespace {

struct Shape {
  std::string preset;
  int nodes, gpus_per_node;
  std::vector<std::string> sets;  // extra --set KEY=VALUE
  std::string gpu_directive;      // the #SBATCH line that asks for the GPUs
  std::string ib_suffix;          // what the script appends to the head node's name
};

void check_shape(const Shape& shape) {
  Workspace ws("shape-" + shape.preset);
  std::vector<std::string> sets;
  for (const auto& s : shape.sets) {
    sets.push_back("--set");
    sets.push_back(s);
  }
  const int world = shape.nodes * shape.gpus_per_node;

  // 1. The script as `render -o` writes it is accepted by sbatch --test-only.
  const std::string script = ws.work() + "/job.sbatch";
  auto args = ws.job_args("render", shape.preset, sets);
  args.insert(args.end(), {"-o", script});
  auto rendered = ws.hpclaunch(args);
  INFO(rendered.summary());
  REQUIRE(rendered.exit_code == 0);
  const std::string text = read_file(script);
  CHECK(contains(text, "#SBATCH --nodes=" + std::to_string(shape.nodes) + "\n"));
  CHECK(contains(text, "#SBATCH --ntasks-per-node=" + std::to_string(shape.gpus_per_node) + "\n"));
  CHECK(contains(text, "#SBATCH " + shape.gpu_directive + "\n"));
  auto test_only = run({"sbatch", "--test-only", script}, 60s, {}, ws.work());
  INFO(test_only.summary());
  CHECK(test_only.exit_code == 0);
  CHECK(contains(test_only.err, "to start at"));

  // 2. `run` submits it, follows it to the end and exits 0.
  args = ws.job_args("run", shape.preset, sets);
  args.insert(args.end(), {"--", "--flag", "two words"});
  auto r = ws.hpclaunch(args);
  INFO("hpclaunch run: " << r.summary() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.err, "COMPLETED with exit code 0"));
  const std::string job = submitted_job_id(r.err);
  REQUIRE(!job.empty());

  auto fields = job_fields(job);
  CHECK(fields["JobState"] == "COMPLETED");
  const std::vector<std::string> hosts = hostnames(fields["NodeList"]);
  REQUIRE(hosts.size() == static_cast<size_t>(shape.nodes));
  if (shape.nodes == 2) CHECK(hosts == std::vector<std::string>{"node01", "node02"});

  // Ranks 0..W-1, each once, block-distributed over the nodes, on the node Slurm says.
  auto probes = probe_lines(r.out);
  REQUIRE(probes.size() == static_cast<size_t>(world));
  std::set<int> ranks;
  std::string gpus;
  for (int g = 0; g < shape.gpus_per_node; ++g) gpus += (g ? "," : "") + std::to_string(g);
  const std::string port = std::to_string(20000 + std::stol(job) % 12768);  // the profile's range
  for (const auto& p : probes) {
    INFO("rank " << p.rank << " on " << p.host);
    ranks.insert(p.rank);
    CHECK(p.label == p.rank);
    CHECK(p.node == p.rank / shape.gpus_per_node);
    CHECK(p.local == p.rank % shape.gpus_per_node);
    REQUIRE(p.node >= 0);
    REQUIRE(p.node < shape.nodes);
    CHECK(p.host == hosts[static_cast<size_t>(p.node)]);
    CHECK(p.addr == "127.0.0.1");  // the head node, as /etc/hosts resolves it
    CHECK(p.port == port);
    CHECK(p.addr == probes.front().addr);
    CHECK(p.port == probes.front().port);
    CHECK(p.cuda == gpus);
    CHECK(p.argv == "[train][--strategy][ddp][--flag][two words]");
  }
  CHECK(ranks.size() == static_cast<size_t>(world));
  CHECK(*ranks.begin() == 0);
  CHECK(*ranks.rbegin() == world - 1);

  // The script says which host it resolved: the head node plus the IB suffix.
  std::smatch m;
  static const std::regex rendezvous(
      R"(hpclaunch: job (\d+): (\d+) node\(s\), MASTER_ADDR=(\S+) \((\S+)\) MASTER_PORT=(\d+))");
  REQUIRE(std::regex_search(r.out, m, rendezvous));
  CHECK(m[1] == job);
  CHECK(m[2] == std::to_string(shape.nodes));
  CHECK(m[3] == "127.0.0.1");
  CHECK(m[4] == hosts.front() + shape.ib_suffix);
  CHECK(m[5] == port);
}

}  // namespace

TEST_CASE("1n1g: accepted by sbatch --test-only, run gives rank 0 with GPU 0", "[slurm][shape]") {
  check_shape({"1n1g", 1, 1, {}, "--gpus-per-node=1", ""});
}

TEST_CASE("1n2g: accepted by sbatch --test-only, run gives ranks 0-1 on one node",
          "[slurm][shape]") {
  check_shape({"1n2g", 1, 2, {}, "--gpus-per-node=2", ""});
}

TEST_CASE("2n2g: accepted by sbatch --test-only, run gives ranks 0-3 on node01/node02",
          "[slurm][shape]") {
  check_shape({"2n2g", 2, 2, {}, "--gpus-per-node=2", ""});
}

TEST_CASE("2n4g: accepted by sbatch --test-only, run gives ranks 0-7 on node01/node02",
          "[slurm][shape]") {
  check_shape({"2n4g", 2, 4, {}, "--gpus-per-node=4", ""});
}

TEST_CASE("2n2g with an IB suffix: MASTER_ADDR resolves node01i, the same on every rank",
          "[slurm][shape][ib]") {
  check_shape({"2n2g", 2, 2, {"profile.ib_suffix=i"}, "--gpus-per-node=2", "i"});
}

TEST_CASE("2n4g with DAIC's --gres=gpu:N syntax: each node's 4 GPUs are visible",
          "[slurm][shape][gres]") {
  check_shape({"2n4g", 2, 4, {"profile.gpu_request=gres"}, "--gres=gpu:4", ""});
}

TEST_CASE("1n2g with --gres=gpu:2: the node's 2 GPUs are visible", "[slurm][shape][gres]") {
  check_shape({"1n2g", 1, 2, {"profile.gpu_request=gres"}, "--gres=gpu:2", ""});
}
