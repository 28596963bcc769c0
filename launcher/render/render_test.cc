#include "render/render.h"
#include "render/builtin_testing.h"

#include <catch2/catch.hpp>

#include "error.h"

namespace fs = std::filesystem;

namespace {

hpc::Spec resolve(const std::string& preset, const std::string& cluster,
                  std::vector<std::string> sets = {}) {
  hpc::SpecRequest r = hpc::testing::builtin_request(preset, cluster, std::move(sets));
  r.strategy = "fsdp";
  return hpc::testing::resolve_builtin(r);
}

std::string render(const hpc::Spec& spec) { return hpc::testing::render_builtin(spec); }

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The job part of a script: everything above the job library's marker line.
std::string job(const std::string& script) {
  REQUIRE(hpc::job_library_offset(script) != std::string::npos);
  return hpc::job_part(script);
}

const std::string& library() {
  static const std::string text(hpc::job_library_text());
  return text;
}

}  // namespace

TEST_CASE("render: GPU request syntax follows the cluster profile", "[render]") {
  auto generic = hpc::sbatch_directives(resolve("2n4g", "generic"));
  CHECK(std::find(generic.begin(), generic.end(), "--gpus-per-node=4") != generic.end());
  const std::vector<std::string> daic_needs = {"profile.account=g", "shape.mem_per_gpu=8G"};
  auto daic = hpc::sbatch_directives(resolve("1n2g", "daic", daic_needs));
  CHECK(std::find(daic.begin(), daic.end(), "--gres=gpu:2") != daic.end());
  auto typed = hpc::sbatch_directives(resolve(
      "1n2g", "daic", {"profile.gpu_type=a40", "profile.account=g", "shape.mem_per_gpu=8G"}));
  CHECK(std::find(typed.begin(), typed.end(), "--gres=gpu:a40:2") != typed.end());
}

TEST_CASE("render: the script's parts come in the documented order", "[render]") {
  // jsc.json sets no env of its own: the profile's env goes between OMP_NUM_THREADS and the nodes.
  std::string s = render(resolve(
      "2n4g", "jsc",
      {"profile.account=p", R"(profile.env.UCX_RC_TIMEOUT={"value": "4s", "reason": "a site"})"}));
  std::vector<std::string> order = {"#!/bin/bash",
                                    "# Spec: sha256 ",
                                    "#   presets/clusters/jsc.json (profile jsc)\n",
                                    "#SBATCH --job-name=",
                                    "set -euo pipefail",
                                    "main() {\n  hpc_job_start --no-mem #",
                                    "  hpc_module load Stages/2025\n",
                                    "  export OMP_NUM_THREADS=",
                                    "  export UCX_RC_TIMEOUT=4s\n",
                                    "  hpc_rendezvous i resolve 20000 32767\n",
                                    "  hpc_requeue_on USR1 3 #",
                                    "--kill-on-bad-exit=1",
                                    "--strategy fsdp",
                                    "  hpc_launch \"${hpc_srun[@]}\" \"${hpc_train[@]}\"\n}\n",
                                    "\n# --- hpclaunch job library",
                                    "scontrol requeue",
                                    "\nmain \"$@\"\n"};
  size_t at = 0;
  for (const auto& part : order) {
    INFO(part);
    size_t found = s.find(part, at);
    REQUIRE(found != std::string::npos);
    at = found;
  }
  CHECK(s.size() == at + 11);  // the file ends with the call to main
  CHECK(contains(s, "#SBATCH --signal=B:USR1@90"));
  CHECK(contains(s, "  # a site\n"));  // the reason, as a comment
}

