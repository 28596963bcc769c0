// Hostile values in a user's program under --launch srun and --launch torchrun: the program, its
// arguments (from the project file and after --) and the torchrun command stay literal text. The
// script is checked with bash -n (and shellcheck for the values it reads cleanly today, as in
// hostile_values_test.cc), run with the stub srun: no canary appears, srun receives every word
// byte for byte; the srun task wrapper, run as a task would run it, passes them on unchanged.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"
#include "slurm_stubs.h"
#include "support/prerequisite.h"

using namespace cli_test;
using nlohmann::json;

namespace {

// The values of hostile_values_test.cc that can reach a program's argv.
std::vector<std::string> hostile_words(const std::string& root) {
  return {"$(touch CANARY)",
          "$(touch " + root + "/CANARY_ABS)",
          "`touch CANARY`",
          "'",
          "\"",
          "\\",
          "; rm -rf CANARY_DIR",
          "$HOME",
          "*",
          "#",
          "a\nb",
          "x\n$(touch CANARY)\n`touch CANARY`\n",
          "$(touch CANARY) `touch CANARY` ' \" \\ ; rm -rf CANARY_DIR $HOME * # x",
          "'\"'\"\\'\\\"'",
          "--nodes=99",
          " a\tb ",
          "${HOME} %x %j {{x}} {{{y}}} <&>|!~",
          "-- \"$@\" exec",
          "-c",
          "-a"};
}

std::vector<std::string> tail_of(const std::vector<std::string>& all, size_t n) {
  REQUIRE(all.size() >= n);
  return {all.end() - static_cast<long>(n), all.end()};
}

// A program name or launcher: one starting with '-' is refused (srun would read it as an
// option), so the test names a file of that name.
std::string as_program(const std::string& v) { return v[0] == '-' ? "./" + v : v; }

// Renders MODE with `v` as the program, in its arguments and in torchrun.command; runs the
// script with the stubs. Returns srun's argv.
std::vector<std::string> render_and_run(const Sandbox& sb, const std::string& mode,
                                        const std::string& v, std::string& script) {
  json project = {{"launch", mode}, {"trainer", {{"program", as_program(v)}, {"args", {v, ""}}}}};
  if (mode == "torchrun") project["torchrun"] = {{"command", {as_program(v), "--x=" + v}}};
  sb.write("work/hpclaunch.json", project.dump(2) + "\n");
  Run r = sb.hpclaunch({"render", "--preset", "1n2g", "-o", "job.sbatch", "--", v, "--f=" + v});
  INFO("hpclaunch: " << r.describe());
  REQUIRE(r.status == 0);
  script = read_file(sb.work() / "job.sbatch");
  Run syntax = spawn({"/bin/bash", "-n", "job.sbatch"}, sb.work(), sb.env());
  INFO("bash -n: " << syntax.describe());
  CHECK(syntax.status == 0);
  fs::create_directories(sb.work() / "CANARY_DIR");
  write_file(sb.work() / "CANARY_DIR" / "keep", "x");
  Run job = run_job_script(sb, "job.sbatch");
  INFO("job script: " << job.describe());
  CHECK(job.status == 0);
  CHECK(canaries(sb).empty());
  CHECK(fs::exists(sb.work() / "CANARY_DIR" / "keep"));
  return srun_argv(sb);
}

}  // namespace

TEST_CASE("hostile launch: srun passes the program and its arguments as words", "[hostile]") {
  const size_t count = hostile_words("").size();
  for (size_t i = 0; i < count; ++i) {
    DYNAMIC_SECTION("value " << i) {
      Sandbox sb;
      install_slurm_stubs(sb);
      const std::string v = hostile_words(sb.root().string())[i];
      std::string script;
      auto argv = render_and_run(sb, "srun", v, script);
      const std::vector<std::string> program = {as_program(v), v, "", v, "--f=" + v};
      CHECK(tail_of(argv, program.size()) == program);
      // srun ... bash -c LINE hpc-task LOCAL_WORLD_SIZE PROGRAM...
      auto wrapper = tail_of(argv, program.size() + 5);
      REQUIRE(wrapper[0] == "bash");
      REQUIRE(wrapper[1] == "-c");
      CHECK(wrapper[3] == "hpc-task");
      CHECK(wrapper[4] == "2");

      // The wrapper as a task runs it, with a program that prints what it got.
      std::vector<std::string> task = {"/bin/bash",
                                       "-c",
                                       wrapper[2],
                                       "hpc-task",
                                       "2",
                                       "/bin/bash",
                                       "-c",
                                       "printf '%s\\0' \"$RANK\" \"$LOCAL_RANK\" \"$WORLD_SIZE\" "
                                       "\"$LOCAL_WORLD_SIZE\" \"$NODE_RANK\" \"$@\"",
                                       "prog"};
      task.insert(task.end(), program.begin() + 1, program.end());
      std::vector<std::string> env =
          job_env(sb, {"SLURM_PROCID=3", "SLURM_LOCALID=1", "SLURM_NTASKS=4", "SLURM_NODEID=1"});
      Run t = spawn(task, sb.work(), env);
      INFO("task: " << t.describe());
      REQUIRE(t.status == 0);
      std::vector<std::string> expected = {"3", "1", "4", "2", "1"};
      expected.insert(expected.end(), program.begin() + 1, program.end());
      CHECK(split_nul(t.out) == expected);
      CHECK(canaries(sb).empty());
    }
  }
}

