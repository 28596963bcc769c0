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

// The lines from the one starting with `first` up to the one starting with `last` (each after
// main()'s indentation).
std::string section(const std::string& s, const std::string& first, const std::string& last) {
  size_t begin = s.find("\n  " + first);
  REQUIRE(begin != std::string::npos);
  size_t end = s.find("\n  " + last, begin + 1);
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

std::string job(const std::string& script) { return hpc::job_part(script); }

// The job library's line that starts with `start`.
std::string library_line(const std::string& start) {
  const std::string library(hpc::job_library_text());
  const size_t at = library.find(start);
  REQUIRE(at != std::string::npos);
  return library.substr(at, library.find('\n', at) - at);
}

TEST_CASE("launch render: srun runs the command in every task with the env:// variables",
          "[launch]") {
  std::string s = render(resolve("srun", {"python", "train.py", "--lr", "3e-4"}));
  CHECK(check_script(s).empty());
  std::string top = job(s);
  CHECK(contains(top, "cluster generic, launch srun\n"));
  CHECK(contains(top, "#SBATCH --job-name=train\n"));
  CHECK_FALSE(contains(top, "--strategy"));
  CHECK_FALSE(contains(top, "hpctrain"));
  CHECK(section(top, "hpc_srun=(", ")") ==
        "  hpc_srun=(\n"
        "    srun --export=ALL # every task gets this environment, whatever SBATCH_EXPORT was\n"
        "    --kill-on-bad-exit=1 # one failed task ends the step instead of leaving the others "
        "hanging\n"
        "    --wait=60 # seconds the others may run on after the first task exits\n"
        "    --ntasks-per-node=4 --cpus-per-task=8\n"
        "    --label # prefix each output line with its rank\n"
        "  )");
  CHECK(contains(top, "\n  hpc_program=(python train.py --lr 3e-4)\n"));
  CHECK(contains(top, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_rank_env[@]}\" 4 "
                      "\"${hpc_program[@]}\"\n}\n"));
  CHECK(contains(top, "\n  hpc_rendezvous '' resolve 20000 32767\n"));
  // The library's task words: the env:// variables from Slurm's, then the program in its place.
  const std::string library(hpc::job_library_text());
  CHECK(contains(library,
                 "hpc_rank_env=(bash -c 'export RANK=\"${SLURM_PROCID}\" "
                 "LOCAL_RANK=\"${SLURM_LOCALID}\" WORLD_SIZE=\"${SLURM_NTASKS}\" "
                 "LOCAL_WORLD_SIZE=\"$1\" NODE_RANK=\"${SLURM_NODEID}\"; shift; exec -- \"$@\"' "
                 "hpc-task)\n"));
  auto r = hpc::run_command(
      {"env", "SLURM_PROCID=5", "SLURM_LOCALID=1", "SLURM_NTASKS=8", "SLURM_NODEID=1", "bash",
       "-c",
       library_line("hpc_rank_env=(") +
           "\n\"${hpc_rank_env[@]}\" 4 sh -c 'echo $RANK $LOCAL_RANK $WORLD_SIZE "
           "$LOCAL_WORLD_SIZE $NODE_RANK \"$0\"' 'a b'"});
  REQUIRE(r.ok());
  CHECK(r.out == "5 1 8 4 1 a b\n");
  // The requeue contract for a user's program is stated in the library.
  CHECK(contains(library, "# hpctrain answers SIGNAL and TERM"));
  CHECK(contains(library, "Another\n# program that wants to be requeued handles SIGNAL and TERM"));
}

TEST_CASE("launch render: torchrun runs one agent per node with a c10d rendezvous", "[launch]") {
  std::string s = render(
      resolve("torchrun", {"python", "train.py", "--lr", "3e-4"}, "jsc", {"profile.account=p"}));
  CHECK(check_script(s).empty());
  std::string top = job(s);
  const std::string cpus = std::to_string(
      4 * resolve("torchrun", {"x"}, "jsc", {"profile.account=p"}).shape.cpus_per_gpu);
  CHECK(contains(top, "cluster jsc, launch torchrun\n"));
  CHECK(section(top, "hpc_srun=(", ")") ==
        "  hpc_srun=(\n"
        "    srun --export=ALL # every task gets this environment, whatever SBATCH_EXPORT was\n"
        "    --kill-on-bad-exit=1 # one failed task ends the step instead of leaving the others "
        "hanging\n"
        "    --wait=60 # seconds the others may run on after the first task exits\n"
        "    --ntasks=2 --ntasks-per-node=1 --cpus-per-task=" + cpus + "\n"
        "    \"--cpu-bind=none\" # profile.cpu_bind: each task's CPUs\n"
        "    \"--gpu-bind=none\" # profile.gpu_bind: which GPU(s) each task sees\n"
        "    --label # prefix each output line with its node\n"
        "  )");
  // The job itself asks one task per node with all its CPUs, so the step fits inside it.
  CHECK(contains(top, "#SBATCH --ntasks-per-node=1\n"));
  CHECK(contains(top, "#SBATCH --cpus-per-task=" + cpus + "\n"));
  CHECK(section(top, "hpc_torchrun=(", ")") ==
        "  hpc_torchrun=(torchrun --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d\n"
        "    --rdzv_endpoint=\"${MASTER_ADDR}:${MASTER_PORT}\" --rdzv_id=\"${SLURM_JOB_ID}\"\n"
        "    --no_python # the program is a command, not a .py file for torchrun's own Python\n"
        "  )");
  CHECK(contains(top, "\n  hpc_program=(python train.py --lr 3e-4)\n"));
  // Each node's task adds is_host (1 on node 0) to the --rdzv_conf, here none of the user's.
  CHECK(contains(top, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_torchrun_node[@]}\" '' \\\n"
                      "    \"${hpc_torchrun[@]}\" \"${hpc_program[@]}\"\n}\n"));
  CHECK_FALSE(contains(top, "hpc_rank_env"));
}

