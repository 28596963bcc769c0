// hpclaunch tune: one all-reduce benchmark job (hpctrain bench-allreduce) per candidate set of
// NCCL variables, ranked by bus bandwidth at large sizes; the winner's variables become a
// cluster profile (<cluster>-tuned) in the user's profile directory, each with its reason and
// the measured table. The grid of candidates is tune_grid.h; docs/tuning.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "campaigns/tune_grid.h"
#include "follow/jobs.h"
#include "spec/catalog.h"
#include "spec/spec.h"

namespace hpc {

// One row of bench-allreduce's JSON.
struct BusbwRow {
  long long size = 0;  // bytes
  double busbw_gbps = 0;
  double algbw_gbps = 0;
  double time_us = 0;
};
struct BenchResult {
  std::vector<BusbwRow> rows;
  std::vector<std::string> hostnames;  // per rank
  std::string backend;                 // gloo, nccl
  int world_size = 0;
};
// Parses bench-allreduce's --json output; UserError naming `origin` when it is not one.
BenchResult parse_bench_json(const std::string& text, const std::string& origin);

// Sizes at or above this count as large: the ranking's score is the mean busbw over them.
inline constexpr long long kTuneLargeSize = 64LL << 20;
// The score: the mean busbw over sizes >= 64 MiB; when no size is that large, over the largest
// quarter of the sizes (at least one). nullopt for no rows.
std::optional<double> tune_score(const std::vector<BusbwRow>& rows);
// How the score was taken, for the record ("mean busbw (GB/s) over sizes >= 64 MiB").
std::string tune_score_metric(const std::vector<BusbwRow>& rows);

// A candidate with what its job gave.
struct TuneOutcome {
  TuneCandidate candidate;
  std::string state = "NOT_SUBMITTED", job_id, message, nodes, run_dir, log;
  std::optional<BenchResult> bench;
  std::optional<double> score;
};

// Indices of `outcomes`, best first: measured ones by score (higher first; ties by id order),
// then the rest in candidate order.
std::vector<size_t> rank_tune_outcomes(const std::vector<TuneOutcome>& outcomes);

// The tuned profile's file content: extends `cluster`, sets the winner's variables (each with
// "tune DATE: busbw X GB/s vs Y with VAR=OTHER ..." as its reason) and records every
// measurement under "tuning". `date`: ISO 8601 UTC. `outcomes[ranking[0]]` must have a score.
nlohmann::json tuned_profile(const std::string& cluster, const std::string& preset,
                             const std::string& date, const std::vector<TuneOutcome>& outcomes,
                             const std::vector<size_t>& ranking, const std::string& command);

struct TuneConfig {
  std::string cluster, preset = "2n4g";
  std::string grid_file;  // "" = default_tune_grid
  std::string name;       // tuned profile's name; "" = <cluster>-tuned
  bool force = false;     // overwrite an existing tuned profile
  int max_candidates = 32;
  int max_concurrent = 1;
  long timeout_s = 600;    // per candidate, once running (also its Slurm time limit)
  long hang_grace_s = 60;  // still running this long after timeout_s: cancelled, HUNG
  long start_timeout_s = 600;
  double poll_interval_s = 1.0;
  std::string min_size = "1M", max_size = "1G";
  long iters = 20;
  std::vector<std::string> bench_args;  // after --, for bench-allreduce
  std::vector<std::string> sets;        // --set for every candidate
  std::string project, template_file;
  bool no_project = false;
};

// Runs the tune. Returns 0 when a tuned profile was written, 1 when no candidate gave a
// measurement (nothing written), 130 when interrupted. UserError for bad input before anything
// is submitted. `backend`: tests pass their own; nullptr = make_backend(choice).
int run_tune(const TuneConfig& config, const BackendChoice& choice,
             const std::vector<std::string>& command, Backend* backend = nullptr);

// Where tuned profiles go: $XDG_CONFIG_HOME/hpclaunch/clusters (default ~/.config/...).
std::filesystem::path user_clusters_dir();

// Lines that describe a "tuning" record for `hpclaunch clusters show`.
std::vector<std::string> describe_tuning(const nlohmann::json& tuning);

}  // namespace hpc
