// The site's environment keys (docs/programs.md, "Site environment"): profile.module_purge,
// profile.lmod_init, profile.python.venv/conda and job.env_from_submit (--env-pass).
// - bad input: one line, exit 2, nothing written (bad_input.h);
// - hostile module names, venv paths and conda names stay literal text: the script passes
//   bash -n and shellcheck and, run with stub module/conda/srun, nothing a value spells is
//   executed and each consumer receives the value byte for byte; hostile env names are refused;
// - the script's own checks: no `module` (the init is sourced, or one clear line), a failing
//   module load, a missing virtualenv, a variable that did not arrive;
// - the launch exports everything (srun --export=ALL, SLURM_EXPORT_ENV=ALL);
// - --env-pass on the local backend: the task sees the value, no file under the sandbox holds it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bad_input.h"
#include "harness.h"
#include "slurm_stubs.h"
#include "support/prerequisite.h"

using namespace cli_test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

const std::vector<std::string> kHostile = {"$(touch CANARY)",
                                           "`touch CANARY`",
                                           "'",
                                           "\"",
                                           "\\",
                                           "; rm -rf CANARY_DIR",
                                           "$HOME",
                                           "*",
                                           "#",
                                           "a\nb",
                                           "--nodes=99",
                                           " a b ",
                                           "${HOME}",
                                           "%x {{x}} <&>|!~",
                                           "x\n$(touch CANARY)\n"};

bool has_control_chars(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

// What the spec refuses in a path on the cluster: $, `, control characters.
bool refused_as_path(const std::string& v) {
  return v.find_first_of("$`") != std::string::npos || has_control_chars(v);
}

void write_executable(const fs::path& path, const std::string& text) {
  write_file(path, text);
  fs::permissions(path, fs::perms::owner_all);
}

Run render(const Sandbox& sb, const json& project, std::vector<std::string> extra = {}) {
  sb.write("work/hpclaunch.json", project.dump(2) + "\n");
  std::vector<std::string> args = {"render", "--preset", "1n2g",      "--strategy",
                                   "ddp",    "-o",       "job.sbatch"};
  args.insert(args.end(), extra.begin(), extra.end());
  return sb.hpclaunch(args);
}

void check_shellcheck(const Sandbox& sb, const std::string& file) {
  std::string shellcheck = find_program("shellcheck");
  if (shellcheck.empty()) return hpc::test::missing_prerequisite("shellcheck is not installed");
  Run sc = spawn({shellcheck, "-f", "gcc", file}, sb.work(), sb.env());
  INFO(sc.describe());
  CHECK(sc.status == 0);
}

}  // namespace