TEST_CASE("render: the job library is the same in every script, the job above it short",
          "[render]") {
  struct Case {
    const char* preset;
    const char* cluster;
    const char* launch;
    std::vector<std::string> sets;
    size_t budget;  // lines above the marker
  };
  const std::vector<std::string> jsc = {"profile.account=p"};
  const std::vector<std::string> daic = {"profile.account=p", "shape.mem_per_gpu=8G"};
  const std::vector<std::string> bask = {"profile.account=p", "profile.qos=q"};
  const std::vector<Case> cases = {
      {"2n4g", "jsc", "torchrun", jsc, 80},
      {"1n1g", "generic", "hpctrain", {}, 80},
      {"2n2g", "daic", "srun", daic, 90},
      {"1n4g", "baskerville", "hpctrain", bask, 90},
      {"2n4g", "generic", "srun", {"container.runtime=apptainer", "container.image=/i.sif"}, 90},
      {"2n4g", "generic", "hpctrain", {"job.array=0-3", "job.preflight.enabled=true"}, 90},
      {"1n2g", "generic", "torchrun", {"container.runtime=pyxis", "container.image=nv/pt"}, 90},
  };
  for (const auto& c : cases) {
    hpc::SpecRequest r = hpc::testing::builtin_request(c.preset, c.cluster, c.sets);
    if (std::string(c.launch) == "hpctrain") {
      r.strategy = "ddp";
    } else {
      r.launch = c.launch;
      r.trainer_args = std::vector<std::string>{"python", "train.py"};
    }
    std::string s = render(hpc::testing::resolve_builtin(r));
    INFO(c.preset << " on " << c.cluster << ", " << c.launch);
    std::string top = job(s);
    CHECK(s.substr(top.size()) == library());
    CHECK(static_cast<size_t>(std::count(top.begin(), top.end(), '\n')) <= c.budget);
    CHECK_FALSE(contains(top, "\n\n\n"));
  }
  // hpclaunch shell's script too.
  hpc::RenderContext shell{"0.1.0", {"hpclaunch", "shell"}, true};
  std::string s = hpc::testing::builtin_template().render(resolve("1n2g", "generic"), shell);
  CHECK(s.substr(job(s).size()) == library());
  CHECK(contains(job(s), "  hpc_shell 2\n}\n"));
}

TEST_CASE("render: the header names each layer of the spec", "[render]") {
  hpc::SpecRequest r = hpc::testing::builtin_request("2n4g", "jsc", {"profile.account=p"});
  r.strategy = "ddp";
  r.env_pass = {"WANDB_API_KEY"};
  std::string s = job(render(hpc::testing::resolve_builtin(r)));
  CHECK(contains(s, "# Spec: sha256 "));
  CHECK(contains(s, "\n#   presets/defaults.json (defaults)\n"
                    "#   presets/shapes/2n4g.json (preset 2n4g)\n"
                    "#   presets/clusters/jsc.json (profile jsc)\n"
                    "#   --set profile.account=p\n"
                    "#   --env-pass WANDB_API_KEY\n"));
}

TEST_CASE("render: NCCL_P2P_DISABLE=auto reads nvidia-smi topo at job start", "[render]") {
  std::string s = render(resolve("1n4g", "generic",
                                 {"profile.nccl.NCCL_P2P_DISABLE.value=auto",
                                  "profile.nccl.NCCL_P2P_DISABLE.reason=decide per node"}));
  CHECK(contains(s, "nvidia-smi topo -m"));
  CHECK_FALSE(contains(s, "export NCCL_P2P_DISABLE=auto"));
}

TEST_CASE("render: no requeue handling when signal_seconds is 0", "[render]") {
  std::string s = job(render(resolve("1n1g", "generic", {"job.signal_seconds=0"})));
  CHECK_FALSE(contains(s, "--signal"));
  CHECK_FALSE(contains(s, "--requeue"));
  CHECK_FALSE(contains(s, "hpc_requeue_on"));
}

TEST_CASE("render: skipped sections leave no blank-line debris", "[render]") {
  std::string s = render(resolve("1n1g", "generic"));
  CHECK_FALSE(contains(s, "\n\n\n"));
  CHECK_FALSE(contains(s, "\x01"));
}

TEST_CASE("render: a broken template is reported with its file", "[render]") {
  CHECK_THROWS_WITH(hpc::ScriptTemplate::from_text("{{#open}} never closed", "my.mustache"),
                    Catch::Contains("my.mustache") && Catch::Contains("does not parse"));
}

TEST_CASE("render: a template naming an unknown variable is refused", "[render]") {
  CHECK_THROWS_WITH(
      hpc::ScriptTemplate::from_text("#!/bin/bash\necho {{ job_nmae }}\n", "t.mustache"),
      Catch::Contains("t.mustache:2:6") && Catch::Contains("{{job_nmae}}"));
  CHECK_THROWS_WITH(hpc::ScriptTemplate::from_text("main() {\n{{#sbatchh}}{{/sbatchh}}}", "t"),
                    Catch::Contains("t:2:1") && Catch::Contains("\"sbatch\""));
  CHECK_NOTHROW(hpc::ScriptTemplate::from_text(
      "{{! a comment }}{{=<% %>=}}<%={{ }}=%>main() {\n{{#sbatch}}{{{directive}}}{{/sbatch}}}",
      "ok"));
  // A template from before the job library (the whole script, no main) is refused.
  CHECK_THROWS_WITH(hpc::ScriptTemplate::from_text("#!/bin/bash\nsrun x\n", "old.mustache"),
                    Catch::Contains("old.mustache") && Catch::Contains("defines no main()"));
}

