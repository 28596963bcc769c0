// The test cluster's login node: sshd on 127.0.0.1 that the SSH backend submits through.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "process.h"
#include "testcluster.h"

using hpc::test::output_lines;
using hpc::test::ProcessResult;
using hpc::test::run_process;
using hpc::test::testcluster_dir;
using hpc::test::testcluster_ssh_config;

namespace {

// ssh runs `words` through the remote login shell, joined with spaces: keep them shell-safe.
ProcessResult ssh(const std::string& host, const std::vector<std::string>& words,
                  const std::vector<std::string>& ssh_options = {}) {
  std::vector<std::string> argv = {"ssh", "-F", testcluster_ssh_config()};
  argv.insert(argv.end(), ssh_options.begin(), ssh_options.end());
  argv.push_back(host);
  argv.insert(argv.end(), words.begin(), words.end());
  return run_process(argv);
}

}  // namespace

TEST_CASE("sbatch --test-only over ssh to the login node", "[ssh]") {
  const auto r = ssh("testlogin", {"sbatch", "--test-only", "--nodes=2", "--ntasks-per-node=2",
                                   "--gpus-per-node=2", "--wrap=true"});
  INFO(r.summary());
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("to start at") != std::string::npos);  // --test-only answers on stderr
}

TEST_CASE("the login node's sessions see the cluster's SLURM_CONF", "[ssh]") {
  const auto r = ssh("testlogin", {"printenv", "SLURM_CONF"});
  INFO(r.summary());
  REQUIRE(r.ok());
  CHECK(output_lines(r.out) == std::vector<std::string>{testcluster_dir() + "/etc/slurm.conf"});
}

TEST_CASE("a key that is not authorized is refused", "[ssh]") {
  const auto r = ssh("testlogin-wrongkey", {"sbatch", "--test-only", "--wrap=true"});
  INFO(r.summary());
  CHECK(r.exit_code == 255);
  CHECK(r.err.find("Permission denied") != std::string::npos);
}

TEST_CASE("a login node whose host key does not match known_hosts is refused", "[ssh]") {
  // known_hosts naming another key for [127.0.0.1]:PORT: ssh must stop before logging in.
  const std::string dir = testcluster_dir() + "/jobs";
  REQUIRE(run_process({"mkdir", "-p", dir}).ok());
  const auto known = run_process({"cat", testcluster_dir() + "/ssh/known_hosts"});
  const auto client_key =
      run_process({"cut", "-d ", "-f1,2", testcluster_dir() + "/ssh/id_ed25519.pub"});
  REQUIRE(known.ok());
  REQUIRE(client_key.ok());
  const std::string host = known.out.substr(0, known.out.find(' '));  // "[127.0.0.1]:2222"
  const std::string wrong = dir + "/wrong_known_hosts";
  std::ofstream(wrong) << host << " " << client_key.out;

  const auto r = ssh("testlogin", {"true"}, {"-o", "UserKnownHostsFile=" + wrong});
  INFO(r.summary());
  CHECK(r.exit_code == 255);
  CHECK(r.err.find("Host key verification failed") != std::string::npos);
}