TEST_CASE("bad input: site environment keys", "[bad-input][siteenv]") {
  check_all({
      {"module_purge unknown",
       render_args({"--set", "profile.module_purge=yes", "--set", "profile.modules=[\"GCC\"]"}),
       {},
       {"profile.module_purge", "unknown value \"yes\"", "use \"none\", \"purge\""}},
      {"modules given as numbers",
       render_args({}),
       {{kProject, "{\"profile\": {\"modules\": [\"GCC\", 12]}}"}},
       {"hpclaunch.json: profile.modules", "expected a list of strings", "write a list"}},
      {"modules given as one string",
       render_args({}),
       {{kProject, "{\"profile\": {\"modules\": \"GCC CUDA\"}}"}},
       {"hpclaunch.json: profile.modules", "expected a list of strings"}},
      {"venv and conda both set",
       render_args({}),
       {{kProject, "{\"profile\": {\"python\": {\"venv\": \"~/v\", \"conda\": \"train\"}}}"}},
       {"hpclaunch.json: profile.python", "sets both venv and conda", "keep one"}},
      {"venv with $HOME",
       render_args({"--set", "profile.python.venv=$HOME/venvs/x"}),
       {},
       {"profile.python.venv", "holds a $ or `", "write ~/"}},
      {"venv in another user's home",
       render_args({"--set", "profile.python.venv=~alice/venv"}),
       {},
       {"profile.python.venv", "names another user's home", "write ~/"}},
      {"conda name with a newline",
       render_args({}),
       {{kProject, "{\"profile\": {\"python\": {\"conda\": \"a\\nb\"}}}"}},
       {"hpclaunch.json: profile.python.conda", "newline or control character", "one line"}},
      {"python given as a string",
       render_args({"--set", "profile.python=~/venv"}),
       {},
       {"profile.python", "write the value as JSON"}},
      {"lmod_init relative",
       render_args({"--set", "profile.lmod_init=lmod/init/bash"}),
       {},
       {"profile.lmod_init", "not an absolute path", "/usr/share/lmod/lmod/init/bash"}},
      {"env_from_submit with an invalid name",
       render_args({}),
       {{kProject, "{\"job\": {\"env_from_submit\": [\"WANDB-KEY\"]}}"}},
       {"hpclaunch.json: job.env_from_submit", "\"WANDB-KEY\" is not an environment variable",
        "use letters"}},
      {"--env-pass with an invalid name",
       render_args({"--env-pass", "1TOKEN"}),
       {},
       {"--env-pass: job.env_from_submit", "\"1TOKEN\" is not an environment variable"}},
      {"env_from_submit names a Slurm variable",
       render_args({"--env-pass", "SLURM_MEM_PER_CPU"}),
       {},
       {"job.env_from_submit", "SLURM_MEM_PER_CPU is set by Slurm", "your own variables"}},
      {"env_from_submit names MASTER_ADDR",
       render_args({"--env-pass", "MASTER_ADDR"}),
       {},
       {"job.env_from_submit", "MASTER_ADDR is computed by the batch script"}},
      {"env_from_submit also in profile.env",
       render_args({"--env-pass", "MY_TOKEN", "--set", "profile.env.MY_TOKEN.value=x"}),
       {},
       {"job.env_from_submit", "MY_TOKEN is also set by the profile", "one place"}},
      {"env_from_submit not a list",
       render_args({}),
       {{kProject, "{\"job\": {\"env_from_submit\": \"HF_TOKEN\"}}"}},
       {"hpclaunch.json: job.env_from_submit", "expected a list of strings"}},
      {"submit with an env-pass name unset in the shell",
       {"submit", "--local", "--preset", "1n2g", "--env-pass", "HPC_SURELY_UNSET_TOKEN"},
       {},
       {"job.env_from_submit", "HPC_SURELY_UNSET_TOKEN is not set in this shell",
        "export HPC_SURELY_UNSET_TOKEN"}},
      {"run with a name from hpclaunch.json unset in the shell",
       {"run", "--local", "--preset", "1n2g"},
       {{kProject, "{\"job\": {\"env_from_submit\": [\"HPC_SURELY_UNSET_TOKEN\"]}}"}},
       {"job.env_from_submit", "HPC_SURELY_UNSET_TOKEN is not set in this shell"}},
      {"submit with a value holding a newline",
       {"submit", "--local", "--preset", "1n2g", "--env-pass", "HPC_TWO_LINES"},
       {},
       {"job.env_from_submit", "the value of HPC_TWO_LINES holds a newline", "one-line value"},
       {"HPC_TWO_LINES=a\nb"}},
  });
}

TEST_CASE("hostile env names are refused", "[hostile][siteenv]") {
  for (const auto& v : kHostile) {
    DYNAMIC_SECTION(v) {
      Sandbox sb;
      auto before = sb.snapshot();
      Run r = sb.hpclaunch({"render", "--preset", "1n2g", "-o", "job.sbatch", "--env-pass=" + v});
      INFO(r.describe());
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      CHECK_THAT(r.err, Contains("job.env_from_submit"));
      CHECK(sb.snapshot() == before);
    }
  }
}

