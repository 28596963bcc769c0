// How a job's end reads as hpclaunch's exit status: the job's own exit code for FAILED, and one
// code per other way a job ends (docs/backends.md, "Exit status"). follow, sweeps and the
// Slurm backend's array state use it.
#pragma once

#include "backends/backend.h"
#include "error.h"  // kExitOutput

namespace hpc {

// hpclaunch's exit status for a finished job (docs/backends.md lists them).
namespace follow_exit {
inline constexpr int kCompleted = 0;
inline constexpr int kTimeout = 124;
inline constexpr int kNodeFail = 125;   // NODE_FAIL, BOOT_FAIL
inline constexpr int kPreempted = 126;  // PREEMPTED, DEADLINE (not requeued)
inline constexpr int kOutOfMemory = 137;
inline constexpr int kCancelled = 143;
inline constexpr int kDetached = 130;                 // Ctrl-C: the job goes on
inline constexpr int kLost = 75;                      // the job vanished and no accounting knows it
inline constexpr int kDependencyNeverSatisfied = 76;  // pending for ever: its dependency failed
inline constexpr int kHang = 79;  // no rank made progress for job.hang_seconds: follow ended it
// Also: kExitUsage 2 (bad input, a malformed job id), kExitUnreachable 69 (backend.h),
// kExitOutput 74 (standard output closed or full: error.h).
inline constexpr int kOutputClosed = kExitOutput;
}  // namespace follow_exit

int exit_status_for(const JobStatus& status);

}  // namespace hpc
