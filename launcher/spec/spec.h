// The resolved description of one job: shape x cluster profile x launch mode (hpctrain with a
// strategy, or the user's own program under srun or torchrun) x the program's arguments.
//
// Layers, lowest priority first (objects merge key by key, a later value wins, null removes):
//   defaults.json (built-in, then user dirs) < shape preset < cluster profile
//   < project file (hpclaunch.json) < command line (--preset/--cluster/--strategy, -- ARGS)
//   < --set key.path=value
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spec/catalog.h"
#include "spec/container.h"
#include "spec/env_names.h"
#include "spec/job_features.h"
#include "spec/site_limits.h"

namespace hpc {

// An environment variable the script exports, with the reason printed beside it.
struct EnvVar {
  std::string name;
  std::string value;
  std::string reason;
};

struct Shape {
  std::string description;
  int nodes = 0;
  int gpus_per_node = 0;
  int cpus_per_gpu = 0;
  std::string mem_per_gpu;  // Slurm size ("64G"), empty: the partition's default
  std::string time;         // Slurm time limit ("02:00:00", "1-00:00:00")
  // The preset that gave the other keys of a shape named NnMg that no file holds (catalog.h);
  // "" for a preset file. Not part of the spec's document: the script's header says it.
  std::string by_name_base;
};

enum class GpuRequest { GpusPerNode, Gres };

// What `module purge` runs before the loads: nothing, `module purge`, or `module --force purge`
// (sites with sticky modules, e.g. JSC's Stages).
enum class ModulePurge { None, Purge, Force };

// The Python environment the script activates (at most one of the two; empty: none). Paths are
// on the cluster: a leading "~/" is the home directory there.
struct PythonEnv {
  std::string venv;   // `source VENV/bin/activate`
  std::string conda;  // conda's shell hook, then `conda activate CONDA` (a name or a path)
};

struct ClusterProfile {
  std::string description;
  std::vector<std::string> required;  // profile keys the user must fill in (e.g. "account")
  std::string partition, account, qos, constraint, reservation;
  bool exclusive = false;            // --exclusive: whole nodes, shared with no other job
  std::vector<std::string> modules;  // `module load` each, quoted
  ModulePurge module_purge = ModulePurge::None;
  std::string lmod_init;  // sourced when the shell has no `module`; "": the usual
  PythonEnv python;
  std::vector<std::string> setup;         // lines of shell, verbatim (the user's own code)
  std::vector<std::string> sbatch_extra;  // extra "--option=value" directives
  GpuRequest gpu_request = GpuRequest::GpusPerNode;
  std::string gpu_type;   // "a100": --gres=gpu:a100:4 / --gpus-per-node=a100:4
  std::string ib_suffix;  // appended to the first host for MASTER_ADDR
  bool resolve_master_addr = true;
  int port_min = 0, port_max = 0;
  std::string cpu_bind;       // srun --cpu-bind ("cores", "sockets", "map_cpu:0,8", ...); "": none
  std::string gpu_bind;       // srun --gpu-bind ("closest", "single:1", ...); "": none
  int max_gpus_per_node = 0;  // 0: no limit known
  int max_nodes = 0;          // 0: no limit known
  std::vector<EnvVar> nccl;   // NCCL_*; NCCL_P2P_DISABLE may be "auto"
  std::vector<EnvVar> env;
  SiteLimits limits;  // partitions' and QoS' limits (spec/site_limits.h)
};

inline constexpr int kMinHangSeconds = 10;  // job.hang_seconds below this is refused
// job.start_seconds when absent: the start (imports from a shared file system, the rendezvous of
// every node) may take minutes on a cluster; hang_seconds counts only from a rank's first progress.
inline constexpr int kDefaultStartSeconds = 900;

struct JobOptions {
  std::string name, output, error, chdir;
  int signal_seconds = 0;  // the warning signal this long before the limit; 0: no requeue handling
  std::string signal = "USR1";  // the warning signal: USR1 or USR2 (job.signal)
  int max_requeues = 0;
  int srun_wait = 0;
  // Hang detection: `hpclaunch run`/`logs -f` end the job when no rank made progress for this
  // long (follow/hang.h; docs/troubleshooting.md). 0 (the default): off.
  int hang_seconds = 0;
  // With hang detection on: how long the job may run before any rank's first progress (a line,
  // a progress file, a heartbeat) before it counts as hung. 0: no bound on the start.
  int start_seconds = kDefaultStartSeconds;
  // Variables passed by name from the submitting shell (sbatch --export=...,NAME): the values
  // are never written into the script, the spec or the run directory.
  std::vector<std::string> env_from_submit;
  std::vector<Dependency> after;       // --dependency: start after these jobs (docs/jobs.md)
  std::string array;                   // --array indexes as written ("0-9%2"); "": one job
  ArrayIndexes array_indexes;          // the same, expanded
  std::vector<std::string> mail_type;  // --mail-type words, upper case
  std::string mail_user;               // --mail-user address
  NodeCheck node_check;                // job.preflight
};

struct TrainerOptions {
  std::string program;
  std::string command = "train";  // hpctrain's verb: train (gets --strategy) or bench-allreduce
  std::vector<std::string> args;
};

inline const std::vector<std::string>& known_trainer_commands() {
  static const std::vector<std::string> c = {"train", "bench-allreduce"};
  return c;
}

// How the script starts the program (docs/programs.md): hpctrain (one task per GPU, gets
// `train --strategy S`), srun (one task per GPU runs the user's command with RANK, LOCAL_RANK,
// WORLD_SIZE, ... set) or torchrun (one task per node runs torchrun, which starts one process
// per GPU).
inline const std::vector<std::string>& known_launch_modes() {
  static const std::vector<std::string> m = {"hpctrain", "srun", "torchrun"};
  return m;
}

inline const std::vector<std::string>& known_strategies() {
  static const std::vector<std::string> s = {"ddp", "fsdp", "zero1", "zero2"};
  return s;
}

struct Spec {
  std::string preset, cluster;
  std::string strategy;                       // hpctrain's; "" with another launch mode
  std::string launch = "hpctrain";            // one of known_launch_modes()
  std::vector<std::string> torchrun_command;  // launch torchrun: the launcher's argv prefix
  Shape shape;
  ClusterProfile profile;
  JobOptions job;
  TrainerOptions trainer;
  ContainerSpec container;  // runtime None: the tasks run on the host

