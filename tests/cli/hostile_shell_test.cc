// hpclaunch shell --dry-run with hostile values: the salloc command it would run reads back as
// the same argv (each value one argument, byte for byte), and its script — run with the stub
// scontrol, getent, module and a stub $SHELL in place of the interactive shell — passes bash -n,
// runs nothing a user only meant as text, and hands the values to the shell as they were typed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"
#include "slurm_stubs.h"
#include "support/prerequisite.h"

using namespace cli_test;
using nlohmann::json;

namespace {

struct Hostile {
  std::string label;
  std::string value;
};

const std::vector<Hostile> kValues = {
    {"command substitution", "$(touch CANARY)"},
    {"backticks", "`touch CANARY`"},
    {"quotes", "'\"'\"\\'\\\""},
    {"semicolon rm", "; rm -rf CANARY_DIR"},
    {"variable and glob", "$HOME * #"},
    {"newline then substitution", "x\n$(touch CANARY)\n"},
    {"looks like an option", "--nodes=99"},
};

bool has_control_chars(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

// The argv in "hpclaunch: shell: would run ARGV (SCRIPT: ...)", read back by bash.
std::vector<std::string> would_run_argv(const Sandbox& sb, const std::string& err) {
  const std::string start = "hpclaunch: shell: would run ", end = " (SCRIPT: the script";
  auto from = err.find(start);
  auto to = err.find(end);
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  std::string line = err.substr(from + start.size(), to - from - start.size());
  Run r = spawn({"/bin/bash", "-c", "eval \"a=( $1 )\" && printf '%s\\0' \"${a[@]}\"", "_", line},
                sb.work(), sb.env());
  INFO(r.describe());
  CHECK(r.status == 0);
  return split_nul(r.out);
}

// A stand-in for the user's shell: records its arguments and environment, then exits 0.
void install_fake_shell(const Sandbox& sb) {
  write_file(sb.root() / "bin" / "fake-shell",
             "#!/bin/bash\nprintf '%s\\0' \"$@\" > \"" +
                 (sb.root() / "log" / "shell.argv").string() + "\"\nenv -0 > \"" +
                 (sb.root() / "log" / "shell.env").string() + "\"\n");
  fs::permissions(sb.root() / "bin" / "fake-shell", fs::perms::owner_all);
}

std::map<std::string, std::string> shell_env(const Sandbox& sb) {
  std::map<std::string, std::string> env;
  for (const auto& entry : split_nul(read_file(sb.root() / "log" / "shell.env"))) {
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

bool contains(const std::vector<std::string>& all, const std::string& item) {
  return std::find(all.begin(), all.end(), item) != all.end();
}

}  // namespace

TEST_CASE("hostile values: hpclaunch shell --dry-run quotes the salloc argv and the script",
          "[hostile][shell]") {
  for (const auto& h : kValues) {
    DYNAMIC_SECTION(h.label) {
      Sandbox sb;
      install_slurm_stubs(sb);
      install_fake_shell(sb);
      const std::string v = h.value;
      const std::string dv = has_control_chars(v) ? "stand-in" : v;
      Run r = sb.hpclaunch({"shell", "--dry-run", "--preset", "1n2g", "--set", "job.name=" + dv,
                            "--set", "profile.partition=" + dv, "--set",
                            "profile.env.HPC_SET.value=" + v, "--set",
                            "profile.modules=" + json::array({v}).dump()});
      INFO(r.describe());
      REQUIRE(r.status == 0);

      // The command: salloc's options from the #SBATCH lines, each value one argument.
      std::vector<std::string> argv = would_run_argv(sb, r.err);
      REQUIRE(argv.size() > 8);
      CHECK(argv.front() == "salloc");
      CHECK(contains(argv, "--job-name=" + dv));
      CHECK(contains(argv, "--partition=" + dv));
      CHECK(contains(argv, "--nodes=1"));
      CHECK_FALSE(contains(argv, "--requeue"));
      std::vector<std::string> tail(argv.end() - 6, argv.end());
      CHECK(tail == std::vector<std::string>{"--preserve-env", "--pty", "bash", "-c", "SCRIPT",
                                             "hpclaunch-shell"});

      // The script: bash -n, then run as the step would run it, with the fake shell.
      write_file(sb.work() / "shell.sh", r.out);
      Run syntax = spawn({"/bin/bash", "-n", "shell.sh"}, sb.work(), sb.env());
      INFO(syntax.describe());
      CHECK(syntax.status == 0);
      fs::create_directories(sb.work() / "CANARY_DIR");
      write_file(sb.work() / "CANARY_DIR" / "keep", "x");
      Run step =
          run_job_script(sb, "shell.sh", {"SHELL=" + (sb.root() / "bin" / "fake-shell").string()});
      INFO(step.describe());
      CHECK(step.status == 0);
      CHECK(canaries(sb).empty());
      CHECK(fs::exists(sb.work() / "CANARY_DIR" / "keep"));
      CHECK(split_nul(read_file(sb.root() / "log" / "shell.argv")) ==
            std::vector<std::string>{"-i"});
      auto env = shell_env(sb);
      CHECK(env["HPC_SET"] == v);
      CHECK(env["WORLD_SIZE"] == "2");
      CHECK(env["MASTER_ADDR"] == "127.0.0.1");
      CHECK(env["MASTER_PORT"] == "24242");  // 20000 + 4242 mod 12768
      CHECK(module_calls(sb) == std::vector<std::vector<std::string>>{{"load", v}});
      CHECK_FALSE(fs::exists(sb.root() / "log" / "srun.argv"));  // no program was launched
    }
  }
}

TEST_CASE("hpclaunch shell --dry-run: the script is shellcheck-clean and has no requeue",
          "[hostile][shell]") {
  Sandbox sb;
  Run r = sb.hpclaunch({"shell", "--dry-run", "--preset", "2n4g", "--cluster", "jsc", "--set",
                        "profile.account=acc", "--set", "job.name=a b'c"});
  INFO(r.describe());
  REQUIRE(r.status == 0);
  CHECK(r.out.find("exec \"${SHELL:-/bin/bash}\" -i") != std::string::npos);
  const std::string job = r.out.substr(0, r.out.find("\n# --- hpclaunch job library"));
  CHECK(job.find("\n  hpc_shell 8\n}") != std::string::npos);
  CHECK(job.find("hpc_requeue_on") == std::string::npos);
  CHECK(job.find("--kill-on-bad-exit") == std::string::npos);
  CHECK(r.out.find("#SBATCH --job-name=\"a b'c\"\n") != std::string::npos);
  // Without job.name the job is "shell", not the program's name.
  Run unnamed = sb.hpclaunch({"shell", "--dry-run", "--preset", "1n2g"});
  INFO(unnamed.describe());
  CHECK(unnamed.status == 0);
  CHECK(unnamed.out.find("#SBATCH --job-name=shell\n") != std::string::npos);
  CHECK(unnamed.err.find("salloc --job-name=shell ") != std::string::npos);
  write_file(sb.work() / "shell.sh", r.out);
  std::string shellcheck = find_program("shellcheck");
  if (shellcheck.empty()) return hpc::test::missing_prerequisite("shellcheck is not installed");
  Run sc = spawn({shellcheck, "-f", "gcc", "shell.sh"}, sb.work(), sb.env());
  INFO(sc.describe());
  CHECK(sc.status == 0);
  CHECK(sc.out.empty());
}
