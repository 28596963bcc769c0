// Layering, one test per layer: built-in < $XDG_CONFIG_HOME/hpclaunch < HPCLAUNCH_PATH (first
// entry wins) < ./hpclaunch.json < --set; `-- ARGS` append to trainer.args; null removes a key.
// Each test reads the resolved spec (--spec-out) and the script itself.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"

using namespace cli_test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

struct Resolved {
  json spec;
  std::string script;
};

Resolved render(const Sandbox& sb, std::vector<std::string> args) {
  std::vector<std::string> argv = {"render", "-o", "job.sbatch", "--spec-out", "spec.json"};
  argv.insert(argv.end(), args.begin(), args.end());
  Run r = sb.hpclaunch(argv);
  INFO(r.describe());
  REQUIRE(r.status == 0);
  // The job part: what the layers decide (the job library below it is the same for all).
  std::string script = read_file(sb.work() / "job.sbatch");
  script = script.substr(0, script.find("\n# --- hpclaunch job library"));
  return {json::parse(read_file(sb.work() / "spec.json")), script};
}

bool has_line(const std::string& script, const std::string& line) {
  for (const auto& l : split_lines(script))
    if (l == line) return true;
  return false;
}

}  // namespace

TEST_CASE("layering: built-in defaults alone", "[layering]") {
  Sandbox sb;
  auto r = render(sb, {"--preset", "1n2g"});
  CHECK(r.spec["cluster"] == "generic");
  CHECK(r.spec["strategy"] == "ddp");
  CHECK(r.spec["job"]["name"] == "hpctrain");  // no job.name set: the program's name
  CHECK(r.spec["shape"]["nodes"] == 1);
  CHECK(r.spec["shape"]["gpus_per_node"] == 2);
  CHECK(r.spec["profile"]["port_range"]["min"] == 20000);
  CHECK(has_line(r.script, "#SBATCH --job-name=hpctrain"));
}

TEST_CASE("layering: $XDG_CONFIG_HOME/hpclaunch/defaults.json over the built-in defaults",
          "[layering]") {
  Sandbox sb;
  sb.write("xdg/hpclaunch/defaults.json",
           "// comments are allowed\n{\"job\": {\"name\": \"from-xdg\", \"srun_wait\": 30}}");
  auto r = render(sb, {"--preset", "1n2g"});
  CHECK(r.spec["job"]["name"] == "from-xdg");
  CHECK(r.spec["job"]["srun_wait"] == 30);
  CHECK(r.spec["job"]["output"] == "%x-%j.out");  // the rest of the built-in job stays
  CHECK(has_line(r.script, "#SBATCH --job-name=from-xdg"));
  CHECK_THAT(r.script, Contains("--wait=30 "));
}

TEST_CASE("layering: a user clusters/NAME.json shadows the built-in profile", "[layering]") {
  Sandbox sb;
  sb.write("xdg/hpclaunch/clusters/jsc.json",
           "{\"description\": \"my own jsc\", \"partition\": \"mine\", \"max_gpus_per_node\": 8}");
  // The built-in jsc (account required, 4 GPUs per node, modules, IB suffix) is not used at all.
  auto r = render(sb, {"--preset", "2n8g", "--cluster", "jsc"});
  CHECK(r.spec["profile"]["partition"] == "mine");
  CHECK(r.spec["profile"]["max_gpus_per_node"] == 8);
  CHECK_FALSE(r.spec["profile"].contains("ib_suffix"));
  CHECK_FALSE(r.spec["profile"].contains("required"));
  CHECK(r.spec["profile"]["modules"].empty());
  CHECK(has_line(r.script, "#SBATCH --partition=mine"));
  CHECK(has_line(r.script, "#SBATCH --gpus-per-node=8"));
  CHECK_THAT(r.script, !Contains("module load"));
  CHECK_THAT(r.script, Contains("\n  hpc_rendezvous '' "));
}

