// Slurm's filename patterns (--output, --error), expanded as sbatch does.
#pragma once

#include <string>

namespace hpc {

// Slurm's filename patterns: %j job id, %x job name, %u user, %N node, %n node index, %t task,
// %A array master id (= %j), %a array index, %s step ("batch"), %% a percent sign; a number
// after the % zero-pads numbers ("%5j"). A pattern with a backslash is taken literally (the
// backslashes removed), as sbatch does.
struct SlurmFilenameContext {
  std::string job_id, job_name, user, node = "localhost";
};
std::string expand_slurm_filename(const std::string& pattern, const SlurmFilenameContext& context);

}  // namespace hpc
