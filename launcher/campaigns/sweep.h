// Scaling sweeps: one job per (shape preset, strategy) point, submitted through a Backend at
// most K at a time, watched in a live table, measured from each run's metrics.jsonl (or from a
// figure the program prints in its log, LogMetric), and written up as a sweep directory
// (sweep.json, results.csv, summary.md, plots/). docs/sweeps.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "campaigns/log_metric.h"
#include "campaigns/sweep_axes.h"
#include "follow/jobs.h"

namespace hpc {

// What to sweep. From a sweep file (examples/sweeps/*.json) and/or the command line; the
// command line wins key by key.
struct SweepConfig {
  std::vector<std::string> presets;     // shape presets, e.g. 1n1g, 1n2g, 2n2g
  std::vector<std::string> strategies;  // ddp, fsdp, ...; none for a user's program
  std::string launch;                   // --launch: hpctrain, srun, torchrun; "" = the spec's
  std::string scaling = "strong";       // strong: global batch fixed; weak: per-GPU batch fixed
  long steps = 0;                       // --max-steps for every point; 0: the trainer args decide
  std::string cluster;                  // cluster profile; "" = the spec's default
  int max_concurrent = 1;               // points in flight at once
  int warmup_steps = -1;                // steps dropped before averaging; -1: max(3, 20%)
  long start_timeout_s = 600;           // a point still not running after this is cancelled
  double poll_interval_s = 1.0;
  double requeue_settle_s = 10;           // a PREEMPTED / NODE_FAIL point is watched for a requeue
  std::string out_dir;                    // "" = sweeps/<presets>-<strategies>-<scaling>
  std::vector<std::string> sets;          // --set key.path=value for every point
  std::vector<std::string> trainer_args;  // after --, for every point
  // The figure to compare, from each job's log (a user's program) instead of hpctrain's
  // metrics.jsonl: "metric": {"regex": "..."} or --metric-regex.
  std::optional<LogMetric> metric;
  std::string project, template_file;
  bool no_project = false;
  // More axes than presets x strategies (docs/sweeps.md#axes): crossed with presets and
  // strategies, and with each other as a grid or zipped.
  SweepAxes axes;
  // Each point runs this many times, round-robin (every point once, then every point again), so
  // that drift on the machine reaches all points alike.
  int repeats = 1;
  // Render every point's script into OUT/scripts/NAME.sbatch; submit nothing.
  bool dry_run = false;
};

// "1n1g, 1n2g" -> {"1n1g", "1n2g"} (spaces around items dropped; "" -> {}).
std::vector<std::string> split_comma_list(const std::string& text);

// Reads a sweep file (JSON with comments; keys as in SweepConfig, docs/sweeps.md) on top of
// `base`. Throws UserError "file: key: what; fix" for unknown keys and wrong types.
SweepConfig read_sweep_file(const std::filesystem::path& path, SweepConfig base = {});

// The trainer arguments of one point: `args` with --max-steps set to `steps` (when > 0) and
// --total-batch-tokens chosen for the scaling mode. Strong: the same global batch for every
// point (the given value, else micro-batch x seq-len x the largest world size). Weak: the given
// (or micro-batch x seq-len x smallest world) batch for the smallest point, scaled by
// world / smallest world. Without --micro-batch and --seq-len and no given total, the trainer's
// default is kept (strong) or scaled from 524288 (weak).
std::vector<std::string> point_trainer_args(const std::vector<std::string>& args,
                                            const std::string& scaling, long steps, int world,
                                            int smallest_world, int largest_world);

// Runs (or resumes) the sweep. Returns 0 when every point completed with a measurement, 1 when
// some did not (their rows say why), 130 on Ctrl-C (jobs go on; re-run to pick them up).
// Throws UserError for bad input before anything is submitted. `backend`: where the points go
// (tests pass their own); nullptr = make_backend(choice).
int run_sweep(const SweepConfig& config, const BackendChoice& choice,
              const std::vector<std::string>& command, Backend* backend = nullptr);

}  // namespace hpc