TEST_CASE("hostile module names, venv paths and conda names stay literal", "[hostile][siteenv]") {
  for (const auto& v : kHostile) {
    DYNAMIC_SECTION("module " << v) {
      Sandbox sb;
      install_slurm_stubs(sb);
      Run r = render(sb, {{"profile", {{"modules", {v, "mod/" + v}}, {"module_purge", "force"}}}});
      INFO(r.describe());
      REQUIRE(r.status == 0);
      Run syntax = spawn({"/bin/bash", "-n", "job.sbatch"}, sb.work(), sb.env());
      CHECK(syntax.status == 0);
      fs::create_directories(sb.work() / "CANARY_DIR");
      write_file(sb.work() / "CANARY_DIR" / "keep", "x");
      Run job = run_job_script(sb, "job.sbatch");
      INFO(job.describe());
      CHECK(job.status == 0);
      CHECK(canaries(sb).empty());
      CHECK(fs::exists(sb.work() / "CANARY_DIR" / "keep"));
      CHECK(module_calls(sb) == std::vector<std::vector<std::string>>{
                                    {"--force", "purge"}, {"load", v}, {"load", "mod/" + v}});
    }
    DYNAMIC_SECTION("venv " << v) {
      Sandbox sb;
      install_slurm_stubs(sb);
      Run r = render(sb, {{"profile", {{"python", {{"venv", v}}}}}});
      INFO(r.describe());
      if (refused_as_path(v)) {
        CHECK(r.status == 2);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK_THAT(r.err, Contains("profile.python.venv"));
        continue;
      }
      REQUIRE(r.status == 0);
      // A virtualenv at exactly that path (relative to the job's directory).
      write_file(sb.work() / v / "bin" / "activate",
                 "printf '%s' \"$PWD\" >\"${STUB_LOG}/activated\"\nexport HPC_VENV_ON=1\n");
      fs::create_directories(sb.work() / "CANARY_DIR");
      Run job = run_job_script(sb, "job.sbatch");
      INFO(job.describe());
      CHECK(job.status == 0);
      for (const auto& c : canaries(sb))  // the virtualenv's own folder may spell CANARY
        CHECK(c.rfind((sb.work() / v).string(), 0) == 0);
      CHECK(fs::exists(sb.root() / "log" / "activated"));
      CHECK(srun_env(sb)["HPC_VENV_ON"] == "1");
    }
    DYNAMIC_SECTION("lmod_init " << v) {
      Sandbox sb;
      install_slurm_stubs(sb);
      fs::remove(sb.root() / "bin" / "module");  // only the init can define it
      const fs::path init = sb.root() / "init" / v;
      Run r = render(sb, {{"profile", {{"modules", {"GCC"}}, {"lmod_init", init.string()}}}});
      INFO(r.describe());
      if (refused_as_path(v)) {
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains("profile.lmod_init"));
        continue;
      }
      REQUIRE(r.status == 0);
      write_file(init, "module() { printf '%s\\0' \"$@\" >>\"${STUB_LOG}/lmod.calls\"; }\n");
      Run job = run_job_script(sb, "job.sbatch");
      INFO(job.describe());
      CHECK(job.status == 0);
      for (const auto& c : canaries(sb)) CHECK(c.rfind((sb.root() / "init").string(), 0) == 0);
      CHECK(split_nul(read_file(sb.root() / "log" / "lmod.calls")) ==
            std::vector<std::string>{"load", "GCC"});
    }
    DYNAMIC_SECTION("conda " << v) {
      Sandbox sb;
      install_slurm_stubs(sb);
      // conda's hook defines the shell function `conda`; this one records its arguments.
      write_executable(sb.root() / "bin" / "conda", R"(#!/bin/bash
[[ "$1 $2" == "shell.bash hook" ]] || exit 3
echo 'conda() { printf "%s\0" "$@" >"${STUB_LOG}/conda.argv"; }'
)");
      Run r = render(sb, {{"profile", {{"python", {{"conda", v}}}}}});
      INFO(r.describe());
      if (refused_as_path(v) || v[0] == '-') {
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains("profile.python.conda"));
        continue;
      }
      REQUIRE(r.status == 0);
      Run job = run_job_script(sb, "job.sbatch");
      INFO(job.describe());
      CHECK(job.status == 0);
      CHECK(canaries(sb).empty());
      CHECK(split_nul(read_file(sb.root() / "log" / "conda.argv")) ==
            std::vector<std::string>{"activate", v});
    }
  }
}

