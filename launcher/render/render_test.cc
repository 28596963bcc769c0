#include "render/render.h"

#include <catch2/catch.hpp>

#include "error.h"

namespace fs = std::filesystem;

namespace {

hpc::Spec resolve(const std::string& preset, const std::string& cluster,
                  std::vector<std::string> sets = {}) {
  fs::path data = HPC_SOURCE_DIR;
  hpc::Catalog catalog({{data / "presets", data / "templates", "built-in"}});
  hpc::SpecRequest r;
  r.preset = preset;
  r.cluster = cluster;
  r.strategy = "fsdp";
  r.sets = std::move(sets);
  r.read_project_file = false;
  return hpc::resolve_spec(catalog, r);
}

std::string render(const hpc::Spec& spec) {
  auto t =
      hpc::ScriptTemplate::from_file(fs::path(HPC_SOURCE_DIR) / "templates/sbatch.sh.mustache");
  return t.render(spec, {"test", {"hpclaunch", "render"}});
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("render: GPU request syntax follows the cluster profile", "[render]") {
  auto generic = hpc::sbatch_directives(resolve("2n4g", "generic"));
  CHECK(std::find(generic.begin(), generic.end(), "--gpus-per-node=4") != generic.end());
  auto daic = hpc::sbatch_directives(resolve("1n2g", "daic"));
  CHECK(std::find(daic.begin(), daic.end(), "--gres=gpu:2") != daic.end());
  auto typed = hpc::sbatch_directives(resolve("1n2g", "daic", {"profile.gpu_type=a40"}));
  CHECK(std::find(typed.begin(), typed.end(), "--gres=gpu:a40:2") != typed.end());
}

TEST_CASE("render: the script's parts come in the documented order", "[render]") {
  std::string s = render(resolve("2n4g", "jsc", {"profile.account=p"}));
  std::vector<std::string> order = {"#!/bin/bash",
                                    "# Spec: sha256 ",
                                    "#SBATCH --job-name=",
                                    "set -euo pipefail",
                                    "module load Stages/2024",
                                    "export OMP_NUM_THREADS=",
                                    "export NCCL_IB_TIMEOUT=50",
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
  CHECK(contains(s, "# JSC's IB fabric"));  // the reason, as a comment beside the variable
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
