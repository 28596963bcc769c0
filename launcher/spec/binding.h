// What the batch script asks of srun and Slurm's signals on a cluster's nodes: the CPU and GPU
// binding of each task (profile.cpu_bind, profile.gpu_bind) and the warning signal before the
// time limit (job.signal). Each value is checked against the grammar srun 22.05 accepts and
// rendered as text hpclaunch has validated (no quoting needed, none needed in the script).
#pragma once

#include <string>
#include <vector>

namespace hpc {

// The warning signals a job may ask for (job.signal): USR1 (the default) or USR2, for
// programs or libraries that use USR1 themselves (NCCL's debug dump on some versions).
inline const std::vector<std::string>& known_warning_signals() {
  static const std::vector<std::string> s = {"USR1", "USR2"};
  return s;
}

// The named CPU bindings of `srun --cpu-bind` (Slurm 22.05's srun(1)); map_cpu:, mask_cpu:,
// map_ldom: and mask_ldom: take a list as well.
inline const std::vector<std::string>& known_cpu_bindings() {
  static const std::vector<std::string> b = {"none",    "cores", "sockets",
                                             "threads", "ldoms", "rank"};
  return b;
}

// The named GPU bindings of `srun --gpu-bind`; map_gpu:, mask_gpu:, single: and per_task: take
// a list or a number.
inline const std::vector<std::string>& known_gpu_bindings() {
  static const std::vector<std::string> b = {"closest", "none"};
  return b;
}

// Throw UserError(where, ...) unless the value is one srun accepts (as above). "" is accepted:
// no --cpu-bind / --gpu-bind option, the site's default binding.
void check_cpu_bind(const std::string& value, const std::string& where);
void check_gpu_bind(const std::string& value, const std::string& where);
void check_warning_signal(const std::string& value, const std::string& where);

}  // namespace hpc
