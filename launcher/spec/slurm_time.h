// Slurm's one grammar for durations: sbatch --time limits and scontrol's RunTime/TimeLimit.
#pragma once

#include <optional>
#include <string>

namespace hpc {

// minutes | minutes:seconds | hours:minutes:seconds | days-hours | days-hours:minutes |
// days-hours:minutes:seconds -> seconds (0 included); -1 for UNLIMITED/INFINITE; nullopt when
// the text is none of these, has more digits than any Slurm duration, or a minute or second of
// 60 and more after a larger unit ("01:99:00"), or an hour of 24 and more after days.
std::optional<long> slurm_time_seconds(const std::string& text);

// Slurm time limit -> seconds; -1 for UNLIMITED/INFINITE. Throws UserError (where) if invalid
// or zero.
long parse_slurm_time(const std::string& text, const std::string& where);

}  // namespace hpc
