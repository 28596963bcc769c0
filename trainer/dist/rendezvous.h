// Who am I and whom do I meet: rank, world size and the master's address, from the variables
// torchrun (RANK, WORLD_SIZE, LOCAL_RANK) or srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID)
// set, and MASTER_ADDR / MASTER_PORT. No LibTorch here.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace hpc::train::dist {

struct Rendezvous {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr;  // empty for a single process
  int master_port = 0;
  std::string source = "single";  // "torchrun", "slurm" or "single"
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_environment();

// torchrun's variables win over Slurm's. MASTER_ADDR, when unset, is the first host of
// SLURM_JOB_NODELIST followed by `master_suffix` (JSC: "i" for the InfiniBand name). MASTER_PORT,
// when unset under Slurm, follows hpclaunch's rule over the built-in port range
// (presets/defaults.json): min + SLURM_JOB_ID mod (max - min + 1), 20000-32767 as shipped.
// With `required` (a distributed strategy), missing variables are an error; without it, a
// process that has none is a world of one. Throws hpc::UserError naming the variable.
Rendezvous rendezvous_from_env(const EnvLookup& env, const std::string& master_suffix,
                               bool required);

// True for an address on the loopback (127.0.0.0/8, ::1, "localhost"): every rank that dials it
// as MASTER_ADDR runs on this host, so the ranks can talk over the loopback too.
bool is_loopback(const std::string& addr);

}  // namespace hpc::train::dist
