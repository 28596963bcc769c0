// The sites' limits as the built-in profiles record them: what each refuses, with the key path
// and the fix, and the defaults it fills in (spec/site_limits.h).
#include "spec/site_limits.h"
#include "spec/builtin_testing.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "error.h"
#include "spec/spec.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using hpc::UserError;

namespace {

hpc::Spec resolve(const std::string& preset, const std::string& cluster,
                  std::vector<std::string> sets = {}) {
  hpc::SpecRequest r = hpc::testing::builtin_request(preset, cluster, std::move(sets));
  r.strategy = "ddp";
  return hpc::testing::resolve_builtin(r);
}

std::string refusal(const std::string& preset, const std::string& cluster,
                    std::vector<std::string> sets = {}) {
  try {
    resolve(preset, cluster, std::move(sets));
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

const std::vector<std::string> kDaic = {"profile.account=grp", "shape.mem_per_gpu=16G"};
const std::vector<std::string> kBask = {"profile.account=p", "profile.qos=q",
                                        "shape.mem_per_gpu=64G"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

// A site whose QoS follow the time limit, as a user's profile can say it (DAIC's guide names no
// QoS, so the built-in daic profile has no table).
const std::vector<std::string> kQosByTime = {
    "profile.account=grp", "profile.qos_from_time=true",
    R"(profile.qos_limits={"short": {"max_time": "04:00:00"}})"};

TEST_CASE("site limits: a QoS picked from the time limit, or a refusal with the fix",
          "[spec][site]") {
  CHECK(resolve("2n4g", "daic", kDaic).profile.qos.empty());  // the account's default QoS
  const auto kDaic = kQosByTime;
  auto spec = resolve("2n4g", "daic", kDaic);  // 04:00:00: fits short
  CHECK(spec.profile.qos == "short");
  CHECK(spec.resolved["profile"]["qos"] == "short");
  CHECK(spec.sources["profile.qos"] == "chosen from shape.time (profile.qos_limits)");

  // 4n4g asks 08:00:00; short holds 4 hours (it used to render 08:00:00 with short).
  std::string why = refusal("4n4g", "daic", kDaic);
  CHECK_THAT(why, Contains("shape.time: 08:00:00 is longer than every QoS"));
  CHECK_THAT(why, Contains("short, 04:00:00"));
  CHECK_THAT(why, Contains("--set profile.qos=NAME"));

  // A QoS the user names wins; one the profile knows is checked against its limit.
  CHECK(resolve("4n4g", "daic", with(kDaic, {"profile.qos=long"})).profile.qos == "long");
  why = refusal("4n4g", "daic", with(kDaic, {"profile.qos=short"}));
  CHECK_THAT(why, Contains("08:00:00 is over QoS short's limit 04:00:00"));
  CHECK_THAT(why, Contains("lower it (--set shape.time=04:00:00)"));
}

TEST_CASE("site limits: required keys name their hint", "[spec][site]") {
  std::string why = refusal("1n1g", "baskerville", {"profile.account=p"});
  CHECK_THAT(why, Contains("profile.qos: cluster \"baskerville\" requires a value here"));
  CHECK_THAT(why, Contains("my_baskerville"));
  // The site gives each GPU its memory with its CPUs: no memory is asked for.
  CHECK(resolve("1n1g", "baskerville", {"profile.account=p", "profile.qos=q"}).shape.mem_per_gpu ==
        "");
  CHECK(refusal("1n1g", "daic").find("profile.account") == 0);
}

TEST_CASE("site limits: a site's CPUs per GPU replace the preset's, not the user's",
          "[spec][site]") {
  CHECK(resolve("2n4g", "jsc", {"profile.account=p"}).shape.cpus_per_gpu == 24);
  CHECK(resolve("2n4g", "baskerville", kBask).shape.cpus_per_gpu == 36);
  CHECK(resolve("2n4g", "generic").shape.cpus_per_gpu == 8);  // the preset's
  auto mine = resolve("2n4g", "jsc", {"profile.account=p", "shape.cpus_per_gpu=6"});
  CHECK(mine.shape.cpus_per_gpu == 6);
  CHECK(mine.sources["shape.cpus_per_gpu"] == "--set shape.cpus_per_gpu=6");
}

TEST_CASE("site limits: JSC's Booster refuses what its nodes and partition cannot hold",
          "[spec][site]") {
  // JSC's own layout fits: 4 tasks x 24 CPUs (hardware threads) = a node's 96.
  CHECK(resolve("1n4g", "jsc", {"profile.account=p", "shape.cpus_per_gpu=24"}).shape.cpus_per_gpu ==
        24);
  std::string why = refusal("2n4g", "jsc", {"profile.account=p", "shape.cpus_per_gpu=32"});
  CHECK_THAT(why, Contains("--set shape.cpus_per_gpu=32: shape.cpus_per_gpu"));
  CHECK_THAT(why, Contains("= 128 CPUs per node, but a node of partition booster has 96"));
  CHECK_THAT(why, Contains("--set shape.cpus_per_gpu=24"));

  // The time and memory limits are not in the shipped profile (not checked against JSC's pages):
  // a user's own, here through --set.
  const std::string time_limit = "profile.partitions.booster.max_time=24:00:00";
  const std::string memory = "profile.partitions.booster.mem_per_node=512G";
  why = refusal("2n4g", "jsc", {"profile.account=p", time_limit, "shape.time=1-01:00:00"});
  CHECK_THAT(why, Contains("1-01:00:00 is over partition booster's limit 24:00:00"));
  CHECK_THAT(why, Contains("profile.partitions.booster.max_time"));

  why = refusal("2n4g", "jsc", {"profile.account=p", memory, "shape.mem_per_gpu=200G"});
  CHECK_THAT(why, Contains("200G per GPU x 4 GPUs is more than a node of partition booster"));
  // The limits belong to booster: on another partition they do not apply.
  CHECK(resolve("2n4g", "jsc",
                {"profile.account=p", time_limit, "profile.partition=dc-gpu",
                 "shape.time=1-01:00:00"})
            .shape.time == "1-01:00:00");
}

TEST_CASE("site limits: the profile's own values are checked", "[spec][site]") {
  CHECK_THAT(refusal("1n1g", "generic", {"profile.qos_limits={\"q\": {\"max_time\": \"abc\"}}"}),
             Contains("profile.qos_limits.q.max_time: \"abc\" is not a Slurm time limit"));
  CHECK_THAT(refusal("1n1g", "generic", {"profile.qos_from_time=true"}),
             Contains("profile.qos_limits is empty"));
  CHECK_THAT(refusal("1n1g", "generic", {"profile.partitions={\"a b\": {\"max_nodes\": 1}}"}),
             Contains("\"a b\" is not a Slurm name"));
  CHECK_THAT(
      refusal("1n1g", "generic", {"profile.partitions={\"p\": {\"mem_per_node\": \"lots\"}}"}),
      Contains("\"lots\" is not a Slurm size"));
}

TEST_CASE("site limits: Slurm sizes in MiB", "[spec][site]") {
  CHECK(hpc::slurm_size_mb("512G") == 512 * 1024);
  CHECK(hpc::slurm_size_mb("64000") == 64000);
  CHECK(hpc::slurm_size_mb("1T") == 1024 * 1024);
  CHECK(hpc::slurm_size_mb("2048K") == 2);
  CHECK_FALSE(hpc::slurm_size_mb("12X"));
  CHECK_FALSE(hpc::slurm_size_mb("-1G"));
}