  nlohmann::json resolved;                     // the merged document (keys sorted)
  std::map<std::string, std::string> sources;  // leaf key path -> where its value came from
  std::vector<std::string> files;              // every file that contributed, in layer order
  // Every layer, lowest first, one line each for the script's header: a file with what it is
  // ("presets/shapes/2n4g.json (preset 2n4g)"), then each flag and --set that set keys.
  std::vector<std::string> layers;

  int world_size() const { return shape.nodes * shape.gpus_per_node; }
  bool launches_hpctrain() const { return launch == "hpctrain"; }
  // For messages: "strategy ddp" (hpctrain) or "launch srun".
  std::string how_launched() const {
    return launches_hpctrain() ? "strategy " + strategy : "launch " + launch;
  }
  // The canonical text of `resolved` (2-space JSON + newline); its SHA-256 is the spec hash.
  std::string canonical_json() const;
  std::string hash() const;
};

// What the command line asked for.
struct SpecRequest {
  std::optional<std::string> preset, cluster, strategy, launch;
  // After `--`: appended to trainer.args. With launch srun or torchrun and no trainer.program
  // from a layer above the defaults, the first word is the program.
  std::optional<std::vector<std::string>> trainer_args;
  std::optional<std::string> container_image;  // --container IMAGE
  std::vector<std::string> env_pass;           // --env-pass NAME: appended to job.env_from_submit
  std::vector<std::string> sets;               // "key.path=value", in order
  std::optional<std::filesystem::path> project_file;  // --project; else ./hpclaunch.json
  bool read_project_file = true;                      // --no-project turns it off
  // A verb that runs hpctrain only ("sweep", "tune"): another launch mode is refused.
  std::string hpctrain_verb;
  // Per-run flags (--array, --after, --qos, ...): each a layer above the project file and below
  // --set, with the flag as its origin ("--array").
  std::vector<std::pair<nlohmann::json, std::string>> flag_layers;
  // `hpclaunch rerun`: a run's saved spec.json (the document and its path) is the only layer
  // below --set: no defaults, presets, profile or project file are read, so a preset changed
  // since does not change the rerun (docs/records.md).
  std::optional<std::pair<nlohmann::json, std::string>> saved_spec;
};

// A request from command-line words, as `render`, `sweep` and `tune` take them: "" leaves that
// choice to the layers below (a preset's defaults, ./hpclaunch.json).
SpecRequest make_spec_request(const std::string& preset, const std::string& cluster,
                              const std::string& strategy, std::vector<std::string> sets,
                              const std::string& project, bool no_project);

// The job name when job.name is not set: the program's name ("train" for `python train.py`,
// "pkg.train" for `python -m pkg.train`, "hpctrain" for hpctrain), reduced to letters, digits,
// '.', '_' and '-' (it names the log file and run directory through %x).
std::string job_name_from_program(const std::string& program, const std::vector<std::string>& args);
// The names of spec.job.env_from_submit that this process's environment lacks, in order.
std::vector<std::string> missing_env_from_submit(const Spec& spec);

// Throws UserError (exit 2) naming the first variable of job.env_from_submit that is unset
// here, or whose value holds a newline: checked before anything is written or submitted.
void check_env_from_submit(const Spec& spec);

// Merges the layers and validates the result. Throws UserError naming the file (or flag) and
// key path of the first problem.
Spec resolve_spec(const Catalog& catalog, const SpecRequest& request);

}  // namespace hpc
