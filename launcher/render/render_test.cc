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
                                    "#SBATCH --job-name=",
                                    "set -euo pipefail",
                                    "module load Stages/2025",
                                    "export OMP_NUM_THREADS=",
                                    "export UCX_RC_TIMEOUT=4s",
                                    "scontrol show hostnames",
                                    "hpc_ib_suffix=i",
                                    "getent ahostsv4",
                                    "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 12768))",
                                    "trap 'hpc_forward_stop USR1' USR1",
                                    "--kill-on-bad-exit=1",
                                    "--strategy fsdp",
                                    "scontrol requeue"};
  size_t at = 0;
  for (const auto& part : order) {
    INFO(part);
    size_t found = s.find(part, at);
    REQUIRE(found != std::string::npos);
    at = found;
  }
  CHECK(contains(s, "#SBATCH --signal=B:USR1@90"));
  CHECK(contains(s, "# a site\n"));  // the reason, as a comment
}

TEST_CASE("render: NCCL_P2P_DISABLE=auto reads nvidia-smi topo at job start", "[render]") {
  std::string s = render(resolve("1n4g", "generic",
                                 {"profile.nccl.NCCL_P2P_DISABLE.value=auto",
                                  "profile.nccl.NCCL_P2P_DISABLE.reason=decide per node"}));
  CHECK(contains(s, "nvidia-smi topo -m"));
  CHECK_FALSE(contains(s, "export NCCL_P2P_DISABLE=auto"));
}

TEST_CASE("render: no requeue handling when signal_seconds is 0", "[render]") {
  std::string s = render(resolve("1n1g", "generic", {"job.signal_seconds=0"}));
  CHECK_FALSE(contains(s, "--signal"));
  CHECK_FALSE(contains(s, "hpc_forward_stop"));
  CHECK_FALSE(contains(s, "HPCLAUNCH_REQUEUE_MARKER"));
  CHECK_FALSE(contains(s, "scontrol requeue"));
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
      hpc::ScriptTemplate::from_text("#!/bin/bash\necho {{job_nmae}}\n", "t.mustache"),
      Catch::Contains("t.mustache:2:6") && Catch::Contains("{{job_nmae}}"));
  CHECK_NOTHROW(hpc::ScriptTemplate::from_text("{{#sbatch}}{{{directive}}}{{/sbatch}}", "ok"));
}

TEST_CASE("render: the site environment comes in order, before the job's own environment",
          "[render][siteenv]") {
  std::string s = render(
      resolve("1n1g", "jsc",
              {"profile.account=p", "profile.module_purge=force", "profile.setup=[\"echo set up\"]",
               "profile.python.venv=~/venvs/train", "job.env_from_submit=[\"WANDB_API_KEY\"]",
               R"(profile.env.UCX_RC_TIMEOUT={"value": "4s", "reason": "a site"})"}));
  std::vector<std::string> order = {"if ! type module >/dev/null 2>&1; then",
                                    "if ! module --force purge; then",
                                    "if ! module load Stages/2025; then",
                                    "echo set up",
                                    "hpc_venv=\"${HOME}\"/venvs/train",
                                    "source \"${hpc_venv}/bin/activate\"",
                                    "  WANDB_API_KEY\n",
                                    "export SLURM_EXPORT_ENV=ALL",
                                    "export UCX_RC_TIMEOUT=4s",
                                    "# --- rendezvous",
                                    "  --export=ALL"};
  size_t at = 0;
  for (const auto& part : order) {
    INFO(part);
    size_t found = s.find(part, at);
    REQUIRE(found != std::string::npos);
    at = found;
  }
  CHECK_FALSE(contains(s, "conda activate"));
}

