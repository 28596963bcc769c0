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
};

enum class GpuRequest { GpusPerNode, Gres };

struct ClusterProfile {
  std::string description;
  std::vector<std::string> required;  // profile keys the user must fill in (e.g. "account")
  std::string partition, account, qos, constraint, reservation;
  std::vector<std::string> modules;       // `module load` each, quoted
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
};

struct JobOptions {
  std::string name, output, error, chdir;
  int signal_seconds = 0;  // the warning signal this long before the limit; 0: no requeue handling
  std::string signal = "USR1";  // the warning signal: USR1 or USR2 (job.signal)
  int max_requeues = 0;
  int srun_wait = 0;
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

  nlohmann::json resolved;                     // the merged document (keys sorted)
  std::map<std::string, std::string> sources;  // leaf key path -> where its value came from
  std::vector<std::string> files;              // every file that contributed, in layer order

  int world_size() const { return shape.nodes * shape.gpus_per_node; }
  bool launches_hpctrain() const { return launch == "hpctrain"; }
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
  std::vector<std::string> sets;                      // "key.path=value", in order
  std::optional<std::filesystem::path> project_file;  // --project; else ./hpclaunch.json
  bool read_project_file = true;                      // --no-project turns it off
};

// A request from command-line words, as `render`, `sweep` and `tune` take them: "" leaves that
// choice to the layers below (a preset's defaults, ./hpclaunch.json).
SpecRequest make_spec_request(const std::string& preset, const std::string& cluster,
                              const std::string& strategy, std::vector<std::string> sets,
                              const std::string& project, bool no_project);

// A name a shell can export: letters, digits and '_', not starting with a digit.
bool is_env_name(const std::string& s);

// The job name when job.name is not set: the program's name ("train" for `python train.py`,
// "pkg.train" for `python -m pkg.train`, "hpctrain" for hpctrain), reduced to letters, digits,
// '.', '_' and '-' (it names the log file and run directory through %x).
std::string job_name_from_program(const std::string& program, const std::vector<std::string>& args);

// Merges the layers and validates the result. Throws UserError naming the file (or flag) and
// key path of the first problem.
Spec resolve_spec(const Catalog& catalog, const SpecRequest& request);

// Slurm time limit -> seconds; -1 for UNLIMITED/INFINITE. Throws UserError (where) if invalid
// or zero. The grammar is slurm_time_seconds (spec/slurm_time.h).
long parse_slurm_time(const std::string& text, const std::string& where);

}  // namespace hpc
