// sbatch features with a meaning of their own, read and checked before they become #SBATCH
// lines: job arrays (--array), dependencies (--dependency) and mail (--mail-type, --mail-user).
// Each reader throws UserError(where, what, fix) naming the value; docs/jobs.md describes them.
#pragma once

#include <string>
#include <vector>

namespace hpc {

// A job array's index expression as sbatch takes it: a comma-separated list of N, N-M or
// N-M:STEP, optionally ended by %LIMIT (at most LIMIT tasks run at once). Indexes run from 0 to
// kMaxArrayIndex (Slurm's largest MaxArraySize less one; a site's own limit is sbatch's to say).
struct ArrayIndexes {
  std::vector<long> indexes;  // every task id, ascending, each once
  int limit = 0;              // %LIMIT; 0: none
};
inline constexpr long kMaxArrayIndex = 4000000;
inline constexpr size_t kMaxArrayTasks = 10000;  // run directories hpclaunch makes per array
ArrayIndexes parse_array_indexes(const std::string& text, const std::string& where);

// One dependency, JOBID[:TYPE] as `--after` and job.after take it: TYPE is afterok (the
// default), afterany, afternotok or after; JOBID is a job id (backend.h is_job_id) or an array
// task (123_4), never a het-job component.
struct Dependency {
  std::string job_id;
  std::string type = "afterok";
};
const std::vector<std::string>& known_dependency_types();
Dependency parse_dependency(const std::string& text, const std::string& where);
// The value of --dependency: the types in the order they first appear, each with its ids
// ("afterok:12:13,afterany:14"); every one must be satisfied (','), as Slurm reads it.
std::string dependency_directive(const std::vector<Dependency>& deps);

// job.preflight: the node check before training (docs/node-check.md). Off unless enabled; when
// on, one srun step of one task per node runs `HPCTRAIN node-check` and the job requeues itself
// once without the nodes it names.
struct NodeCheck {
  bool enabled = false;
  int margin_percent = 20;  // a node this much below the median is slow
  int timeout_s = 300;      // the check's step is ended after this long
  std::string hpctrain;     // the hpctrain that runs it; "": trainer.program or "hpctrain"
};

// Slurm's --mail-type words (sbatch(1), Slurm 22.05).
const std::vector<std::string>& known_mail_types();
// The word in upper case, as sbatch prints it; throws for an unknown one.
std::string parse_mail_type(const std::string& text, const std::string& where);
// A mail address (local@domain, letters, digits and ._%+- before the @); throws otherwise.
void check_mail_user(const std::string& text, const std::string& where);

}  // namespace hpc
