// One rule for the variables a user's setting may export (profile.env and .nccl, a tune grid,
// --env-pass): reserved_env_reason.
#include "spec/env_names.h"

#include <catch2/catch.hpp>

using hpc::reserved_env_reason;

TEST_CASE("reserved environment variable names", "[env-names]") {
  CHECK(reserved_env_reason("PATH") == "PATH is built in the job by its modules and Python "
                                       "environment");
  CHECK(reserved_env_reason("SLURM_JOB_ID") == "SLURM_JOB_ID is set by Slurm");
  CHECK(reserved_env_reason("SLURMD_NODENAME") == "SLURMD_NODENAME is set by Slurm");
  CHECK(reserved_env_reason("SBATCH_PARTITION") == "SBATCH_PARTITION is set by Slurm");
  CHECK(reserved_env_reason("HPCLAUNCH_RUN_DIR") == "HPCLAUNCH_RUN_DIR is hpclaunch's own");
  CHECK(reserved_env_reason("MASTER_PORT") == "MASTER_PORT is computed by the batch script");
  CHECK(reserved_env_reason("MASTER_ADDR") == "MASTER_ADDR is computed by the batch script");
  for (const char* free : {"NCCL_ALGO", "OMP_NUM_THREADS", "WANDB_API_KEY", "PATHX", "MYPATH",
                           "SLURM", "HPCLAUNCH", "LD_LIBRARY_PATH"})
    CHECK(reserved_env_reason(free).empty());
  CHECK(hpc::is_env_name("NCCL_ALGO"));
  CHECK_FALSE(hpc::is_env_name("1X"));
  CHECK_FALSE(hpc::is_env_name("A-B"));
}