TEST_CASE("render: a relative venv path gets ./, a conda name stays a name", "[render][siteenv]") {
  CHECK(contains(render(resolve("1n1g", "generic", {"profile.python.venv=-v/env"})),
                 "hpc_venv=./-v/env\n"));
  CHECK(contains(render(resolve("1n1g", "generic", {"profile.python.conda=train"})),
                 "hpc_conda_env=train\n"));
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
  std::string usr1 = render(resolve("2n2g", "generic"));
  CHECK(contains(usr1, "#SBATCH --signal=B:USR1@90\n"));
  CHECK(contains(usr1, "trap 'hpc_forward_stop USR1' USR1\ntrap 'hpc_forward_stop TERM' TERM\n"));
  CHECK(contains(usr1, "kill -USR1 \"${hpc_srun_pid}\""));
  std::string usr2 = render(resolve("2n2g", "generic", {"job.signal=USR2"}));
  CHECK(contains(usr2, "#SBATCH --signal=B:USR2@90\n"));
  CHECK(contains(usr2, "trap 'hpc_forward_stop USR2' USR2\ntrap 'hpc_forward_stop TERM' TERM\n"));
  CHECK(contains(usr2, "kill -USR2 \"${hpc_srun_pid}\""));
  CHECK_FALSE(contains(usr2, "USR1"));
  // The requeue is the marker's: no rule on srun's status 75 alone.
  CHECK(contains(usr2, "export HPCLAUNCH_REQUEUE_MARKER="));
  CHECK(contains(usr2, "\"${hpc_marker}\" == \"restart=${hpc_restarts}\""));
  CHECK_FALSE(contains(usr2, "if ((hpc_status == 75))"));
}

TEST_CASE("render: profile.cpu_bind and gpu_bind become srun options, absent ones nothing",
          "[render]") {
  std::string none = render(resolve("2n2g", "generic"));
  CHECK_FALSE(contains(none, "--cpu-bind"));
  CHECK_FALSE(contains(none, "--gpu-bind"));
  CHECK(contains(none, "export SRUN_CPUS_PER_TASK=\"${SLURM_CPUS_PER_TASK:-1}\"\n"));
  std::string bound = render(
      resolve("2n2g", "generic", {"profile.cpu_bind=map_cpu:0,8", "profile.gpu_bind=closest"}));
  CHECK(contains(bound, "  --cpus-per-task=8\n  \"--cpu-bind=map_cpu:0,8\" # profile.cpu_bind"));
  CHECK(contains(bound, "\n  \"--gpu-bind=closest\" # profile.gpu_bind"));
}

TEST_CASE("render: the guards at the top and at the rendezvous", "[render]") {
  std::string s = render(resolve("2n2g", "generic"));
  const size_t guard =
      s.find("if [[ -z \"${SLURM_JOB_ID:-}\" || -z \"${SLURM_JOB_NODELIST:-}\" ]]");
  REQUIRE(guard != std::string::npos);
  CHECK(guard < s.find("scontrol show hostnames"));
  CHECK(s.find("exit 2", guard) < s.find("scontrol show hostnames"));
  // One node: the loopback, on purpose; several: a loopback address is refused.
  CHECK(contains(s, "  MASTER_ADDR=127.0.0.1\n"));
  CHECK(contains(s, "if [[ \"${hpc_master_ip}\" == 127.* && \"${hpc_node_addr}\" != 127.* ]]"));
}

TEST_CASE("render: the node check runs before training only with job.preflight.enabled",
          "[render]") {
  std::string off = render(resolve("2n4g", "generic"));
  CHECK_FALSE(contains(off, "node-check"));
  CHECK_FALSE(contains(off, "hpc_check_requeues"));

  std::string on = render(resolve("2n4g", "generic",
                                  {"job.preflight.enabled=true", "job.preflight.margin=7",
                                   "job.preflight.timeout=90", "trainer.program=/opt/hpctrain"}));
  const size_t check = on.find("node-check \\");
  REQUIRE(check != std::string::npos);
  CHECK(check < on.find("hpc_train=("));                     // before the training step
  CHECK(contains(on, "hpc_check_program=/opt/hpctrain\n"));  // launch hpctrain: its program
  CHECK(contains(on, "--margin 0.07 --slow-nodes-file"));
  CHECK(contains(on, "timeout --kill-after=10 90 srun"));
  CHECK(contains(on, "--ntasks-per-node=1"));
  CHECK(contains(on, "scontrol requeuehold"));
  // Its own requeue does not count against job.max_requeues.
  CHECK(contains(on, "if ((hpc_restarts >= 3 + hpc_check_requeues)); then"));

  // Another launch mode: hpctrain from PATH unless job.preflight.hpctrain names one.
  hpc::SpecRequest r =
      hpc::testing::builtin_request("2n4g", "generic", {"job.preflight.enabled=true"});
  r.launch = "srun";
  r.trainer_args = std::vector<std::string>{"python3", "train.py"};
  CHECK(contains(render(hpc::testing::resolve_builtin(r)), "hpc_check_program=hpctrain\n"));
}
