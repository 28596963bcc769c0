// The container each task's program runs in (the spec's "container" key; docs/programs.md,
// "Containers"): which runtime, which image, what to mount. Only the tasks' program runs inside
// it; the batch script, srun, scontrol and the requeue trap stay on the host.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpc {

enum class ContainerRuntime { None, Apptainer, Singularity, Pyxis, Charliecloud };

// "auto": Apptainer's --nv where the node has nvidia-smi (decided at job start); true/false:
// always/never. Pyxis (enroot's NVIDIA hook) and Charliecloud (ch-fromhost --nvidia on the
// image) bring the GPUs in without a flag, so only "auto" is accepted there.
enum class ContainerGpus { Auto, On, Off };

// One bind mount "SRC:DST" or "SRC:DST:FLAGS" (Apptainer: ro|rw; Pyxis: enroot's flags joined
// with '+', e.g. ro+rprivate; Charliecloud has none).
struct ContainerMount {
  std::string source, target, flags;
};

struct ContainerSpec {
  ContainerRuntime runtime = ContainerRuntime::None;
  std::string image;                   // a path, or a URI the runtime knows (docker://, enroot's)
  std::vector<ContainerMount> mounts;  // in the order given
  std::vector<std::string> options;    // more words for the runtime, placed as given
  std::string workdir;                 // the tasks' working directory inside the image
  ContainerGpus gpus = ContainerGpus::Auto;

  bool enabled() const { return runtime != ContainerRuntime::None; }
};

// The runtime names the spec accepts: apptainer, singularity, pyxis, charliecloud.
const std::vector<std::string>& known_container_runtimes();
std::string container_runtime_name(ContainerRuntime runtime);

// Reads and checks the merged document's "container" object (absent: no container). `where`
// turns a key path ("container.image") into the layer that set it, for the error line.
ContainerSpec read_container(const nlohmann::json& doc,
                             const std::function<std::string(const std::string&)>& where);

// The local backend runs the tasks on this machine, from `workdir`: an image given as a path must
// exist here, and Pyxis (a plugin of Slurm's srun) is not there. Throws UserError.
void check_container_on_this_machine(const ContainerSpec& container, const std::string& workdir);

}  // namespace hpc
