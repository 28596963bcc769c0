// Preflight over a fake login node: what scontrol, sinfo, sacctmgr and sbatch --test-only say,
// and the one line per mismatch it makes of them (backends/preflight.h).
#include "backends/preflight.h"
#include "render/builtin_testing.h"

#include <catch2/catch.hpp>
#include <set>

#include "backends/backend.h"
#include "error.h"
#include "support/fake_host.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using hpc::test::failed;
using hpc::test::FakeHost;
using hpc::test::succeeded;

namespace {

hpc::Spec resolve(std::vector<std::string> sets) {
  hpc::SpecRequest r = hpc::testing::builtin_request("2n4g", "generic", std::move(sets));
  r.strategy = "ddp";
  return hpc::testing::resolve_builtin(r);
}

const char* kPartitions =
    "PartitionName=debug AllowGroups=ALL Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED "
    "Nodes=node[01-02] State=UP TotalCPUs=64 TotalNodes=2\n"
    "PartitionName=short AllowGroups=ALL MaxNodes=1 MaxTime=00:30:00 Nodes=node[01-02] "
    "State=UP TotalNodes=2\n";
const char* kNodes = "node01|gpu:tesla:4|32|64000|idle\nnode02|gpu:tesla:4(S:0)|32|64000|down*\n";

std::set<std::string> kinds(const hpc::PreflightReport& r) {
  std::set<std::string> k;
  for (const auto& f : r.findings) k.insert(f.kind);
  return k;
}

}  // namespace

TEST_CASE("preflight: scontrol's fields, values with spaces kept", "[preflight]") {
  auto f = hpc::parse_slurm_fields("PartitionName=a b MaxTime=1-00:00:00 TRES=cpu=8,mem=1G");
  CHECK(f["PartitionName"] == "a b");
  CHECK(f["MaxTime"] == "1-00:00:00");
  CHECK(f["TRES"] == "cpu=8,mem=1G");
}

TEST_CASE("preflight: each mismatch one line, each kind once", "[preflight]") {
  FakeHost host;
  host.reply_always("scontrol", succeeded(kPartitions));
  host.reply_always("sinfo", succeeded(kNodes));
  host.reply_always("id", succeeded("alice\n"));
  host.reply("sacctmgr", succeeded("proj|debug|normal,quick\n"));
  host.reply("sacctmgr", succeeded("normal|\nquick|00:10:00\n"));
  host.reply_always("sbatch", failed("sbatch: error: Invalid qos specification"));
  auto spec = resolve({"profile.partition=short", "shape.time=01:00:00", "profile.gpu_type=a100",
                       "profile.account=other", "profile.qos=quick"});
  auto report = hpc::preflight_live(host, spec, "#!/bin/bash\n");
  for (const auto& f : report.findings) INFO(f.line());
  CHECK(kinds(report) ==
        std::set<std::string>{"time", "nodes", "gres", "account", "qos-time", "test-only"});
  for (const auto& f : report.findings) CHECK(f.line().find('\n') == std::string::npos);
  CHECK(host.programs_run() == "scontrol sinfo id sacctmgr sacctmgr sbatch");
  CHECK(host.calls_of("sbatch").at(0).options.stdin_data == std::string("#!/bin/bash\n"));
}

TEST_CASE("preflight: a job that fits passes, and no accounting is skipped, not a mismatch",
          "[preflight]") {
  FakeHost host;
  host.reply_always("scontrol", succeeded(kPartitions));
  host.reply_always("sinfo", succeeded("node01|gpu:tesla:4|32|64000|idle\n"
                                       "node02|gpu:tesla:4|32|64000|mixed\n"));
  host.reply_always("id", succeeded("alice\n"));
  host.reply_always("sacctmgr", failed("sacctmgr: error: Problem talking to the database"));
  host.reply_always("sbatch", succeeded(""));
  auto report = hpc::preflight_live(host, resolve({"shape.time=00:20:00"}), "x");
  CHECK(report.findings.empty());
  REQUIRE(report.skipped.size() == 1);
  CHECK_THAT(report.skipped[0], Contains("Problem talking to the database"));
}

TEST_CASE("preflight: nodes up, unknown partition, quick check", "[preflight]") {
  FakeHost host;
  host.reply_always("scontrol", succeeded(kPartitions));
  host.reply_always("sinfo", succeeded(kNodes));  // node02 is down
  host.reply_always("id", succeeded("alice\n"));
  host.reply_always("sacctmgr", failed("no accounting"));
  host.reply_always("sbatch", succeeded(""));
  CHECK(kinds(hpc::preflight_live(host, resolve({}), "x")) == std::set<std::string>{"nodes-up"});

  auto missing = hpc::preflight_quick(host, resolve({"profile.partition=gpu"}));
  REQUIRE(missing.findings.size() == 1);
  CHECK(missing.findings[0].line() ==
        "partition gpu does not exist on this cluster; set profile.partition to one of: debug, "
        "short");
}

TEST_CASE("preflight: an unreachable controller throws, for exit 69", "[preflight]") {
  FakeHost host;
  host.reply_always("scontrol",
                    failed("slurm_load_partitions: Unable to contact slurm controller"));
  CHECK_THROWS_AS(hpc::preflight_quick(host, resolve({})), hpc::BackendUnreachable);
}
