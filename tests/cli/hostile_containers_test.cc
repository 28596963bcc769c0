// Hostile values in the container key (spec/container.h): the image, a mount's paths, the
// runtime's options and the working directory end up as literal words of the runtime's argv
// (Apptainer, Charliecloud) or of srun's options (Pyxis), in the place each runtime wants them
// in each launch mode (hpctrain, srun, torchrun).
// Each render runs with stub srun (slurm_stubs.h): no canary appears and srun receives every
// word byte for byte; bash -n and shellcheck pass. A value with a control character is refused
// with exit status 2 (one a runtime would split, ':' or ',' in a mount path, is a case of
// bad_input_container_test.cc; here such values skip the mount).
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"
#include "hostile_cases.h"
#include "slurm_stubs.h"
#include "support/prerequisite.h"

using namespace cli_test;
using Catch::Matchers::StartsWith;

namespace {

// What the table below puts into a container, and what srun must receive for it.
struct ContainerCase {
  std::string runtime;
  std::string value;
  std::vector<std::string> sets;      // --set arguments
  std::vector<std::string> expected;  // the words before the program (or srun's options)
};

bool splits_a_mount(const std::string& v) { return v.find_first_of(":,") != std::string::npos; }

bool has_control_chars(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

ContainerCase make_case(const std::string& runtime, const std::string& v) {
  ContainerCase c{runtime, v, {}, {}};
  const std::string image = "img" + v, src = "/src" + v, dst = "/dst" + v, workdir = "/w" + v;
  const bool mount = !splits_a_mount(v);
  auto set = [&](const std::string& key, const std::string& value) {
    c.sets.push_back("--set");
    c.sets.push_back("container." + key + "=" + value);
  };
  set("runtime", runtime);
  set("image", image);
  set("workdir", workdir);
  set("options", "[\"--opt\"," + nlohmann::json(v).dump() + "]");
  if (mount) set("mounts", "[" + nlohmann::json(src + ":" + dst).dump() + "]");
  if (runtime == "apptainer") {
    set("gpus", "true");
    c.expected = {"apptainer", "exec", "--nv"};
    if (mount) c.expected.insert(c.expected.end(), {"--bind", src + ":" + dst});
    c.expected.insert(c.expected.end(), {"--pwd", workdir, "--opt", v, image});
  } else if (runtime == "charliecloud") {
    c.expected = {"ch-run"};
    if (mount) c.expected.insert(c.expected.end(), {"-b", src + ":" + dst});
    c.expected.insert(c.expected.end(), {"--cd", workdir, "--opt", v, image, "--"});
  } else {  // pyxis: srun's options, before the program
    c.expected = {"--container-image=" + image};
    if (mount) c.expected.push_back("--container-mounts=" + src + ":" + dst);
    c.expected.insert(c.expected.end(), {"--container-workdir=" + workdir, "--opt", v});
  }
  return c;
}

std::vector<std::string> render_command(const ContainerCase& c, const std::string& file,
                                        const std::string& launch = "hpctrain") {
  std::vector<std::string> args = {"render",   "--no-project",
                                   "--preset", "1n2g",
                                   "--launch", launch,
                                   "-o",       file,
                                   "--set",    "trainer.program=prog",
                                   "--set",    "job.signal_seconds=0"};
  args.insert(args.end(), c.sets.begin(), c.sets.end());
  return args;
}

// Where `part` starts in `all` as a contiguous run; all.size() when it does not.
size_t find_run(const std::vector<std::string>& all, const std::vector<std::string>& part) {
  auto it = std::search(all.begin(), all.end(), part.begin(), part.end());
  return static_cast<size_t>(it - all.begin());
}

// The container's words reach srun in one piece and in the runtime's place for the launch mode:
//   hpctrain  srun OPTIONS [PYXIS] [RUNTIME... IMAGE] prog train --strategy ddp
//   srun      srun OPTIONS [PYXIS] bash -c LINE hpc-task [RUNTIME... IMAGE] prog
//   torchrun  srun OPTIONS [PYXIS] bash -c LINE torchrun-node N CONF [RUNTIME... IMAGE] torchrun
//             ... prog   (the host's bash of each node adds is_host to CONF, here empty)
void check_container_job(const ContainerCase& c, const std::string& launch) {
  Sandbox sb;
  install_slurm_stubs(sb);
  Run r = sb.hpclaunch(render_command(c, "job.sbatch", launch));
  INFO(r.describe());
  REQUIRE(r.status == 0);
  const std::string script = (sb.work() / "job.sbatch").string();
  Run syntax = spawn({"/bin/bash", "-n", script}, sb.work(), sb.env());
  INFO("bash -n: " << syntax.describe());
  CHECK(syntax.status == 0);

  fs::create_directories(sb.work() / "CANARY_DIR");
  write_file(sb.work() / "CANARY_DIR" / "keep", "x");
  Run job = run_job_script(sb, script);
  INFO("job script: " << job.describe());
  CHECK(job.status == 0);
  CHECK(canaries(sb).empty());
  CHECK(fs::exists(sb.work() / "CANARY_DIR" / "keep"));

  const std::vector<std::string> argv = srun_argv(sb);
  INFO("srun argv: " << argv.size() << " words");
  REQUIRE(!argv.empty());
  CHECK(argv.front() == "--export=ALL");  // srun's own options stay first
  const bool pyxis = c.runtime == "pyxis";
  const size_t at = find_run(argv, c.expected);
  REQUIRE(at > 0);
  REQUIRE(at + c.expected.size() < argv.size());
  const std::string before = argv[at - 1], after = argv[at + c.expected.size()];
  if (launch == "torchrun" && !pyxis) {
    REQUIRE(at >= 2);
    CHECK(before == "");  // the --rdzv_conf the task adds is_host to
    CHECK(argv[at - 2] == "torchrun-node");
  } else if (launch == "srun" && !pyxis) {
    REQUIRE(at >= 2);
    CHECK(before == "2");  // LOCAL_WORLD_SIZE, for the task's bash line
    CHECK(argv[at - 2] == "hpc-task");
  } else {
    CHECK(before == "--label");
  }
  if (launch == "hpctrain") {
    CHECK(after == "prog");
    CHECK(std::vector<std::string>(argv.end() - 4, argv.end()) ==
          std::vector<std::string>{"prog", "train", "--strategy", "ddp"});
  } else {
    CHECK(after == (launch == "torchrun" && !pyxis ? "torchrun" : pyxis ? "bash" : "prog"));
    CHECK(argv.back() == "prog");
  }
}

}  // namespace

TEST_CASE("hostile container values stay literal words in the runtime's place", "[hostile]") {
  const auto values = hostile_values("");
  for (const char* launch : {"hpctrain", "srun", "torchrun"}) {
    for (const char* runtime : {"apptainer", "charliecloud", "pyxis"}) {
      for (size_t i = 0; i < values.size(); ++i) {
        if (has_control_chars(values[i].value)) continue;
        DYNAMIC_SECTION(launch << ", " << runtime << ": " << values[i].label) {
          check_container_job(make_case(runtime, values[i].value), launch);
        }
      }
    }
  }
}

TEST_CASE("hostile container values with a control character are refused", "[hostile]") {
  for (const auto& h : hostile_values("")) {
    if (!has_control_chars(h.value)) continue;
    for (const char* key : {"image", "workdir", "options", "mounts"}) {
      DYNAMIC_SECTION(key << ": " << h.label) {
        Sandbox sb;
        std::string value = std::string(key) == "options"
                                ? "[\"--x\"," + nlohmann::json(h.value).dump() + "]"
                            : std::string(key) == "mounts"
                                ? "[" + nlohmann::json("/a" + h.value + ":/b").dump() + "]"
                                : "/" + h.value;
        auto before = sb.snapshot();
        Run r =
            sb.hpclaunch({"render", "--no-project", "--preset", "1n2g", "-o", "job.sbatch", "--set",
                          "container.runtime=apptainer", "--set", "container.image=x.sif", "--set",
                          std::string("container.") + key + "=" + value});
        INFO(r.describe());
        CHECK(r.status == 2);
        CHECK_THAT(r.err, StartsWith("hpclaunch: error: "));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(sb.snapshot() == before);
      }
    }
  }
}

TEST_CASE("hostile container values: shellcheck finds nothing", "[hostile]") {
  std::string shellcheck = find_program("shellcheck");
  if (shellcheck.empty()) return hpc::test::missing_prerequisite("shellcheck is not installed");
  Sandbox sb;
  std::vector<std::string> argv = {shellcheck, "-f", "gcc"};
  int n = 0;
  for (const char* runtime : {"apptainer", "charliecloud", "pyxis", "singularity"}) {
    for (const auto& h : hostile_values("/tmp")) {
      const std::string launch = n % 3 == 0 ? "hpctrain" : n % 3 == 1 ? "srun" : "torchrun";
      // The same values as hostile_values_test's shellcheck case: without $, ` or \, which
      // shellcheck reports inside single quotes (SC2016, SC1003) wherever they are.
      if (has_control_chars(h.value) || h.value.find_first_of("$`\\") != std::string::npos)
        continue;
      std::string file = "job" + std::to_string(n++) + ".sbatch";
      Run r = sb.hpclaunch(render_command(make_case(runtime, h.value), file, launch));
      INFO(runtime << ", " << launch << ": " << h.label << ": " << r.describe());
      REQUIRE(r.status == 0);
      argv.push_back(file);
    }
  }
  Run sc = spawn(argv, sb.work(), sb.env());
  INFO(sc.describe());
  CHECK(sc.status == 0);
  CHECK(sc.out.empty());
}