TEST_CASE("layering: a user clusters/NAME.json extending its own name builds on the built-in",
          "[layering]") {
  Sandbox sb;
  sb.write("xdg/hpclaunch/clusters/jsc.json",
           "{\"extends\": \"jsc\", \"partition\": \"develbooster\", \"account\": \"myproj\",\n"
           " \"module_purge\": null}");
  auto r = render(sb, {"--preset", "2n4g", "--cluster", "jsc"});
  CHECK(r.spec["profile"]["partition"] == "develbooster");
  CHECK(r.spec["profile"]["account"] == "myproj");
  CHECK(r.spec["profile"]["ib_suffix"] == "i");  // from the built-in
  CHECK(r.spec["profile"]["modules"] ==
        json::array({"Stages/2025", "GCC", "OpenMPI", "Python", "PyTorch"}));
  CHECK_FALSE(r.spec["profile"].contains("module_purge"));  // removed by null
  CHECK(has_line(r.script, "#SBATCH --partition=develbooster"));
  CHECK(has_line(r.script, "#SBATCH --account=myproj"));
  CHECK(has_line(r.script, "  hpc_module load Stages/2025"));
  CHECK_THAT(r.script, Contains("\n  hpc_rendezvous i "));
  CHECK_THAT(r.script, !Contains("module --force purge"));

  Run show = sb.hpclaunch({"clusters", "show", "jsc", "--json"});
  INFO(show.describe());
  REQUIRE(show.status == 0);
  json files = json::parse(show.out)["files"];
  REQUIRE(files.size() == 2);
  CHECK_THAT(files[0].get<std::string>(), Contains("presets/clusters/jsc.json"));
  CHECK(files[1] == (sb.user_dir() / "clusters" / "jsc.json").string());
}

TEST_CASE("layering: HPCLAUNCH_PATH over $XDG_CONFIG_HOME, its first entry first", "[layering]") {
  Sandbox sb;
  sb.write("xdg/hpclaunch/defaults.json", "{\"job\": {\"name\": \"xdg\"}}");
  sb.write("hp2/defaults.json", "{\"job\": {\"name\": \"hp2\", \"srun_wait\": 22}}");
  sb.write("xdg/hpclaunch/clusters/c.json", "{\"partition\": \"xdg\"}");
  sb.write("hp2/clusters/c.json", "{\"partition\": \"hp2\"}");
  sb.write("xdg/hpclaunch/shapes/s.json",
           "{\"nodes\": 5, \"gpus_per_node\": 1, \"cpus_per_gpu\": 1, \"time\": \"10\"}");
  sb.write("hp2/shapes/s.json",
           "{\"nodes\": 3, \"gpus_per_node\": 1, \"cpus_per_gpu\": 1, \"time\": \"10\"}");

  SECTION("the second entry beats the user dir") {
    auto r = render(sb, {"--preset", "s", "--cluster", "c"});
    CHECK(r.spec["job"]["name"] == "hp2");
    CHECK(r.spec["profile"]["partition"] == "hp2");
    CHECK(r.spec["shape"]["nodes"] == 3);
    CHECK(has_line(r.script, "#SBATCH --nodes=3"));
  }
  SECTION("the first entry beats the second") {
    sb.write("hp1/defaults.json", "{\"job\": {\"name\": \"hp1\"}}");
    sb.write("hp1/clusters/c.json", "{\"partition\": \"hp1\"}");
    sb.write("hp1/shapes/s.json",
             "{\"nodes\": 2, \"gpus_per_node\": 1, \"cpus_per_gpu\": 1, \"time\": \"10\"}");
    auto r = render(sb, {"--preset", "s", "--cluster", "c"});
    CHECK(r.spec["job"]["name"] == "hp1");
    CHECK(r.spec["job"]["srun_wait"] == 22);  // defaults.json files merge, hp2's value stays
    CHECK(r.spec["profile"]["partition"] == "hp1");
    CHECK(r.spec["shape"]["nodes"] == 2);
    CHECK(has_line(r.script, "#SBATCH --job-name=hp1"));
    CHECK(has_line(r.script, "#SBATCH --partition=hp1"));
    CHECK(has_line(r.script, "#SBATCH --nodes=2"));
  }
}

TEST_CASE("layering: ./hpclaunch.json over HPCLAUNCH_PATH and the profile", "[layering]") {
  Sandbox sb;
  sb.write("hp1/defaults.json", "{\"job\": {\"name\": \"hp1\"}}");
  sb.write("hp1/clusters/c.json", "{\"partition\": \"from-profile\"}");
  sb.write("work/hpclaunch.json",
           "// the project's choices\n"
           "{\"preset\": \"2n2g\", \"cluster\": \"c\", \"strategy\": \"fsdp\",\n"
           " \"job\": {\"name\": \"project\"}, \"profile\": {\"partition\": \"from-project\"},\n"
           " \"shape\": {\"time\": \"00:30:00\"}}");
  auto r = render(sb, {});
  CHECK(r.spec["preset"] == "2n2g");
  CHECK(r.spec["strategy"] == "fsdp");
  CHECK(r.spec["job"]["name"] == "project");
  CHECK(r.spec["profile"]["partition"] == "from-project");
  CHECK(r.spec["shape"]["time"] == "00:30:00");
  CHECK(r.spec["shape"]["nodes"] == 2);  // the rest of the preset stays
  CHECK(has_line(r.script, "#SBATCH --job-name=project"));
  CHECK(has_line(r.script, "#SBATCH --time=00:30:00"));

  SECTION("--no-project ignores it") {
    auto r2 = render(sb, {"--no-project", "--preset", "1n1g"});
    CHECK(r2.spec["job"]["name"] == "hp1");
    CHECK(r2.spec["cluster"] == "generic");
  }
  SECTION("--project names another file") {
    sb.write("work/other.json", "{\"job\": {\"name\": \"other\"}}");
    auto r2 = render(sb, {"--project", "other.json", "--preset", "1n1g"});
    CHECK(r2.spec["job"]["name"] == "other");
  }
}

