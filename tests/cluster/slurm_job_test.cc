// Smoke tests of the test cluster itself: real jobs on node01/node02 see the ranks, host names
// and GPUs that the launcher's generated scripts rely on.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "process.h"
#include "testcluster.h"

using hpc::test::output_lines;
using hpc::test::ProcessOptions;
using hpc::test::run_process;
using hpc::test::testcluster_dir;

namespace {

// A directory for one test's scripts and outputs, emptied first.
std::string job_dir(const std::string& name) {
  const std::string dir = testcluster_dir() + "/jobs/" + name;
  REQUIRE(run_process({"rm", "-rf", dir}).ok());
  REQUIRE(run_process({"mkdir", "-p", dir}).ok());
  return dir;
}

std::string write_script(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/job.sh";
  std::ofstream(path) << "#!/bin/bash\nset -euo pipefail\n" << body;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "Key=Value" from `scontrol show job ID`.
std::string job_field(const std::string& job_id, const std::string& key) {
  const auto r = run_process({"scontrol", "show", "job", job_id});
  REQUIRE(r.ok());
  const std::string needle = " " + key + "=";
  std::string text = " " + r.out;
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  const auto at = text.find(needle);
  if (at == std::string::npos) return "";
  const auto begin = at + needle.size();
  return text.substr(begin, text.find(' ', begin) - begin);
}

struct TaskLine {
  int rank = -1, node = -1, local = -1;
  std::string host, gpus;
};

// Parses "rank R node N local L host H gpus G" lines, keyed by rank.
std::map<int, TaskLine> parse_tasks(const std::string& output) {
  std::map<int, TaskLine> tasks;
  for (const auto& line : output_lines(output)) {
    std::istringstream in(line);
    std::string k1, k2, k3, k4, k5;
    TaskLine t;
    if (in >> k1 >> t.rank >> k2 >> t.node >> k3 >> t.local >> k4 >> t.host >> k5 >> t.gpus &&
        k1 == "rank") {
      tasks[t.rank] = t;
    }
  }
  return tasks;
}

}  // namespace

TEST_CASE("a 2-node job with 2 tasks per node sees its ranks, hosts and GPUs", "[slurm][job]") {
  const std::string dir = job_dir("two_nodes");
  const std::string script = write_script(dir, R"SH(
srun bash -c 'echo "rank $SLURM_PROCID node $SLURM_NODEID local $SLURM_LOCALID \
host $(hostname) gpus ${CUDA_VISIBLE_DEVICES:-none}"'
echo "nodelist $(scontrol show hostnames "$SLURM_JOB_NODELIST" | tr '\n' ' ')"
)SH");
  ProcessOptions opts;
  opts.timeout = std::chrono::seconds(120);
  const auto r = run_process(
      {"sbatch", "--parsable", "--wait", "--job-name=hpc-smoke", "--nodes=2", "--ntasks-per-node=2",
       "--gpus-per-node=2", "--time=2", "--output=" + dir + "/out.txt", script},
      opts);
  INFO(r.summary() << "\noutput:\n" << read_file(dir + "/out.txt"));
  REQUIRE(r.ok());
  const std::string job_id = output_lines(r.out).at(0);

  const auto tasks = parse_tasks(read_file(dir + "/out.txt"));
  REQUIRE(tasks.size() == 4);
  for (int rank = 0; rank < 4; ++rank) {
    const TaskLine& t = tasks.at(rank);
    CHECK(t.node == rank / 2);  // block distribution: ranks 0,1 on the first node
    CHECK(t.local == rank % 2);
    CHECK(t.host == (rank < 2 ? "node01" : "node02"));
    CHECK(t.gpus == "0,1");
  }
  CHECK(read_file(dir + "/out.txt").find("nodelist node01 node02 ") != std::string::npos);
  CHECK(job_field(job_id, "JobState") == "COMPLETED");
  CHECK(job_field(job_id, "NodeList") == "node[01-02]");
}

TEST_CASE("a failing job stays visible to scontrol as FAILED with its exit code", "[slurm][job]") {
  const std::string dir = job_dir("exit3");
  const std::string script = write_script(dir, "exit 3\n");
  const auto r =
      run_process({"sbatch", "--parsable", "--wait", "--output=" + dir + "/out.txt", script});
  INFO(r.summary());
  CHECK(r.exit_code == 3);  // sbatch --wait exits with the job's status
  const std::string job_id = output_lines(r.out).at(0);
  CHECK(job_field(job_id, "JobState") == "FAILED");
  CHECK(job_field(job_id, "ExitCode") == "3:0");
}

TEST_CASE("the 2n4g preset shape fits and an impossible one is refused at submission",
          "[slurm][test-only]") {
  // 2 nodes x 4 tasks x 8 CPUs and 4 GPUs per node: what presets/2n4g asks.
  const auto fits = run_process({"sbatch", "--test-only", "--nodes=2", "--ntasks-per-node=4",
                                 "--cpus-per-task=8", "--gpus-per-node=4", "--wrap=true"});
  INFO(fits.summary());
  CHECK(fits.exit_code == 0);
  CHECK(fits.err.find("to start at") != std::string::npos);

  const auto too_many_gpus =
      run_process({"sbatch", "--test-only", "--nodes=2", "--gpus-per-node=5", "--wrap=true"});
  INFO(too_many_gpus.summary());
  CHECK(too_many_gpus.exit_code != 0);
  const auto too_many_nodes = run_process({"sbatch", "--parsable", "--nodes=3", "--wrap=true"});
  INFO(too_many_nodes.summary());
  CHECK(too_many_nodes.exit_code != 0);  // EnforcePartLimits=ALL: fails now, does not pend
}

TEST_CASE("node names and their InfiniBand aliases resolve, also inside a job", "[slurm][hosts]") {
  for (const std::string name : {"node01", "node01i", "node02", "node02i"}) {
    const auto r = run_process({"getent", "hosts", name});
    INFO(r.summary());
    CHECK(r.ok());
    CHECK(r.out.rfind("127.0.0.1", 0) == 0);
  }
  const std::string dir = job_dir("ib_alias");
  const std::string script = write_script(dir, R"SH(
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
# Another cluster's /etc/hosts block may name the same nodes: take the first address.
echo "master ${first}i $(getent hosts "${first}i" | awk 'NR == 1 {print $1}')"
)SH");
  const auto r = run_process(
      {"sbatch", "--parsable", "--wait", "--nodes=2", "--output=" + dir + "/out.txt", script});
  INFO(r.summary() << "\noutput:\n" << read_file(dir + "/out.txt"));
  REQUIRE(r.ok());
  CHECK(read_file(dir + "/out.txt") == "master node01i 127.0.0.1\n");
}