TEST_CASE("render: the site environment comes in order, before the job's own environment",
          "[render][siteenv]") {
  std::string s = render(
      resolve("1n1g", "jsc",
              {"profile.account=p", "profile.module_purge=force", "profile.setup=[\"echo set up\"]",
               "profile.python.venv=~/venvs/train", "job.env_from_submit=[\"WANDB_API_KEY\"]",
               R"(profile.env.UCX_RC_TIMEOUT={"value": "4s", "reason": "a site"})"}));
  std::vector<std::string> order = {"  hpc_module --force purge #",
                                    "  hpc_module load Stages/2025\n",
                                    "\necho set up\n",
                                    "  hpc_venv \"${HOME}\"/venvs/train #",
                                    "  hpc_passed WANDB_API_KEY #",
                                    "  export UCX_RC_TIMEOUT=4s\n",
                                    "  # --- rendezvous",
                                    "    srun --export=ALL"};
  size_t at = 0;
  for (const auto& part : order) {
    INFO(part);
    size_t found = s.find(part, at);
    REQUIRE(found != std::string::npos);
    at = found;
  }
  CHECK_FALSE(contains(job(s), "conda"));
}

TEST_CASE("render: a relative venv path gets ./, a conda name stays a name", "[render][siteenv]") {
  CHECK(contains(render(resolve("1n1g", "generic", {"profile.python.venv=-v/env"})),
                 "  hpc_venv ./-v/env #"));
  CHECK(contains(render(resolve("1n1g", "generic", {"profile.python.conda=train"})),
                 "  hpc_conda train #"));
}

TEST_CASE("render: arrays, dependencies, mail and --exclusive become #SBATCH lines", "[render]") {
  auto spec = resolve("1n2g", "generic",
                      {"job.array=0-2%1", "job.after=[\"12\", \"13:afterany\", \"14\"]",
                       "job.mail_type=[\"end\", \"FAIL\"]", "job.mail_user=ada@example.org",
                       "profile.exclusive=true"});
  auto d = hpc::sbatch_directives(spec);
  auto has = [&](const std::string& line) {
    return std::find(d.begin(), d.end(), line) != d.end();
  };
  CHECK(has("--array=0-2%1"));
  CHECK(has("--dependency=afterok:12:14,afterany:13"));
  CHECK(has("--mail-type=END,FAIL"));
  CHECK(has("--mail-user=ada@example.org"));
  CHECK(has("--exclusive"));
  // One log per task: the default pattern switches to the array's id and the task index.
  CHECK(has("--output=%x-%A_%a.out"));
  CHECK(spec.resolved["job"]["output"] == "%x-%A_%a.out");
  CHECK(spec.job.array_indexes.indexes == std::vector<long>{0, 1, 2});
  // A pattern the user chose stays, if each task writes its own file.
  auto own = resolve("1n2g", "generic", {"job.array=0-2", "job.output=t-%a.log"});
  auto od = hpc::sbatch_directives(own);
  CHECK(std::find(od.begin(), od.end(), "--output=t-%a.log") != od.end());
  CHECK_THROWS_WITH(resolve("1n2g", "generic", {"job.array=0-2", "job.output=one.log"}),
                    Catch::Matchers::Contains("one file for every task of the array"));
  // Without the keys, none of the lines.
  auto plain = hpc::sbatch_directives(resolve("1n2g", "generic"));
  for (const auto& line : plain) {
    CHECK(line.rfind("--array", 0) != 0);
    CHECK(line.rfind("--dependency", 0) != 0);
    CHECK(line.rfind("--mail", 0) != 0);
    CHECK(line != "--exclusive");
  }
}

TEST_CASE("render: job.signal names the warning signal, the trap and TERM's forward", "[render]") {
  std::string usr1 = job(render(resolve("2n2g", "generic")));
  CHECK(contains(usr1, "#SBATCH --signal=B:USR1@90\n"));
  CHECK(contains(usr1, "\n  hpc_requeue_on USR1 3 #"));
  std::string usr2 = job(render(resolve("2n2g", "generic", {"job.signal=USR2"})));
  CHECK(contains(usr2, "#SBATCH --signal=B:USR2@90\n"));
  CHECK(contains(usr2, "\n  hpc_requeue_on USR2 3 #"));
  CHECK_FALSE(contains(usr2, "USR1"));
  // The library: the signal's trap, TERM's, and the forward to srun of the signal named.
  CHECK(contains(library(), "trap \"hpc_forward_stop ${hpc_requeue_signal}\" "
                            "\"${hpc_requeue_signal}\"\n  trap 'hpc_forward_stop TERM' TERM\n"));
  CHECK(contains(library(), "kill \"-${hpc_requeue_signal}\" \"${hpc_srun_pid}\""));
  // The requeue is the marker's: no rule on srun's status 75 alone.
  CHECK(contains(library(), "export HPCLAUNCH_REQUEUE_MARKER="));
  CHECK(contains(library(), "\"${marker}\" == \"restart=${hpc_restarts}\""));
  CHECK_FALSE(contains(library(), "if ((hpc_status == 75))"));
}

