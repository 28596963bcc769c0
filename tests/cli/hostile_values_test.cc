// Hostile values: every string a user can put into a script ends up as literal text. Each test
// renders with the value in every field at once, then checks the script with bash -n and
// shellcheck, reads its #SBATCH lines the way sbatch does, and executes it with stub scontrol,
// getent, module and srun: no canary appears, and srun, module and the environment receive the
// values byte for byte. Fields that become #SBATCH lines cannot hold a newline: those renders
// must be refused with exit status 2.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"
#include "hostile_cases.h"
#include "slurm_stubs.h"
#include "support/prerequisite.h"

using namespace cli_test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;

namespace {

bool has_control_chars(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

// shellcheck reports SC2016 for '$...' and '`...`' in single quotes and SC1003 for a backslash
// before a closing quote (see the [!mayfail] test below).
bool trips_shellcheck_today(const std::string& s) {
  return s.find_first_of("$`\\") != std::string::npos;
}

const std::vector<std::string> kDirectiveKeys = {
    "job.name",    "job.output",         "job.error",
    "job.chdir",   "profile.partition",  "profile.account",
    "profile.qos", "profile.constraint", "profile.reservation"};

void set_path(json& doc, const std::string& dotted, const json& value) {
  json* node = &doc;
  size_t start = 0;
  while (true) {
    size_t dot = dotted.find('.', start);
    std::string key = dotted.substr(start, dot - start);
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    node = &(*node)[key];
    start = dot + 1;
  }
}

// One render with the hostile value in every field; what each consumer must receive.
struct HostileRender {
  std::string value;      // non-directive fields
  std::string directive;  // #SBATCH fields (the value, or a stand-in when it has a newline)
  std::string program;
  std::vector<std::string> trainer_args;  // files' args, then those after --
  std::vector<std::string> modules;
  std::vector<std::string> command;  // hpclaunch's arguments
  Run run;
  std::string script;
};

HostileRender render_hostile(const Sandbox& sb, const std::string& v, const std::string& file) {
  HostileRender h;
  h.value = v;
  h.directive = has_control_chars(v) ? "stand-in" : v;
  h.program = v;
  h.modules = {v, "mod/" + v};

  json doc = json::object();
  for (const auto& key : kDirectiveKeys) set_path(doc, key, h.directive);
  set_path(doc, "profile.sbatch_extra", json::array({"--comment=" + h.directive}));
  set_path(doc, "profile.modules", h.modules);
  set_path(doc, "profile.nccl.NCCL_HOSTILE", {{"value", v}, {"reason", v}});
  set_path(doc, "profile.env.HPC_HOSTILE", {{"value", v}, {"reason", v}});
  set_path(doc, "profile.env.HPC_EMPTY", {{"value", ""}});
  json file_args = json::array({v, "", "pre" + v + "post"});
  set_path(doc, "trainer.program", v);
  set_path(doc, "trainer.args", file_args);
  // The node check's hpctrain (one line: control characters are refused).
  set_path(doc, "job.preflight.enabled", true);
  set_path(doc, "job.preflight.hpctrain", h.directive);
  sb.write("work/hpclaunch.json", doc.dump(2) + "\n");

  h.command = {"render", "--preset", "1n2g", "--strategy", "ddp", "-o",
               file,     "--",       v,      "--flag=" + v};
  h.trainer_args = {v, "", "pre" + v + "post", v, "--flag=" + v};
  h.run = sb.hpclaunch(h.command);
  if (h.run.status == 0) h.script = read_file(sb.work() / file);
  return h;
}

// The "# Command:" header line, read back by bash, gives the command's argv again.
std::vector<std::string> header_command_argv(const Sandbox& sb, const std::string& script) {
  const std::string tag = "# Command: ";
  for (const auto& line : split_lines(script)) {
    if (line.rfind(tag, 0) != 0) continue;
    Run r = spawn({"/bin/bash", "-c", "eval \"a=( $1 )\" && printf '%s\\0' \"${a[@]}\"", "_",
                   line.substr(tag.size())},
                  sb.work(), sb.env());
    INFO(r.describe());
    CHECK(r.status == 0);
    return split_nul(r.out);
  }
  FAIL("no '# Command:' line in the script");
  return {};
}

void check_ends_with(const std::vector<std::string>& all, const std::vector<std::string>& tail) {
  REQUIRE(all.size() >= tail.size());
  std::vector<std::string> got(all.end() - static_cast<long>(tail.size()), all.end());
  CHECK(got == tail);
}

// Everything about one rendered hostile script except shellcheck.
void check_hostile_script(const Sandbox& sb, const HostileRender& h) {
  INFO("hpclaunch: " << h.run.describe());
  REQUIRE(h.run.status == 0);
  const std::string script = (sb.work() / "job.sbatch").string();

  Run syntax = spawn({"/bin/bash", "-n", script}, sb.work(), sb.env());
  INFO("bash -n: " << syntax.describe());
  CHECK(syntax.status == 0);

  // #SBATCH lines as sbatch reads them: one argument per line, the values exactly.
  for (const auto& args : sbatch_directive_args(h.script)) CHECK(args.size() == 1);
  auto opts = sbatch_options(h.script);
  for (const char* opt : {"--job-name", "--output", "--error", "--chdir", "--partition",
                          "--account", "--qos", "--constraint", "--reservation", "--comment"}) {
    INFO("sbatch option " << opt);
    REQUIRE(opts.count(opt) == 1);
    CHECK(opts[opt] == h.directive);
  }
  CHECK(opts["--nodes"] == "1");
  CHECK(opts["--ntasks-per-node"] == "2");

  // job.preflight.hpctrain: one word of the node check's call, read back by bash as it was given.
  std::string check_line;
  for (const auto& line : split_lines(h.script)) {
    if (line.rfind("  hpc_node_check ", 0) == 0) check_line = line;
  }
  REQUIRE(!check_line.empty());
  Run assigned = spawn({"/bin/bash", "-c", "hpc_node_check() { printf '%s' \"$1\"; }; eval \"$1\"",
                        "_", check_line},
                       sb.work(), sb.env());
  INFO("hpc_node_check's program: " << assigned.describe());
  CHECK(assigned.status == 0);
  CHECK(assigned.out == h.directive);

  // Run it: nothing is executed that the user only meant as text.
  fs::create_directories(sb.work() / "CANARY_DIR");
  write_file(sb.work() / "CANARY_DIR" / "keep", "x");
  Run job = run_job_script(sb, script);
  INFO("job script: " << job.describe());
  CHECK(job.status == 0);
  CHECK(canaries(sb).empty());
  CHECK(fs::exists(sb.work() / "CANARY_DIR" / "keep"));

  std::vector<std::string> launch = {h.program, "train", "--strategy", "ddp"};
  launch.insert(launch.end(), h.trainer_args.begin(), h.trainer_args.end());
  check_ends_with(srun_argv(sb), launch);

  std::vector<std::vector<std::string>> expected_modules;
  for (const auto& m : h.modules) expected_modules.push_back({"load", m});
  CHECK(module_calls(sb) == expected_modules);

  // Reasons become comment lines, one per line of the reason, beside their variable.
  bool only_newlines = true;
  for (char c : h.value)
    only_newlines = only_newlines && (c == '\n' || !has_control_chars(std::string(1, c)));
  if (only_newlines) {
    auto lines = split_lines(h.script);
    for (const auto& reason_line : split_lines(h.value + "\n")) {
      INFO("reason line: " << reason_line);
      CHECK(std::count(lines.begin(), lines.end(), "  # " + reason_line) >= 2);  // nccl + env
    }
  }

  auto env = srun_env(sb);
  CHECK(env["NCCL_HOSTILE"] == h.value);
  CHECK(env["HPC_HOSTILE"] == h.value);
  CHECK(env.count("HPC_EMPTY") == 1);
  CHECK(env["HPC_EMPTY"].empty());
  CHECK(env["MASTER_ADDR"] == "127.0.0.1");
  CHECK(env["MASTER_PORT"] == "24242");  // 20000 + 4242 mod 12768
  CHECK(env["OMP_NUM_THREADS"] == "8");

  // The header's generator command line pastes back into bash as the same argv.
  std::vector<std::string> command = {"hpclaunch"};
  command.insert(command.end(), h.command.begin(), h.command.end());
  CHECK(header_command_argv(sb, h.script) == command);
  CHECK(canaries(sb).empty());
}

// shellcheck over several scripts at once (one process: ~0.2 s instead of ~0.2 s each).
void check_shellcheck_clean(
    const std::vector<std::pair<std::string, std::string>>& labelled_values) {
  std::string shellcheck = find_program("shellcheck");
  if (shellcheck.empty()) return hpc::test::missing_prerequisite("shellcheck is not installed");
  Sandbox sb;
  std::vector<std::string> argv = {shellcheck, "-f", "gcc"};
  int n = 0;
  for (const auto& [label, v] : labelled_values) {
    std::string file = "job" + std::to_string(n++) + ".sbatch";
    HostileRender h = render_hostile(sb, v, file);
    INFO(label << ": " << h.run.describe());
    REQUIRE(h.run.status == 0);
    argv.push_back(file);
  }
  Run sc = spawn(argv, sb.work(), sb.env());
  INFO(sc.describe());
  CHECK(sc.status == 0);
  CHECK(sc.out.empty());
}

}  // namespace

TEST_CASE("hostile values stay literal: from files and after --, run with stub srun", "[hostile]") {
  const auto labels = hostile_values("");
  for (size_t i = 0; i < labels.size(); ++i) {
    DYNAMIC_SECTION(labels[i].label) {
      Sandbox sb;
      install_slurm_stubs(sb);
      std::string v = hostile_values(sb.root().string())[i].value;
      HostileRender h = render_hostile(sb, v, "job.sbatch");
      check_hostile_script(sb, h);
    }
  }
}

TEST_CASE("hostile values stay literal: through --set", "[hostile]") {
  const auto labels = hostile_values("");
  for (size_t i = 0; i < labels.size(); ++i) {
    DYNAMIC_SECTION(labels[i].label) {
      Sandbox sb;
      install_slurm_stubs(sb);
      std::string v = hostile_values(sb.root().string())[i].value;
      std::string dv = has_control_chars(v) ? "stand-in" : v;
      std::vector<std::string> command = {
          "render",
          "--preset",
          "1n2g",
          "--strategy",
          "ddp",
          "-o",
          "job.sbatch",
          "--set",
          "job.name=" + dv,
          "--set",
          "profile.partition=" + dv,
          "--set",
          "trainer.program=" + v,
          "--set",
          "profile.env.HPC_SET.value=" + v,
          "--set",
          "profile.nccl.NCCL_SET=" + json{{"value", v}, {"reason", v}}.dump(),
          "--set",
          "profile.modules=" + json::array({v}).dump(),
          "--",
          v};
      Run r = sb.hpclaunch(command);
      INFO(r.describe());
      REQUIRE(r.status == 0);
      std::string text = read_file(sb.work() / "job.sbatch");
      auto opts = sbatch_options(text);
      CHECK(opts["--job-name"] == dv);
      CHECK(opts["--partition"] == dv);

      fs::create_directories(sb.work() / "CANARY_DIR");
      write_file(sb.work() / "CANARY_DIR" / "keep", "x");
      Run job = run_job_script(sb, "job.sbatch");
      INFO(job.describe());
      CHECK(job.status == 0);
      CHECK(canaries(sb).empty());
      CHECK(fs::exists(sb.work() / "CANARY_DIR" / "keep"));
      check_ends_with(srun_argv(sb), {v, "train", "--strategy", "ddp", v});
      CHECK(module_calls(sb) == std::vector<std::vector<std::string>>{{"load", v}});
      auto env = srun_env(sb);
      CHECK(env["HPC_SET"] == v);
      CHECK(env["NCCL_SET"] == v);

      command.insert(command.begin(), "hpclaunch");
      CHECK(header_command_argv(sb, text) == command);
      CHECK(canaries(sb).empty());
    }
  }
}

TEST_CASE("hostile values: a newline in an #SBATCH field is refused", "[hostile]") {
  std::vector<std::string> keys = kDirectiveKeys;
  keys.push_back("profile.sbatch_extra");
  for (const auto& key : keys) {
    DYNAMIC_SECTION(key) {
      Sandbox sb;
      json doc = json::object();
      std::string v = "ok\n#SBATCH --nodes=99";
      if (key == "profile.sbatch_extra")
        set_path(doc, key, json::array({"--comment=" + v}));
      else
        set_path(doc, key, v);
      sb.write("work/hpclaunch.json", doc.dump());
      auto before = sb.snapshot();
      Run r = sb.hpclaunch(
          {"render", "--preset", "1n2g", "-o", "job.sbatch", "--spec-out", "spec.json"});
      INFO(r.describe());
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK_THAT(r.err, StartsWith("hpclaunch: error: hpclaunch.json: " + key));
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      CHECK(sb.snapshot() == before);
    }
  }
  SECTION("through --set") {
    Sandbox sb;
    auto before = sb.snapshot();
    Run r = sb.hpclaunch({"render", "--preset", "1n2g", "-o", "job.sbatch", "--set",
                          "job.name=ok\n#SBATCH --nodes=99"});
    INFO(r.describe());
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, StartsWith("hpclaunch: error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(sb.snapshot() == before);
  }
}

TEST_CASE("hostile values: every hostile ib_suffix is refused", "[hostile]") {
  const auto labels = hostile_values("");
  for (size_t i = 0; i < labels.size(); ++i) {
    DYNAMIC_SECTION(labels[i].label) {
      Sandbox sb;
      std::string v = hostile_values(sb.root().string())[i].value;
      sb.write("work/hpclaunch.json", json{{"profile", {{"ib_suffix", v}}}}.dump());
      auto before = sb.snapshot();
      Run r = sb.hpclaunch({"render", "--preset", "1n2g", "-o", "job.sbatch"});
      INFO(r.describe());
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK_THAT(r.err, StartsWith("hpclaunch: error: hpclaunch.json: profile.ib_suffix: "));
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      CHECK(sb.snapshot() == before);
    }
  }
}

TEST_CASE("hostile values: every hostile job.signal, cpu_bind and gpu_bind is refused",
          "[hostile]") {
  const auto labels = hostile_values("");
  for (const std::string key : {"job.signal", "profile.cpu_bind", "profile.gpu_bind"}) {
    for (size_t i = 0; i < labels.size(); ++i) {
      DYNAMIC_SECTION(key << ": " << labels[i].label) {
        Sandbox sb;
        std::string v = hostile_values(sb.root().string())[i].value;
        const auto dot = key.find('.');
        sb.write("work/hpclaunch.json",
                 json{{key.substr(0, dot), {{key.substr(dot + 1), v}}}}.dump());
        auto before = sb.snapshot();
        Run r = sb.hpclaunch({"render", "--preset", "2n2g", "-o", "job.sbatch"});
        INFO(r.describe());
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK_THAT(r.err, StartsWith("hpclaunch: error: hpclaunch.json: " + key + ": "));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(sb.snapshot() == before);
        CHECK(canaries(sb).empty());
      }
    }
  }
}

TEST_CASE(
    "hostile values: shellcheck finds nothing in values without dollar, backtick or backslash",
    "[hostile]") {
  std::vector<std::pair<std::string, std::string>> values;
  for (const auto& h : hostile_values("/tmp"))
    if (!trips_shellcheck_today(h.value)) values.emplace_back(h.label, h.value);
  REQUIRE(values.size() >= 6);
  check_shellcheck_clean(values);
}

// BUG: shell_quote() puts these values in single quotes, and shellcheck reports SC2016
// ("Expressions don't expand in single quotes") for '$(touch CANARY)', '`...`' and '$HOME', and
// SC1003 for a backslash right before a closing quote ('\' or '\'\'''), in the module, export and
// hpc_train lines. The brief wants zero findings for every script; e.g. double-quote such values
// with \ before $ ` " \, or precede the line with "# shellcheck disable=SC2016,SC1003".
TEST_CASE("hostile values: shellcheck finds nothing in values with dollar, backtick or backslash",
          "[hostile]") {
  std::vector<std::pair<std::string, std::string>> values;
  for (const auto& h : hostile_values("/tmp"))
    if (trips_shellcheck_today(h.value)) values.emplace_back(h.label, h.value);
  check_shellcheck_clean(values);
}

TEST_CASE("job script: USR1 reaches srun and the job requeues itself", "[hostile][requeue]") {
  Sandbox sb;
  install_slurm_stubs(sb);
  Run r = sb.hpclaunch({"render", "--preset", "1n2g", "-o", "job.sbatch"});
  INFO(r.describe());
  REQUIRE(r.status == 0);

  SECTION("first run: requeued") {
    Run job = run_job_script(sb, "job.sbatch", {"STUB_SRUN_USR1_PARENT=1"});
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK(fs::exists(sb.root() / "log" / "srun.usr1"));
    REQUIRE(fs::exists(sb.root() / "log" / "requeue"));
    CHECK(read_file(sb.root() / "log" / "requeue") == "requeue 4242\n");
  }
  SECTION("after max_requeues restarts: not requeued again, the job fails with 75 and says why") {
    Run job =
        run_job_script(sb, "job.sbatch", {"STUB_SRUN_USR1_PARENT=1", "SLURM_RESTART_COUNT=3"});
    INFO(job.describe());
    CHECK(job.status == 75);
    CHECK_FALSE(fs::exists(sb.root() / "log" / "requeue"));
    CHECK(job.err.find("requeued 3 time(s) already (job.max_requeues = 3)") != std::string::npos);
  }
  SECTION("no signal: not requeued") {
    Run job = run_job_script(sb, "job.sbatch");
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK_FALSE(fs::exists(sb.root() / "log" / "requeue"));
  }
}

TEST_CASE("job script: jsc modules, NCCL variables and MASTER_ADDR from the IB host name",
          "[hostile][rendezvous]") {
  Sandbox sb;
  install_slurm_stubs(sb);
  Run r =
      sb.hpclaunch({"render", "--preset", "2n4g", "--cluster", "jsc", "--strategy", "fsdp", "--set",
                    "profile.account=proj", "-o", "job.sbatch", "--", "--model", "tiny"});
  INFO(r.describe());
  REQUIRE(r.status == 0);
  Run job = run_job_script(sb, "job.sbatch");
  INFO(job.describe());
  REQUIRE(job.status == 0);
  CHECK(read_file(sb.root() / "log" / "getent") == "node01i\n");
  CHECK(module_calls(sb) == std::vector<std::vector<std::string>>{{"--force", "purge"},
                                                                  {"load", "Stages/2025"},
                                                                  {"load", "GCC"},
                                                                  {"load", "OpenMPI"},
                                                                  {"load", "Python"},
                                                                  {"load", "PyTorch"}});
  auto env = srun_env(sb);
  // Not set: 50 and 10 do not fit the IB fields (presets/clusters/jsc.json says why).
  CHECK(env.count("NCCL_IB_TIMEOUT") == 0);
  CHECK(env.count("NCCL_IB_RETRY_CNT") == 0);
  CHECK(env.count("UCX_RC_TIMEOUT") == 0);  // unsourced: no longer set (jsc.json says why)
  CHECK(env["MASTER_ADDR"] == "127.0.0.1");
  CHECK(env["MASTER_PORT"] == "24242");
  CHECK(srun_argv(sb) ==
        std::vector<std::string>{"--export=ALL", "--kill-on-bad-exit=1", "--wait=60",
                                 "--ntasks-per-node=4", "--cpus-per-task=24", "--cpu-bind=none",
                                 "--gpu-bind=none", "--label", "hpctrain", "train", "--strategy",
                                 "fsdp", "--model", "tiny"});
}

TEST_CASE("job script: NCCL_P2P_DISABLE=auto decides from nvidia-smi topo -m",
          "[hostile][rendezvous]") {
  Sandbox sb;
  install_slurm_stubs(sb);
  Run r = sb.hpclaunch({"render", "--preset", "1n2g", "--cluster", "daic", "--set",
                        "profile.nccl.NCCL_P2P_DISABLE.value=auto", "--set", "profile.account=grp",
                        "--set", "shape.mem_per_gpu=16G", "-o", "job.sbatch"});
  INFO(r.describe());
  REQUIRE(r.status == 0);

  SECTION("no nvidia-smi: 0") {
    if (!find_program("nvidia-smi").empty()) {
      WARN("nvidia-smi is installed on this machine; the 'absent' case is skipped");
      return;
    }
    Run job = run_job_script(sb, "job.sbatch");
    INFO(job.describe());
    REQUIRE(job.status == 0);
    CHECK(srun_env(sb)["NCCL_P2P_DISABLE"] == "0");
  }
  SECTION("SYS between GPUs: 1") {
    write_file(sb.root() / "bin" / "nvidia-smi", R"(#!/bin/bash
cat <<'TOPO'
        GPU0    GPU1    CPU Affinity    NUMA Affinity
GPU0     X      SYS     0-15            0
GPU1    SYS      X      16-31           1
TOPO
)");
    fs::permissions(sb.root() / "bin" / "nvidia-smi", fs::perms::owner_all);
    Run job = run_job_script(sb, "job.sbatch");
    INFO(job.describe());
    REQUIRE(job.status == 0);
    CHECK(srun_env(sb)["NCCL_P2P_DISABLE"] == "1");
  }
  SECTION("NV links: 0") {
    write_file(sb.root() / "bin" / "nvidia-smi", R"(#!/bin/bash
cat <<'TOPO'
        GPU0    GPU1    CPU Affinity    NUMA Affinity
GPU0     X      NV12    0-15            0
GPU1    NV12     X      0-15            0
TOPO
)");
    fs::permissions(sb.root() / "bin" / "nvidia-smi", fs::perms::owner_all);
    Run job = run_job_script(sb, "job.sbatch");
    INFO(job.describe());
    REQUIRE(job.status == 0);
    CHECK(srun_env(sb)["NCCL_P2P_DISABLE"] == "0");
  }
}

// On the test cluster (tests/cli/CMakeLists.txt gives it the cluster's SLURM_CONF); without a
// cluster a warning, or a failure under CI=true.
TEST_CASE("hostile values: sbatch --test-only accepts the script", "[hostile][sbatch]") {
  const char* conf = std::getenv("SLURM_CONF");
  std::string sbatch = find_program("sbatch"), scontrol = find_program("scontrol");
  Sandbox sb;
  std::vector<std::string> env = sb.env();
  if (conf && *conf) env.push_back(std::string("SLURM_CONF=") + conf);
  if (!conf || !*conf || sbatch.empty() || scontrol.empty() ||
      spawn({scontrol, "ping"}, sb.work(), env, std::chrono::seconds(10)).status != 0) {
    return hpc::test::missing_prerequisite(
        "no Slurm cluster here (SLURM_CONF unset or scontrol ping fails) for sbatch --test-only");
  }
  std::string v = "$(touch CANARY) `touch CANARY` ' \" \\ ; rm -rf CANARY_DIR $HOME * # x";
  sb.write("work/hpclaunch.json", json{{"job", {{"name", v}}}}.dump());
  Run r = sb.hpclaunch({"render", "--preset", "1n1g", "-o", "job.sbatch", "--", v});
  INFO(r.describe());
  REQUIRE(r.status == 0);
  Run t = spawn({sbatch, "--test-only", "job.sbatch"}, sb.work(), env, std::chrono::seconds(30));
  INFO(t.describe());
  CHECK(t.status == 0);
  CHECK(canaries(sb).empty());
}
