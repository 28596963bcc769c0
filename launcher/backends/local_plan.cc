#include "backends/local_plan.h"

#include <algorithm>
#include <filesystem>

#include "backends/slurm_filename.h"
#include "error.h"

namespace fs = std::filesystem;

namespace hpc {
namespace {

std::string absolute_from(const std::string& base, const std::string& p) {
  fs::path path(p);
  return (path.is_absolute() ? path : fs::path(base) / path).lexically_normal().string();
}

std::string without_trailing_slash(std::string path) {
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

LocalJobPlace place_local_job(const SubmitRequest& request, const SbatchOptions& options,
                              const LocalSubmitContext& context) {
  if (options.nodes > 1) {
    throw UserError("--nodes=" + std::to_string(options.nodes), "the local backend runs one node",
                    "use a 1nXg preset or a Slurm backend");
  }
  for (const auto& entry : request.files) {
    const std::string& file = entry.first;
    if (file.empty() || file.find("..") != std::string::npos || file[0] == '/')
      throw BackendError("bad run directory file name \"" + file + "\"");
  }
  LocalJobPlace place;
  place.runs_root = without_trailing_slash(
      request.runs_root.empty() ? context.runs_root
                                : absolute_from(context.submit_dir, request.runs_root));
  place.workdir = !request.workdir.empty() ? absolute_from(context.submit_dir, request.workdir)
                  : !options.chdir.empty() ? absolute_from(context.submit_dir, options.chdir)
                                           : context.submit_dir;
  return place;
}

LocalJob plan_local_job(const SubmitRequest& request, const SbatchOptions& o,
                        const LocalSubmitContext& context, const LocalJobPlace& place,
                        const std::string& job_id) {
  LocalJob job;
  job.job_id = job_id;
  job.job_name = !o.job_name.empty()         ? o.job_name
                 : !request.job_name.empty() ? request.job_name
                                             : "sbatch";
  // The run directory is named after the request's job name (the spec's), which #SBATCH
  // --job-name in a hand-written script does not change.
  const std::string dir_prefix =
      place.runs_root + "/" +
      run_dir_name(request.job_name.empty() ? job.job_name : request.job_name) + "-";
  job.run_dir = dir_prefix + job_id;
  job.runs_root = place.runs_root;
  job.script = job.run_dir + "/script.sbatch";
  job.workdir = place.workdir;

  SlurmFilenameContext names{job_id, job.job_name, context.user, "localhost"};
  std::string output = !request.output.empty() ? request.output
                       : !o.output.empty()     ? o.output
                                               : "slurm-%j.out";
  std::string error = !request.error.empty() ? request.error : o.error;
  job.stdout_path = absolute_from(job.run_dir, expand_slurm_filename(output, names));
  job.stderr_path = error.empty() ? job.stdout_path
                                  : absolute_from(job.run_dir, expand_slurm_filename(error, names));

  job.open_mode_append = o.open_mode_append;
  job.time_limit_seconds = o.time_limit_seconds;
  job.signal_number = o.signal_number;
  job.signal_seconds = o.signal_seconds;
  job.signal_batch_only = o.signal_batch_only;
  job.requeue_allowed = !o.no_requeue;
  job.max_restarts = context.max_restarts;
  job.kill_wait_seconds = context.kill_wait_seconds;
  job.submit_time = context.submit_time;

  const int ntasks = o.tasks();
  const int requested_cpus = o.cpus_per_task > 0 ? o.cpus_per_task : 1;
  const int cpus_per_task = std::max(1, std::min(requested_cpus, context.cpus / ntasks));
  const std::string n = std::to_string(ntasks), c = std::to_string(cpus_per_task);
  const std::string node_cpus = std::to_string(ntasks * cpus_per_task);
  job.env = {
      {"SLURM_JOB_ID", job_id},
      {"SLURM_JOBID", job_id},
      {"SLURM_JOB_NAME", job.job_name},
      {"SLURM_JOB_NODELIST", "localhost"},
      {"SLURM_NODELIST", "localhost"},
      {"SLURMD_NODENAME", "localhost"},
      {"SLURM_JOB_NUM_NODES", "1"},
      {"SLURM_NNODES", "1"},
      {"SLURM_NTASKS", n},
      {"SLURM_NPROCS", n},
      {"SLURM_NTASKS_PER_NODE", n},
      {"SLURM_TASKS_PER_NODE", n},
      {"SLURM_CPUS_PER_TASK", c},
      {"SLURM_CPUS_ON_NODE", node_cpus},
      {"SLURM_JOB_CPUS_PER_NODE", node_cpus},
      {"SLURM_NODEID", "0"},
      {"SLURM_PROCID", "0"},
      {"SLURM_LOCALID", "0"},
      {"SLURM_GTIDS", "0"},
      {"SLURM_SUBMIT_DIR", context.submit_dir},
      {"SLURM_SUBMIT_HOST", context.submit_host},
      {"SLURM_CLUSTER_NAME", "local"},
      {"SLURM_JOB_PARTITION", "local"},
      {"SLURM_JOB_USER", context.user},
      {"SLURM_JOB_UID", std::to_string(context.uid)},
      {"SLURM_JOB_GID", std::to_string(context.gid)},
      {"ENVIRONMENT", "BATCH"},
      // As with the slurm backend: the script puts the trainer's metrics into the run dir.
      {"HPCLAUNCH_RUN_DIR_PREFIX", dir_prefix},
      // For the local scontrol (requeue) and srun.
      {"HPCLAUNCH_LOCAL_RUN_DIR", job.run_dir},
      {"HPCLAUNCH_LOCAL_RUNS_ROOT", place.runs_root},
  };
  return job;
}

}  // namespace hpc
