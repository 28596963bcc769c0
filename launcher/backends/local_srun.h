// The `srun` and `scontrol` a local job finds first on its PATH (<run_dir>/bin/srun and
// bin/scontrol are symlinks to hpclaunch; main() dispatches on the name it was started as).
//
// srun spawns one process per task with the variables slurmstepd gives a task (SLURM_PROCID,
// SLURM_LOCALID, SLURM_NODEID=0, SLURM_STEP_ID=0, SLURM_NTASKS, ...), each task in its own
// process group inside the job's session, relays their output line by line (--label prefixes
// "N: " like srun), forwards INT, TERM, USR1 and USR2 to every task, and exits like Slurm
// 22.05's srun: 128+N when a task was ended by signal N (also one srun ended itself, and even
// beside a larger exit code), otherwise the largest exit code of its tasks.
//   --kill-on-bad-exit[=1]  a task that fails or is killed: the others get SIGTERM, then SIGKILL
//   --wait=N                N seconds after the first task exits the rest are ended the same way
// scontrol knows `show hostnames [LIST]` and `requeue JOBID` (see local_backend.h).
#pragma once

#include <string>
#include <vector>

namespace hpc {

// argv[0] is the name srun was started as. Returns the exit status.
int run_local_srun(const std::vector<std::string>& argv);

// argv[0] is the name scontrol was started as. Returns the exit status: 0, 1 when the command
// failed (no such job), 2 for a command the local scontrol does not know.
int run_local_scontrol(const std::vector<std::string>& argv);

// The seconds between SIGTERM and SIGKILL when srun ends its tasks.
inline constexpr int kLocalSrunKillWaitSeconds = 5;

}  // namespace hpc
