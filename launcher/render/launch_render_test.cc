// The launch section of the built-in template per mode: the exact srun/torchrun command lines,
// the per-rank variables, the user's argv quoted, and bash -n + shellcheck clean.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "render/builtin_testing.h"
#include "render/render.h"
#include "subprocess.h"
#include "support/prerequisite.h"

namespace fs = std::filesystem;

namespace {

hpc::Spec resolve(const std::string& launch, std::vector<std::string> words,
                  const std::string& cluster = "generic", std::vector<std::string> sets = {}) {
  hpc::SpecRequest r = hpc::testing::builtin_request("2n4g", cluster, std::move(sets));
  r.launch = launch;
  r.trainer_args = std::move(words);
  return hpc::testing::resolve_builtin(r);
}

std::string render(const hpc::Spec& spec) { return hpc::testing::render_builtin(spec); }

// The lines from the one starting with `first` up to the one starting with `last`.
std::string section(const std::string& s, const std::string& first, const std::string& last) {
  size_t begin = s.find("\n" + first);
  REQUIRE(begin != std::string::npos);
  size_t end = s.find("\n" + last, begin + 1);
  REQUIRE(end != std::string::npos);
  return s.substr(begin + 1, s.find('\n', end + 1) - begin - 1);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// bash -n and shellcheck on the script; "" when both are clean.
std::string check_script(const std::string& script) {
  char tmpl[] = "/tmp/hpclaunch-launch-render-XXXXXX";
  fs::path dir = mkdtemp(tmpl);
  fs::path file = dir / "job.sbatch";
  std::ofstream(file) << script;
  std::string problems;
  auto bash = hpc::run_command({"bash", "-n", file.string()});
  if (!bash.ok()) problems += bash.summary("bash -n") + "\n";
  if (hpc::program_on_path("shellcheck")) {
    auto sc = hpc::run_command({"shellcheck", "--shell=bash", "--format=gcc", file.string()});
    if (!sc.ok()) problems += sc.out + sc.err;
  } else {
    hpc::test::missing_prerequisite("shellcheck is not installed");
  }
  fs::remove_all(dir);
  return problems;
}

}  // namespace

TEST_CASE("launch render: srun runs the command in every task with the env:// variables",
          "[launch]") {
  std::string s = render(resolve("srun", {"python", "train.py", "--lr", "3e-4"}));
  CHECK(check_script(s).empty());
  CHECK(contains(s, "cluster generic, launch srun\n"));
  CHECK(contains(s, "#SBATCH --job-name=train\n"));
  CHECK_FALSE(contains(s, "--strategy"));
  CHECK_FALSE(contains(s, "hpctrain train"));
  CHECK(section(s, "hpc_srun=(", ")") ==
        "hpc_srun=(\n"
        "  srun\n"
        "  --export=ALL # this shell's environment reaches every task, whatever SBATCH_EXPORT "
        "was\n"
        "  --kill-on-bad-exit=1 # one failed rank ends the step instead of leaving the others "
        "hanging\n"
        "  --wait=60 # seconds the others may run on after the first task exits\n"
        "  --ntasks-per-node=4\n"
        "  --cpus-per-task=8\n"
        "  --label # prefix each output line with its rank\n"
        ")");
  CHECK(contains(s,
                 "hpc_task=(bash -c 'export RANK=\"${SLURM_PROCID}\" "
                 "LOCAL_RANK=\"${SLURM_LOCALID}\" WORLD_SIZE=\"${SLURM_NTASKS}\" "
                 "LOCAL_WORLD_SIZE=4 NODE_RANK=\"${SLURM_NODEID}\"; exec -- \"$@\"' hpc-task)\n"));
  CHECK(section(s, "hpc_program=(", ")") ==
        "hpc_program=(\n  python\n  train.py\n  --lr\n  3e-4\n)");
  CHECK(contains(s, "\n\"${hpc_srun[@]}\" \"${hpc_task[@]}\" \"${hpc_program[@]}\" &\n"));
  CHECK(contains(s, "export MASTER_ADDR\n"));
  CHECK(contains(s, "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 12768))\n"));
  // The requeue contract is stated for a user's program.
  CHECK(contains(s, "# A program that wants to be requeued handles USR1 and TERM"));
  CHECK(contains(s, "trap 'hpc_forward_stop USR1' USR1\ntrap 'hpc_forward_stop TERM' TERM\n"));
}

TEST_CASE("launch render: torchrun runs one agent per node with a c10d rendezvous", "[launch]") {
  std::string s = render(
      resolve("torchrun", {"python", "train.py", "--lr", "3e-4"}, "jsc", {"profile.account=p"}));
  CHECK(check_script(s).empty());
  CHECK(contains(s, "cluster jsc, launch torchrun\n"));
  CHECK(section(s, "hpc_srun=(", ")") ==
        "hpc_srun=(\n"
        "  srun\n"
        "  --export=ALL # this shell's environment reaches every task, whatever SBATCH_EXPORT "
        "was\n"
        "  --kill-on-bad-exit=1 # one failed node ends the step instead of leaving the others "
        "hanging\n"
        "  --wait=60 # seconds the others may run on after the first task exits\n"
        "  --ntasks=2 # one per node, as the job asks\n"
        "  --ntasks-per-node=1\n"
        "  --cpus-per-task=" +
            std::to_string(
                4 * resolve("torchrun", {"x"}, "jsc", {"profile.account=p"}).shape.cpus_per_gpu) +
            " # every CPU of the node's 4 GPU slot(s)\n"
            "  \"--cpu-bind=none\" # profile.cpu_bind: each task's CPUs; OMP_NUM_THREADS = its CPU "
            "count\n"
            "  \"--gpu-bind=none\" # profile.gpu_bind: which GPU(s) each task sees\n"
            "  --label # prefix each output line with its node index (one task per node)\n"
            ")");
  // The job itself asks one task per node with all its CPUs, so the step fits inside it.
  CHECK(contains(s, "#SBATCH --ntasks-per-node=1\n"));
  CHECK(contains(
      s, "#SBATCH --cpus-per-task=" +
             std::to_string(
                 4 * resolve("torchrun", {"x"}, "jsc", {"profile.account=p"}).shape.cpus_per_gpu) +
             "\n"));
  CHECK(section(s, "hpc_torchrun=(", ")") ==
        "hpc_torchrun=(\n"
        "  torchrun\n"
        "  --nnodes=2\n"
        "  --nproc_per_node=4\n"
        "  --rdzv_backend=c10d\n"
        "  --rdzv_endpoint=\"${MASTER_ADDR}:${MASTER_PORT}\"\n"
        "  --rdzv_id=\"${SLURM_JOB_ID}\"\n"
        "  --no_python # the program is a command, not a .py file for torchrun's own Python\n"
        ")");
  CHECK(section(s, "hpc_program=(", ")") ==
        "hpc_program=(\n  python\n  train.py\n  --lr\n  3e-4\n)");
  // Each node's task adds is_host (1 on node 0) to the --rdzv_conf, here none of the user's.
  CHECK(contains(s, "\nhpc_rdzv_conf=''\n"));
  CHECK(contains(s, "is_host=$((SLURM_NODEID == 0 ? 1 : 0))"));
  CHECK(contains(s, "\n\"${hpc_srun[@]}\" bash -c \"${hpc_torchrun_node}\" torchrun-node "
                    "\"${#hpc_torchrun[@]}\" \"${hpc_rdzv_conf}\" \"${hpc_torchrun[@]}\" "
                    "\"${hpc_program[@]}\" &\n"));
  CHECK_FALSE(contains(s, "hpc_task="));
}

TEST_CASE("launch render: a --rdzv_conf of torchrun.command gets is_host added, not replaced",
          "[launch]") {
  auto spec = resolve("torchrun", {"python", "train.py"}, "generic",
                      {R"(torchrun.command=["torchrun", "--rdzv_conf=join_timeout=900"])"});
  std::string s = render(spec);
  CHECK(check_script(s).empty());
  CHECK(contains(s, "\nhpc_rdzv_conf=join_timeout=900\n"));
  CHECK_FALSE(contains(s, "  --rdzv_conf"));  // taken out of the command
  // What a node's task runs: the user's keys, then is_host.
  const std::string snippet = s.substr(s.find("hpc_torchrun_node='") + 19);
  CHECK(snippet.find("c+=\"${c:+,}is_host=") != std::string::npos);
  spec = resolve("torchrun", {"python", "train.py"}, "generic",
                 {R"(torchrun.command=["torchrun", "--rdzv_conf", "$(touch /tmp/x),a=1"])"});
  s = render(spec);
  CHECK(check_script(s).empty());
  CHECK(contains(s, "\nhpc_rdzv_conf=\"\\$(touch /tmp/x),a=1\"\n"));  // a user's value: text
}

TEST_CASE("launch render: torchrun runs a .py file with its own Python, and any launcher",
          "[launch]") {
  std::string s =
      render(resolve("torchrun", {"train.py"}, "generic",
                     {R"(torchrun.command=["python3", "-m", "torch.distributed.run"])"}));
  CHECK(check_script(s).empty());
  CHECK(section(s, "hpc_torchrun=(", ")") ==
        "hpc_torchrun=(\n"
        "  python3\n"
        "  -m\n"
        "  torch.distributed.run\n"
        "  --nnodes=2\n"
        "  --nproc_per_node=4\n"
        "  --rdzv_backend=c10d\n"
        "  --rdzv_endpoint=\"${MASTER_ADDR}:${MASTER_PORT}\"\n"
        "  --rdzv_id=\"${SLURM_JOB_ID}\"\n"
        ")");
}

TEST_CASE("launch render: the user's argv and torchrun command stay quoted text", "[launch]") {
  const std::vector<std::string> hostile = {"$(touch /tmp/hpc-pwned)",
                                            "a b",
                                            "`id`",
                                            "x;y",
                                            "'q'",
                                            "\"dq\"",
                                            "*",
                                            "line\nbreak",
                                            "$HOME"};
  std::vector<std::string> words = {"python"};
  words.insert(words.end(), hostile.begin(), hostile.end());
  for (const std::string mode : {"srun", "torchrun"}) {
    std::string s =
        render(resolve(mode, words, "generic", {R"j(torchrun.command=["torch run", "$(id)"])j"}));
    CHECK(check_script(s).empty());
    // Every word is one array element: bash itself reads the array back unchanged.
    std::string program = section(s, "hpc_program=(", ")");
    auto r = hpc::run_command({"bash", "-c", program + "\nprintf '%s\\0' \"${hpc_program[@]}\""});
    REQUIRE(r.ok());
    std::string expected = std::string("python") + '\0';
    for (const auto& w : hostile) expected += w + '\0';
    CHECK(r.out == expected);
    if (mode == "torchrun") {
      std::string launcher = section(s, "hpc_torchrun=(", ")");
      auto t = hpc::run_command(
          {"bash", "-c", launcher + "\nprintf '%s\\n' \"${hpc_torchrun[@]:0:2}\""});
      REQUIRE(t.ok());
      CHECK(t.out == "torch run\n$(id)\n");
    }
  }
}
