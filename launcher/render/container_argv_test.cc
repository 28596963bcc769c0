#include "render/container_argv.h"
#include "render/builtin_testing.h"

#include <catch2/catch.hpp>

#include "error.h"
#include "render/render.h"

namespace fs = std::filesystem;
using Words = std::vector<std::string>;

namespace {

hpc::Spec resolve(std::vector<std::string> sets) {
  hpc::SpecRequest r = hpc::testing::builtin_request("2n2g", "generic", std::move(sets));
  r.strategy = "ddp";
  return hpc::testing::resolve_builtin(r);
}

std::string render(const hpc::Spec& spec) { return hpc::testing::render_builtin(spec); }

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const Words kMounts = {"container.mounts=[\"/scratch/data:/data:ro\", \"/home/me/ckpt:/ckpt\"]"};

Words with(Words sets, const Words& more) {
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

}  // namespace

TEST_CASE("container argv: apptainer exec, options, the image, then the program", "[container]") {
  auto spec = resolve(
      with(kMounts, {"container.runtime=apptainer", "container.image=/sw/pt.sif",
                     "container.workdir=/workspace", "container.options=[\"--writable-tmpfs\"]"}));
  hpc::ContainerArgv a = hpc::container_argv(spec.container);
  CHECK(a.command == Words{"apptainer", "exec"});
  CHECK(a.gpus_auto);
  CHECK(a.arguments == Words{"--bind", "/scratch/data:/data:ro", "--bind", "/home/me/ckpt:/ckpt",
                             "--pwd", "/workspace", "--writable-tmpfs", "/sw/pt.sif"});
  CHECK(a.srun_options.empty());

  spec = resolve({"container.runtime=singularity", "container.image=docker://pytorch/pytorch",
                  "container.gpus=true"});
  a = hpc::container_argv(spec.container);
  CHECK(a.command == Words{"singularity", "exec"});
  CHECK_FALSE(a.gpus_auto);
  CHECK(a.arguments == Words{"--nv", "docker://pytorch/pytorch"});
  spec = resolve({"container.runtime=apptainer", "container.image=x.sif", "container.gpus=false"});
  CHECK(hpc::container_argv(spec.container).arguments == Words{"x.sif"});
}

TEST_CASE("container argv: ch-run binds, the image, then -- and the program", "[container]") {
  auto spec = resolve({"container.runtime=charliecloud", "container.image=/scratch/img",
                       "container.mounts=[\"/scratch/data:/data\"]", "container.workdir=/work"});
  hpc::ContainerArgv a = hpc::container_argv(spec.container);
  CHECK(a.command == Words{"ch-run"});
  CHECK_FALSE(a.gpus_auto);
  CHECK(a.arguments == Words{"-b", "/scratch/data:/data", "--cd", "/work", "/scratch/img", "--"});
}

TEST_CASE("container argv: pyxis is srun's options, the program stays bare", "[container]") {
  auto spec = resolve(
      with(kMounts,
           {"container.runtime=pyxis", "container.image=nvcr.io#nvidia/pytorch:24.01-py3",
            "container.workdir=/workspace", "container.options=[\"--no-container-mount-home\"]"}));
  hpc::ContainerArgv a = hpc::container_argv(spec.container);
  CHECK_FALSE(a.wraps_program());
  CHECK(a.srun_options == Words{"--container-image=nvcr.io#nvidia/pytorch:24.01-py3",
                                "--container-mounts=/scratch/data:/data:ro,/home/me/ckpt:/ckpt",
                                "--container-workdir=/workspace", "--no-container-mount-home"});
}

TEST_CASE("container script: the runtime wraps the program, srun stays outside", "[container]") {
  std::string s = render(resolve({"container.runtime=apptainer", "container.image=/sw/pt.sif"}));
  CHECK(contains(s, "\n  hpc_container=(apptainer exec)\n"
                    "  hpc_container_gpus_auto # --nv where this node has nvidia-smi\n"
                    "  hpc_container+=(/sw/pt.sif)\n"));
  CHECK(contains(s, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_container[@]}\" "
                    "\"${hpc_train[@]}\"\n"));
  CHECK(contains(s, "\n  hpc_record_start hpctrain \"${hpc_train[0]}\" /sw/pt.sif #"));
  // The trap, scontrol and the requeue stay in the batch shell, before and after srun.
  CHECK(s.find("\n  hpc_requeue_on ") < s.find("hpc_container=("));