TEST_CASE("site environment blocks: bash -n and shellcheck clean", "[hostile][siteenv]") {
  Sandbox sb;
  json project = {{"profile",
                   {{"modules", {"Stages/2024", "it's", "a b"}},
                    {"module_purge", "force"},
                    {"lmod_init", "~/my lmod/init.sh"},
                    {"python", {{"venv", "~/venvs/it's here"}}}}},
                  {"job", {{"env_from_submit", {"WANDB_API_KEY", "HF_TOKEN"}}}}};
  Run r = render(sb, project);
  INFO(r.describe());
  REQUIRE(r.status == 0);
  CHECK(spawn({"/bin/bash", "-n", "job.sbatch"}, sb.work(), sb.env()).status == 0);
  check_shellcheck(sb, "job.sbatch");
  project["profile"]["python"] = {{"conda", "~/conda envs/train"}};
  project["profile"]["module_purge"] = "purge";
  r = render(sb, project);
  REQUIRE(r.status == 0);
  const std::string text = read_file(sb.work() / "job.sbatch");
  CHECK_THAT(text, Contains("\n  hpc_conda \"${HOME}\"/'conda envs/train' #"));
  CHECK_THAT(text, Contains("\n  hpc_module purge\n"));
  check_shellcheck(sb, "job.sbatch");
}

TEST_CASE("job script: the site environment's own checks", "[hostile][siteenv]") {
  Sandbox sb;
  install_slurm_stubs(sb);
  SECTION("no module command: profile.lmod_init is sourced and defines it") {
    fs::remove(sb.root() / "bin" / "module");
    write_file(sb.root() / "lmod" / "init.sh",
               "module() { printf '%s\\0' \"$@\" >>\"${STUB_LOG}/lmod.calls\"; }\n");
    Run r = render(
        sb, {{"profile",
              {{"modules", {"GCC"}}, {"lmod_init", (sb.root() / "lmod" / "init.sh").string()}}}});
    REQUIRE(r.status == 0);
    Run job = run_job_script(sb, "job.sbatch");
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK(split_nul(read_file(sb.root() / "log" / "lmod.calls")) ==
          std::vector<std::string>{"load", "GCC"});
  }
  SECTION("no module command and no init script: one clear line, the job fails") {
    fs::remove(sb.root() / "bin" / "module");
    Run r = render(sb, {{"profile", {{"modules", {"GCC"}}, {"lmod_init", "/nonexistent/init"}}}});
    REQUIRE(r.status == 0);
    Run job = run_job_script(sb, "job.sbatch");
    INFO(job.describe());
    if (fs::exists("/etc/profile.d/lmod.sh") || fs::exists("/usr/share/lmod/lmod/init/bash") ||
        fs::exists("/etc/profile.d/modules.sh") || fs::exists("/usr/share/Modules/init/bash")) {
      WARN("this machine has a module init of its own; the 'none found' case is skipped");
      return;
    }
    CHECK(job.status == 1);
    CHECK_THAT(job.err, Contains("no init script was found (tried: /nonexistent/init"));
    CHECK_FALSE(fs::exists(sb.root() / "log" / "srun.argv"));
  }
  SECTION("a failing module load fails the job with the module's name") {
    write_executable(sb.root() / "bin" / "module", "#!/bin/bash\n[[ \"$2\" != NoSuch ]]\n");
    Run r = render(sb, {{"profile", {{"modules", {"GCC", "NoSuch"}}}}});
    REQUIRE(r.status == 0);
    Run job = run_job_script(sb, "job.sbatch");
    CHECK(job.status == 1);
    CHECK_THAT(job.err, Contains("'module load' failed for NoSuch (profile.modules)"));
    CHECK_FALSE(fs::exists(sb.root() / "log" / "srun.argv"));
  }
  SECTION("a missing virtualenv: one clear line, the job fails") {
    Run r = render(sb, {{"profile", {{"python", {{"venv", "~/venvs/gone"}}}}}});
    REQUIRE(r.status == 0);
    Run job = run_job_script(sb, "job.sbatch");
    CHECK(job.status == 1);
    CHECK_THAT(job.err, Contains("profile.python.venv: no virtualenv at " +
                                 (sb.root() / "home" / "venvs" / "gone").string()));
    CHECK_FALSE(fs::exists(sb.root() / "log" / "srun.argv"));
  }
  SECTION("a variable that did not reach the job: the job fails naming it") {
    Run r = render(sb, json::object(), {"--env-pass", "HPC_TOKEN"});
    REQUIRE(r.status == 0);
    Run missing = run_job_script(sb, "job.sbatch");
    CHECK(missing.status == 1);
    CHECK_THAT(missing.err, Contains("HPC_TOKEN (job.env_from_submit) did not reach the job"));
    Run arrived = run_job_script(sb, "job.sbatch", {"HPC_TOKEN=x"});
    CHECK(arrived.status == 0);
    CHECK(srun_env(sb)["HPC_TOKEN"] == "x");
  }
  SECTION("the launch exports everything, whatever SBATCH_EXPORT made of SLURM_EXPORT_ENV") {
    Run r = render(sb, json::object());
    REQUIRE(r.status == 0);
    Run job = run_job_script(sb, "job.sbatch", {"SLURM_EXPORT_ENV=NONE"});
    CHECK(job.status == 0);
    CHECK(srun_argv(sb).at(0) == "--export=ALL");
    CHECK(srun_env(sb)["SLURM_EXPORT_ENV"] == "ALL");
  }
}

