// The words that put each task's program into its container (spec/container.h): for Apptainer,
// Singularity and Charliecloud a prefix of the program's argv, which srun starts on every node;
// for Pyxis options of srun itself. The batch script around them stays on the host.
#pragma once

#include <string>
#include <vector>

#include "spec/container.h"

namespace hpc {

struct ContainerArgv {
  std::vector<std::string> srun_options;  // Pyxis: --container-image=IMAGE ..., among srun's
  std::vector<std::string> command;       // the prefix's first words: {"apptainer", "exec"}
  bool gpus_auto = false;                 // Apptainer: --nv next, where the node has nvidia-smi
  std::vector<std::string> arguments;     // the rest of the prefix: options, the image (, "--")

  bool wraps_program() const { return !command.empty(); }
};

ContainerArgv container_argv(const ContainerSpec& container);

}  // namespace hpc
