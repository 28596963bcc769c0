#include "spec/env_names.h"

#include <cctype>

namespace hpc {

bool is_env_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_') return false;
  return true;
}

std::string reserved_env_reason(const std::string& name) {
  auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
  if (name == "MASTER_ADDR" || name == "MASTER_PORT")
    return name + " is computed by the batch script";
  if (name == "PATH") return name + " is built in the job by its modules and Python environment";
  if (starts("SLURM_") || starts("SLURMD_") || starts("SBATCH_")) return name + " is set by Slurm";
  if (starts("HPCLAUNCH_")) return name + " is hpclaunch's own";
  return "";
}

}  // namespace hpc