TEST_CASE("env-pass on the local backend: the task sees the value, no file holds it", "[siteenv]") {
  Sandbox sb;
  const std::string secret = "hpc-local-secret-4f1d9c";
  write_executable(sb.root() / "envprobe.sh",
                   "#!/bin/bash\necho \"envprobe len=${#HPC_TEST_SECRET} "
                   "sha=$(printf '%s' \"$HPC_TEST_SECRET\" | sha256sum | cut -c1-16)\"\n");
  std::vector<std::string> env = sb.env();
  env.push_back("HPC_TEST_SECRET=" + secret);
  env.push_back("SLURM_JOB_ID=77");  // as inside an allocation
  env.push_back("SLURM_MEM_PER_CPU=100");
  Run r = spawn(
      {hpclaunch_binary(), "run", "--local", "--preset", "1n2g", "--set",
       "trainer.program=" + (sb.root() / "envprobe.sh").string(), "--env-pass", "HPC_TEST_SECRET"},
      sb.work(), env, std::chrono::seconds(60));
  INFO(r.describe());
  REQUIRE(r.status == 0);
  Run sha = spawn({"/bin/bash", "-c", "printf '%s' \"$1\" | sha256sum | cut -c1-16", "_", secret},
                  sb.work(), sb.env());
  const std::string expected =
      "envprobe len=" + std::to_string(secret.size()) + " sha=" + sha.out.substr(0, 16);
  const auto lines = split_lines(r.out);
  CHECK(std::count(lines.begin(), lines.end(), "0: " + expected) == 1);
  CHECK(std::count(lines.begin(), lines.end(), "1: " + expected) == 1);
  CHECK(r.out.find(secret) == std::string::npos);
  for (const auto& [path, content] : sb.snapshot()) {
    INFO(path);
    CHECK(content.find(secret) == std::string::npos);
  }
}