TEST_CASE("layering: flags and --set over ./hpclaunch.json, later --set wins", "[layering]") {
  Sandbox sb;
  sb.write("work/hpclaunch.json",
           "{\"preset\": \"2n2g\", \"strategy\": \"fsdp\", \"job\": {\"name\": \"project\"}}");
  auto r = render(sb, {"--preset", "1n4g", "--strategy", "zero1", "--set", "job.name=first",
                       "--set", "job.name=cli", "--set", "shape.time=00:10:00"});
  CHECK(r.spec["preset"] == "1n4g");
  CHECK(r.spec["strategy"] == "zero1");
  CHECK(r.spec["job"]["name"] == "cli");
  CHECK(r.spec["shape"]["time"] == "00:10:00");
  CHECK(has_line(r.script, "#SBATCH --job-name=cli"));
  CHECK(has_line(r.script, "#SBATCH --ntasks-per-node=4"));
  CHECK_THAT(r.script, Contains(" --strategy zero1"));

  SECTION("--set preset beats --preset") {
    auto r2 = render(sb, {"--preset", "1n4g", "--set", "preset=1n1g"});
    CHECK(r2.spec["preset"] == "1n1g");
    CHECK(r2.spec["shape"]["gpus_per_node"] == 1);
  }
}

TEST_CASE("layering: -- ARGS append to trainer.args from hpclaunch.json", "[layering]") {
  Sandbox sb;
  sb.write("work/hpclaunch.json", "{\"trainer\": {\"args\": [\"--model\", \"tiny\"]}}");
  auto r = render(sb, {"--preset", "1n2g", "--", "--max-steps", "5", "--", "x y"});
  CHECK(r.spec["trainer"]["args"] ==
        json::array({"--model", "tiny", "--max-steps", "5", "--", "x y"}));
  std::string block =
      "  hpc_train=(hpctrain train --strategy ddp --model tiny --max-steps 5 -- 'x y')\n";
  CHECK_THAT(r.script, Contains(block));
}

TEST_CASE("layering: null in a layer removes a key", "[layering]") {
  Sandbox sb;
  SECTION("an NCCL variable of the built-in daic profile, from hpclaunch.json") {
    sb.write("work/hpclaunch.json",
             "{\"profile\": {\"account\": \"p\", \"nccl\": {\"NCCL_P2P_DISABLE\": null}},"
             " \"shape\": {\"mem_per_gpu\": \"16G\"}}");
    auto r = render(sb, {"--preset", "2n4g", "--cluster", "daic"});
    CHECK_FALSE(r.spec["profile"]["nccl"].contains("NCCL_P2P_DISABLE"));
    CHECK_THAT(r.script, !Contains("export NCCL_P2P_DISABLE=1"));
    CHECK(has_line(r.script, "#SBATCH --gres=gpu:4"));  // the rest of the profile stays
  }
  SECTION("from --set") {
    auto r =
        render(sb, {"--preset", "2n4g", "--cluster", "jsc", "--set", "profile.account=p", "--set",
                    "profile.ib_suffix=null", "--set", "profile.modules=null"});
    CHECK_FALSE(r.spec["profile"].contains("ib_suffix"));
    CHECK_FALSE(r.spec["profile"].contains("modules"));
    CHECK_THAT(r.script, !Contains("hpc_rendezvous i "));
    CHECK_THAT(r.script, !Contains("module load"));
    CHECK_THAT(r.script, Contains("\n  hpc_module --force purge"));  // jsc's purge stays
  }
  SECTION("the requeue signal, from the user's defaults.json") {
    sb.write("xdg/hpclaunch/defaults.json", "{\"job\": {\"error\": \"e.err\"}}");
    sb.write("work/hpclaunch.json", "{\"job\": {\"error\": null, \"signal_seconds\": 0}}");
    auto r = render(sb, {"--preset", "1n1g"});
    CHECK_FALSE(r.spec["job"].contains("error"));
    CHECK_THAT(r.script, !Contains("--error="));
    CHECK_THAT(r.script, !Contains("--signal="));
    CHECK_THAT(r.script, !Contains("hpc_requeue_on"));
  }
}