TEST_CASE("hostile launch: torchrun's command and the program stay words", "[hostile]") {
  const size_t count = hostile_words("").size();
  for (size_t i = 0; i < count; ++i) {
    DYNAMIC_SECTION("value " << i) {
      Sandbox sb;
      install_slurm_stubs(sb);
      const std::string v = hostile_words(sb.root().string())[i];
      std::string script;
      auto argv = render_and_run(sb, "torchrun", v, script);
      const std::vector<std::string> torchrun = {as_program(v),
                                                 "--x=" + v,
                                                 "--nnodes=1",
                                                 "--nproc_per_node=2",
                                                 "--rdzv_backend=c10d",
                                                 "--rdzv_endpoint=127.0.0.1:24242",
                                                 "--rdzv_id=4242",
                                                 "--no_python"};
      const std::vector<std::string> program = {as_program(v), v, "", v, "--f=" + v};
      // srun ... bash -c LINE torchrun-node CONF TORCHRUN... PROGRAM...
      std::vector<std::string> expected = {"torchrun-node", ""};
      expected.insert(expected.end(), torchrun.begin(), torchrun.end());
      expected.insert(expected.end(), program.begin(), program.end());
      REQUIRE(argv.size() > expected.size() + 6);
      CHECK(tail_of(argv, expected.size()) == expected);
      const size_t at = argv.size() - expected.size();
      CHECK(std::vector<std::string>(argv.begin() + at - 6, argv.begin() + at - 3) ==
            std::vector<std::string>{"--ntasks-per-node=1", "--cpus-per-task=16", "--label"});
      CHECK(argv[at - 3] == "bash");
      CHECK(argv[at - 2] == "-c");
      // Each node's task runs that line: torchrun (a printer here) gets its words, the
      // rendezvous's is_host (0 on node 1) in PET_RDZV_CONF, torchrun's --rdzv_conf, and the
      // program's words, each one word.
      const std::vector<std::string> printer = {
          "/bin/bash", "-c", "printf '%s\\0' \"$PET_RDZV_CONF\" \"$@\"", "torchrun"};
      std::vector<std::string> task = {"/bin/bash", "-c", argv[at - 1], "torchrun-node", ""};
      task.insert(task.end(), printer.begin(), printer.end());
      task.insert(task.end(), torchrun.begin() + 1, torchrun.end());
      task.insert(task.end(), program.begin(), program.end());
      Run t = spawn(task, sb.work(), job_env(sb, {"SLURM_NODEID=1"}));
      INFO("task: " << t.describe());
      REQUIRE(t.status == 0);
      std::vector<std::string> seen = {"is_host=0"};
      seen.insert(seen.end(), torchrun.begin() + 1, torchrun.end());
      seen.insert(seen.end(), program.begin(), program.end());
      CHECK(split_nul(t.out) == seen);
      CHECK(canaries(sb).empty());
    }
  }
}

TEST_CASE("hostile launch: shellcheck is clean for values without dollar, backtick or backslash",
          "[hostile]") {
  std::string shellcheck = find_program("shellcheck");
  if (shellcheck.empty()) return hpc::test::missing_prerequisite("shellcheck is not installed");
  Sandbox sb;
  install_slurm_stubs(sb);
  std::vector<std::string> argv = {shellcheck, "-f", "gcc"};
  int n = 0;
  for (const auto& v : hostile_words("/tmp")) {
    if (v.find_first_of("$`\\") != std::string::npos) continue;
    for (const std::string mode : {"srun", "torchrun"}) {
      std::string file = "job" + std::to_string(n++) + ".sbatch";
      json project = {{"launch", mode}, {"torchrun", {{"command", {as_program(v)}}}}};
      sb.write("work/hpclaunch.json", project.dump());
      Run r = sb.hpclaunch({"render", "--preset", "2n2g", "-o", file, "--", as_program(v), v});
      INFO(r.describe());
      REQUIRE(r.status == 0);
      argv.push_back(file);
    }
  }
  REQUIRE(n >= 16);
  Run sc = spawn(argv, sb.work(), sb.env());
  INFO(sc.describe());
  CHECK(sc.status == 0);
  CHECK(sc.out.empty());
}