TEST_CASE("render: profile.cpu_bind and gpu_bind become srun options, absent ones nothing",
          "[render]") {
  std::string none = render(resolve("2n2g", "generic"));
  CHECK_FALSE(contains(none, "--cpu-bind"));
  CHECK_FALSE(contains(none, "--gpu-bind"));
  CHECK(contains(none, "export SRUN_CPUS_PER_TASK=\"${SLURM_CPUS_PER_TASK:-1}\"\n"));
  std::string bound = render(
      resolve("2n2g", "generic", {"profile.cpu_bind=map_cpu:0,8", "profile.gpu_bind=closest"}));
  CHECK(contains(bound, " --cpus-per-task=8\n    \"--cpu-bind=map_cpu:0,8\" # profile.cpu_bind"));
  CHECK(contains(bound, "\n    \"--gpu-bind=closest\" # profile.gpu_bind"));
}

TEST_CASE("render: the guards at the top and at the rendezvous", "[render]") {
  // The job starts with the guard; it stops a script run outside Slurm before anything else.
  std::string top = job(render(resolve("2n2g", "generic")));
  CHECK(top.find("\n  hpc_job_start ") < top.find("\n  hpc_rendezvous "));
  const std::string& s = library();
  const size_t start = s.find("hpc_job_start() {\n");
  REQUIRE(start != std::string::npos);
  CHECK(s.find("  if [[ -z \"${SLURM_JOB_ID:-}\" || -z \"${SLURM_JOB_NODELIST:-}\" ]]; then\n",
               start) == s.find('\n', start) + 1);
  CHECK(s.find("exit 2", start) < s.find("export SRUN_CPUS_PER_TASK", start));
  // One node: the loopback, on purpose; several: a loopback address is refused.
  CHECK(contains(s, "    MASTER_ADDR=127.0.0.1\n"));
  CHECK(contains(s, "if [[ \"${master_ip}\" == 127.* && \"${node_addr}\" != 127.* ]]"));
}

TEST_CASE("render: the node check runs before training only with job.preflight.enabled",
          "[render]") {
  std::string off = job(render(resolve("2n4g", "generic")));
  CHECK_FALSE(contains(off, "hpc_node_check"));

  std::string on = job(render(resolve(
      "2n4g", "generic",
      {"job.preflight.enabled=true", "job.preflight.margin=7", "job.preflight.timeout=90",
       "trainer.program=/opt/hpctrain"})));
  // Launch hpctrain: its program; margin 7 %, 90 s, the node's 32 CPUs.
  const size_t check = on.find("\n  hpc_node_check /opt/hpctrain 7 90 32\n");
  REQUIRE(check != std::string::npos);
  CHECK(check > on.find("\n  hpc_rendezvous "));  // after the rendezvous: it needs the hosts
  CHECK(check < on.find("hpc_train=("));           // before the training step
  // The library: hpctrain's --margin as a fraction, one task per node, the time bound.
  const std::string& s = library();
  CHECK(contains(s, "fraction=$(printf '0.%02d' \"${margin}\")"));
  CHECK(contains(s, "--margin \"${fraction}\" --slow-nodes-file"));
  CHECK(contains(s, "timeout --kill-after=10 \"${timeout}\" srun"));
  CHECK(contains(s, "--ntasks=\"${#hpc_hosts[@]}\" --ntasks-per-node=1"));
  CHECK(contains(s, "scontrol requeuehold"));
  // Its own requeue does not count against job.max_requeues.
  CHECK(contains(s, "if ((hpc_restarts >= hpc_max_requeues + hpc_check_requeues)); then"));

  // Another launch mode: hpctrain from PATH unless job.preflight.hpctrain names one.
  hpc::SpecRequest r =
      hpc::testing::builtin_request("2n4g", "generic", {"job.preflight.enabled=true"});
  r.launch = "srun";
  r.trainer_args = std::vector<std::string>{"python3", "train.py"};
  CHECK(contains(render(hpc::testing::resolve_builtin(r)), "  hpc_node_check hpctrain "));
}