  s = render(resolve({"container.runtime=charliecloud", "container.image=/img"}));
  CHECK(contains(s, "\n  export USER=\"${USER:-$(id -un)}\" #"));
  CHECK(contains(s, "\n  hpc_container+=(/img --)\n"));
  CHECK_FALSE(contains(s, "hpc_container_gpus_auto #"));

  s = render(resolve({"container.runtime=pyxis", "container.image=img.sqsh"}));
  CHECK(contains(s,
                 "    --label # prefix each output line with its rank\n"
                 "    --container-image=img.sqsh\n  )\n"));
  CHECK(contains(s, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_train[@]}\"\n"));
  CHECK_FALSE(contains(s, "hpc_container=("));
}

TEST_CASE("container script: without a container the script is unchanged", "[container]") {
  std::string s = render(resolve({}));
  std::string top = hpc::job_part(s);
  CHECK_FALSE(contains(top, "container"));
  CHECK(contains(top, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_train[@]}\"\n"));
  CHECK_FALSE(contains(s, "\n\n\n"));
}

namespace {

hpc::Spec resolve_launch(const std::string& launch, std::vector<std::string> sets) {
  hpc::SpecRequest r = hpc::testing::builtin_request("2n2g", "generic", std::move(sets));
  r.launch = launch;
  r.trainer_args = std::vector<std::string>{"python", "train.py", "--epochs", "3"};
  return hpc::testing::resolve_builtin(r);
}

}  // namespace

TEST_CASE("container script: where the runtime goes in each launch mode", "[container]") {
  const Words apptainer = {"container.runtime=apptainer", "container.image=/sw/pt.sif"};
  // srun: the task's bash line exports RANK & co. on the host, then execs the runtime, which
  // passes them into the image (the image needs no bash).
  std::string s = render(resolve_launch("srun", apptainer));
  CHECK(contains(s, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_rank_env[@]}\" 2 "
                    "\"${hpc_container[@]}\" \"${hpc_program[@]}\"\n"));
  // torchrun: the runtime starts torchrun in the image, one per node; torchrun starts the ranks.
  // The host's bash of each task adds is_host, then execs the runtime.
  s = render(resolve_launch("torchrun", apptainer));
  CHECK(contains(s, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_torchrun_node[@]}\" '' \\\n"
                    "    \"${hpc_container[@]}\" \"${hpc_torchrun[@]}\" \"${hpc_program[@]}\"\n"));
  s = render(resolve_launch("hpctrain", {"container.runtime=charliecloud", "container.image=/i"}));
  CHECK(contains(s, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_container[@]}\" "
                    "\"${hpc_train[@]}\"\n"));

  // Pyxis: srun's options in every mode, the launch line as without a container.
  const Words pyxis = {"container.runtime=pyxis", "container.image=img.sqsh"};
  s = render(resolve_launch("srun", pyxis));
  CHECK(contains(s, "    --container-image=img.sqsh\n  )\n"));
  CHECK(contains(s, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_rank_env[@]}\" 2 "
                    "\"${hpc_program[@]}\"\n"));
  s = render(resolve_launch("torchrun", pyxis));
  CHECK(contains(s, "its node\n    --container-image=img.sqsh\n  )\n"));
  CHECK(contains(s, "\n  hpc_launch \"${hpc_srun[@]}\" \"${hpc_torchrun_node[@]}\" '' \\\n"
                    "    \"${hpc_torchrun[@]}\" \"${hpc_program[@]}\"\n"));
  CHECK_FALSE(contains(s, "hpc_container=("));
}
