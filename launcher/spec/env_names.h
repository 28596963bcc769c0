// Environment variable names a user's setting may export. One rule for the three places that
// name variables: the profile's environment (profile.env, profile.nccl), a tune grid's variables
// and the names passed from the submitting shell (job.env_from_submit, --env-pass); issue 35
// found the first two accepting PATH, SLURM_JOB_ID and HPCLAUNCH_* that the third refused.
#pragma once

#include <string>

namespace hpc {

// A name a shell can export: letters, digits and '_', not starting with a digit.
bool is_env_name(const std::string& s);

// "NAME is ..." when a user's setting may not set `name`, "" when it may:
//   MASTER_ADDR, MASTER_PORT         computed by the batch script (docs/rendezvous.md)
//   PATH                             built in the job by its modules and Python environment
//   SLURM_*, SLURMD_*, SBATCH_*      set by Slurm for the job (SBATCH_* would change sbatch's
//                                    own options)
//   HPCLAUNCH_*                      hpclaunch's own (the run directory, the local backend)
std::string reserved_env_reason(const std::string& name);

}  // namespace hpc