// What hpc_torchrun_node gives torchrun on node N, from the library's own words.
std::string torchrun_conf(const std::string& node, const std::string& conf) {
  const std::string line = library_line("hpc_torchrun_node=(");
  auto r = hpc::run_command({"env", "SLURM_NODEID=" + node, "bash", "-c",
                             line + "\n\"${hpc_torchrun_node[@]}\" \"$1\" "
                                    "sh -c 'printf \"%s|%s\" \"$PET_RDZV_CONF\" \"$*\"' x y",
                             "bash", conf});
  REQUIRE(r.ok());
  return r.out;
}

TEST_CASE("launch render: a --rdzv_conf of torchrun.command gets is_host added, not replaced",
          "[launch]") {
  auto spec = resolve("torchrun", {"python", "train.py"}, "generic",
                      {R"(torchrun.command=["torchrun", "--rdzv_conf=join_timeout=900"])"});
  std::string s = render(spec);
  CHECK(check_script(s).empty());
  std::string top = job(s);
  CHECK(contains(top, " \"${hpc_torchrun_node[@]}\" join_timeout=900 \\\n"));
  CHECK_FALSE(contains(section(top, "hpc_torchrun=(", ")"), "rdzv_conf"));  // taken out
  // What a node's task gives torchrun (PET_RDZV_CONF, its --rdzv_conf): the user's keys, then
  // is_host; a user's is_host stays.
  CHECK(torchrun_conf("0", "join_timeout=900") == "join_timeout=900,is_host=1|y");
  CHECK(torchrun_conf("1", "join_timeout=900") == "join_timeout=900,is_host=0|y");
  CHECK(torchrun_conf("1", "") == "is_host=0|y");
  CHECK(torchrun_conf("1", "is_host=1") == "is_host=1|y");
  spec = resolve("torchrun", {"python", "train.py"}, "generic",
                 {R"(torchrun.command=["torchrun", "--rdzv_conf", "$(touch /tmp/x),a=1"])"});
  s = render(spec);
  CHECK(check_script(s).empty());
  CHECK(contains(job(s), " \"${hpc_torchrun_node[@]}\" \"\\$(touch /tmp/x),a=1\" \\\n"));
}

TEST_CASE("launch render: torchrun runs a .py file with its own Python, and any launcher",
          "[launch]") {
  std::string s =
      render(resolve("torchrun", {"train.py"}, "generic",
                     {R"(torchrun.command=["python3", "-m", "torch.distributed.run"])"}));
  CHECK(check_script(s).empty());
  CHECK(section(job(s), "hpc_torchrun=(", ")") ==
        "  hpc_torchrun=(python3 -m torch.distributed.run --nnodes=2 --nproc_per_node=4 "
        "--rdzv_backend=c10d\n"
        "    --rdzv_endpoint=\"${MASTER_ADDR}:${MASTER_PORT}\" --rdzv_id=\"${SLURM_JOB_ID}\"\n"
        "  )");
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
    std::string top = job(s);
    // Every word is one array element: bash itself reads the array back unchanged.
    size_t at = top.find("\n  hpc_program=(");
    REQUIRE(at != std::string::npos);
    std::string program = top.substr(at + 1, top.find("\n  hpc_record_start", at) - at);
    auto r = hpc::run_command({"bash", "-c", program + "\nprintf '%s\\0' \"${hpc_program[@]}\""});
    REQUIRE(r.ok());
    std::string expected = std::string("python") + '\0';
    for (const auto& w : hostile) expected += w + '\0';
    CHECK(r.out == expected);
    if (mode == "torchrun") {
      std::string launcher = section(top, "hpc_torchrun=(", ")");
      auto t = hpc::run_command(
          {"bash", "-c", launcher + "\nprintf '%s\\n' \"${hpc_torchrun[@]:0:2}\""});
      REQUIRE(t.ok());
      CHECK(t.out == "torch run\n$(id)\n");
    }
  }
}
