// Slurm's one grammar for durations: sbatch --time limits and scontrol's RunTime/TimeLimit.
#pragma once

#include <optional>
#include <string>

namespace hpc {

// minutes | minutes:seconds | hours:minutes:seconds | days-hours | days-hours:minutes |
// days-hours:minutes:seconds -> seconds (0 included); -1 for UNLIMITED/INFINITE; nullopt when
// the text is none of these (or has more digits than any Slurm duration).
std::optional<long> slurm_time_seconds(const std::string& text);

}  // namespace hpc
