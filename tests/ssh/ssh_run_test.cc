// `hpclaunch run/submit/status` through the ssh backend, end to end: the real hpclaunch binary
// logs in to the test cluster's login node (sshd on 127.0.0.1, alias testlogin), copies the run
// there and runs sbatch. Refused logins give one line, exit 2, and submit nothing.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "process.h"
#include "ssh_test_support.h"
#include "testcluster.h"

namespace fs = std::filesystem;
using hpc::test::login_user;
using hpc::test::output_lines;
using hpc::test::ProcessOptions;
using hpc::test::ProcessResult;
using hpc::test::run_process;
using hpc::test::testcluster_dir;
using hpc::test::testcluster_ssh_config;

namespace {

struct Workdir {
  fs::path dir;
  Workdir() {
    char tmpl[] = "/tmp/hpclaunch-sshrun-XXXXXX";
    dir = mkdtemp(tmpl);
    fs::create_directories(dir / "config");
    std::ofstream probe(dir / "probe.sh");
    probe << "#!/bin/bash\n"
             "echo \"probe rank=$SLURM_PROCID node=$SLURM_NODEID host=$(hostname) "
             "addr=$MASTER_ADDR port=$MASTER_PORT\"\n";
    probe.close();
    fs::permissions(dir / "probe.sh", fs::perms::owner_all);
  }
  ~Workdir() { fs::remove_all(dir); }

  ProcessResult hpclaunch(std::vector<std::string> args) const {
    args.insert(args.begin(), HPCLAUNCH_BINARY);
    ProcessOptions o;
    o.cwd = dir.string();
    o.timeout = std::chrono::seconds(90);
    o.env = {"XDG_CONFIG_HOME=" + (dir / "config").string(),
             "HPCLAUNCH_PATH=", "SLURM_CONF=" + testcluster_dir() + "/etc/slurm.conf"};
    return run_process(args, o);
  }
  std::vector<std::string> run_args(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"run",
                                  "--no-project",
                                  "--preset",
                                  "2n2g",
                                  "--set",
                                  "trainer.program=" + (dir / "probe.sh").string(),
                                  "--set",
                                  "shape.cpus_per_gpu=1",
                                  "--ssh-config",
                                  testcluster_ssh_config(),
                                  "--remote-runs-dir",
                                  (dir / "remote-runs").string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

size_t queued_jobs() {
  ProcessOptions o;
  o.env = {"SLURM_CONF=" + testcluster_dir() + "/etc/slurm.conf"};
  auto r = run_process({"squeue", "--noheader", "--all"}, o);
  return output_lines(r.out).size();
}

size_t lines(const std::string& s) { return output_lines(s).size(); }

}  // namespace

TEST_CASE("ssh run: a 2-node job through the login node, then status from the record",
          "[ssh-run]") {
  Workdir w;
  ProcessResult r = w.hpclaunch(w.run_args({"--host", "testlogin"}));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::regex probe(
      R"(^(\d+): probe rank=(\d+) node=(\d) host=(node0\d) addr=127\.0\.0\.1 port=(\d+)$)");
  std::set<int> ranks;
  std::set<std::string> ports;
  for (const auto& line : output_lines(r.out)) {
    std::smatch m;
    if (!std::regex_match(line, m, probe)) continue;
    ranks.insert(std::stoi(m[2]));
    ports.insert(m[5]);
    CHECK(m[4].str() == (m[3].str() == "0" ? "node01" : "node02"));
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(ports.size() == 1);
  CHECK_THAT(r.err, Catch::Contains("via ssh on " + login_user() + "@127.0.0.1"));
  CHECK_THAT(r.err, Catch::Contains("COMPLETED with exit code 0"));

  // The run's record is local, its directory on the login node.
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(w.dir / "runs")) runs.push_back(e.path());
  REQUIRE(runs.size() == 1);
  CHECK(fs::exists(runs[0] / "run.json"));
  CHECK(fs::exists(runs[0] / "script.sbatch"));
  fs::path remote = w.dir / "remote-runs" / runs[0].filename();
  CHECK(fs::exists(remote / "script.sbatch"));
  CHECK(fs::exists(remote / "spec.json"));
  std::string job = runs[0].filename().string().substr(runs[0].filename().string().rfind('-') + 1);
  ProcessResult s = w.hpclaunch({"status", job});
  INFO(s.out << s.err);
  CHECK(s.exit_code == 0);
  CHECK_THAT(s.out, Catch::Contains("COMPLETED"));
  ProcessResult logs = w.hpclaunch({"logs", job, "--rank", "3"});
  CHECK(lines(logs.out) == 1);
  CHECK_THAT(logs.out, Catch::StartsWith("3: probe rank=3"));
}

TEST_CASE("ssh run: refused logins are one line, exit 2 (a closed port 69), nothing submitted",
          "[ssh-run]") {
  Workdir w;
  size_t before = queued_jobs();
  auto check_refused = [&](std::vector<std::string> extra, const std::string& words) {
    ProcessResult r = w.hpclaunch(w.run_args(extra));
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK(lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::StartsWith("hpclaunch: error: ") && Catch::Contains(words));
    CHECK(r.out.empty());
    CHECK_FALSE(fs::exists(w.dir / "runs"));
    CHECK_FALSE(fs::exists(w.dir / "remote-runs"));
    CHECK(queued_jobs() == before);
  };
  SECTION("unknown host key") {
    std::ofstream(w.dir / "empty_known_hosts").close();
    check_refused({"--host", "testlogin", "--known-hosts", (w.dir / "empty_known_hosts").string()},
                  "host key");
  }
  SECTION("wrong client key") {
    check_refused({"--host", "testlogin-wrongkey"}, login_user() + "@");
  }
  SECTION("closed port") {
    // A config alias to a port nobody listens on.
    fs::path cfg = w.dir / "closed.config";
    std::ofstream(cfg) << "Host closedlogin\n  HostName 127.0.0.1\n  Port 9\n  User root\n"
                          "  StrictHostKeyChecking yes\n";
    auto args = w.run_args({"--host", "closedlogin"});
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--ssh-config") args[i + 1] = cfg.string();
    ProcessResult r = w.hpclaunch(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 69);  // unreachable, not refused: the cluster's own status
    CHECK(lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains("127.0.0.1") || Catch::Contains("closedlogin"));
    CHECK_FALSE(fs::exists(w.dir / "runs"));
    CHECK(queued_jobs() == before);
  }
}
