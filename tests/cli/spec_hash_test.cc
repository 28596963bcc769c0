// Round trip: the spec hash in a script's header is the SHA-256 of the file that
// `render --spec-out` writes, for every built-in cluster; the same inputs give the same bytes.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"
#include "sha256.h"
#include "support/prerequisite.h"

using namespace cli_test;
using nlohmann::json;

namespace {

std::string header_hash(const std::string& script) {
  const std::string tag = "# Spec: sha256 ";
  for (const auto& line : split_lines(script)) {
    if (line.rfind(tag, 0) == 0) return line.substr(tag.size(), 64);
  }
  return "";
}

}  // namespace

TEST_CASE("spec hash: header hash is sha256 of --spec-out", "[spec-hash]") {
  struct Combo {
    std::string preset, cluster, strategy;
  };
  for (const Combo& c : std::vector<Combo>{{"1n1g", "generic", "ddp"},
                                           {"2n4g", "jsc", "fsdp"},
                                           {"1n4g", "baskerville", "zero1"},
                                           {"2n2g", "daic", "zero2"}}) {
    DYNAMIC_SECTION(c.preset << " on " << c.cluster << " with " << c.strategy) {
      Sandbox sb;
      Run r = sb.hpclaunch({"render", "--preset", c.preset, "--cluster", c.cluster, "--strategy",
                            c.strategy, "--set", "profile.account=proj", "--set",
                            "profile.qos=normal", "--set", "shape.mem_per_gpu=16G", "-o",
                            "job.sbatch", "--spec-out", "spec.json"});
      INFO(r.describe());
      REQUIRE(r.status == 0);
      std::string script = read_file(sb.work() / "job.sbatch");
      std::string spec = read_file(sb.work() / "spec.json");
      std::string hash = header_hash(script);
      REQUIRE(hash.size() == 64);
      CHECK(hpc::sha256_hex(spec) == hash);

      std::string sha256sum = find_program("sha256sum");
      if (!sha256sum.empty()) {
        Run s = spawn({sha256sum, "spec.json"}, sb.work(), sb.env());
        CHECK(s.out.substr(0, 64) == hash);
      } else {
        hpc::test::missing_prerequisite("sha256sum is not installed");
      }
      // The file is the resolved spec: it parses and names what was asked for.
      json doc = json::parse(spec);
      CHECK(doc["preset"] == c.preset);
      CHECK(doc["cluster"] == c.cluster);
      CHECK(doc["strategy"] == c.strategy);
      CHECK(spec.back() == '\n');

      // validate --json reports the same hash and the same document.
      Run v = sb.hpclaunch({"validate", "--json", "--preset", c.preset, "--cluster", c.cluster,
                            "--strategy", c.strategy, "--set", "profile.account=proj", "--set",
                            "profile.qos=normal", "--set", "shape.mem_per_gpu=16G"});
      INFO(v.describe());
      REQUIRE(v.status == 0);
      json report = json::parse(v.out);
      CHECK(report["hash"] == hash);
      CHECK(report["spec"] == doc);
    }
  }
}

TEST_CASE("spec hash: stdout and -o give the same script, rendering is deterministic",
          "[spec-hash]") {
  Sandbox sb;
  std::vector<std::string> args = {"render", "--preset", "2n2g", "--strategy", "fsdp"};
  Run to_stdout = sb.hpclaunch(args);
  INFO(to_stdout.describe());
  REQUIRE(to_stdout.status == 0);
  CHECK(to_stdout.err.empty());

  auto with_file = args;
  with_file.insert(with_file.end(), {"-o", "job.sbatch"});
  Run to_file = sb.hpclaunch(with_file);
  INFO(to_file.describe());
  REQUIRE(to_file.status == 0);
  CHECK(to_file.out.empty());
  // Only the header's command line differs (it records -o job.sbatch).
  std::string from_file = read_file(sb.work() / "job.sbatch");
  auto strip_command = [](const std::string& s) {
    std::string out;
    for (const auto& line : split_lines(s))
      if (line.rfind("# Command: ", 0) != 0) out += line + "\n";
    return out;
  };
  CHECK(strip_command(from_file) == strip_command(to_stdout.out));
  auto perms = fs::status(sb.work() / "job.sbatch").permissions();
  CHECK((perms & fs::perms::owner_exec) != fs::perms::none);

  Run again = sb.hpclaunch(args);
  CHECK(again.out == to_stdout.out);

  // A changed value changes the hash.
  auto changed = args;
  changed.insert(changed.end(), {"--set", "job.name=other"});
  Run other = sb.hpclaunch(changed);
  REQUIRE(other.status == 0);
  CHECK(header_hash(other.out) != header_hash(to_stdout.out));
  CHECK(header_hash(other.out).size() == 64);
}
