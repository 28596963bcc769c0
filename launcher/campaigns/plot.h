// A sweep's results: the table (results.csv), the scaling math (steady-state tokens/s, speedup,
// efficiency) and what is made from it (summary.md, gnuplot plots as PNG and SVG).
//
// Everything here reads and writes files in a sweep directory; nothing submits jobs, so
// `hpclaunch report DIR` can re-render a sweep from its results.csv alone.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "follow/throughput.h"

namespace hpc {

// One point of a sweep: a (preset, strategy) pair and what came of its job.
struct ResultRow {
  std::string preset, strategy;
  std::string point;   // the point's name ("1n2g-ddp-micro_batch.8"); "" = PRESET-STRATEGY
  std::string series;  // the rows compared in speedup; "" = the strategy
  int repeat = 1;      // which run of the point (--repeats)
  int nodes = 0, gpus = 0;
  std::string job_id;
  std::string state;                   // Slurm's word (COMPLETED, FAILED, ...), START_TIMEOUT,
                                       // NOT_SUBMITTED, or a live state for an unfinished sweep
  std::optional<double> tokens_per_s;  // steady-state mean over all ranks; none if unknown
  std::optional<double> tokens_per_s_std;
  int steps_used = 0;                // steps that went into the mean (warm-up excluded)
  std::optional<double> speedup;     // vs the smallest measured point of the same strategy
  std::optional<double> efficiency;  // speedup / (gpus / gpus of that point)
  std::string run_dir, log;          // where the job ran and its log (on the backend's host)
  std::string message;               // why a point has no numbers, one line
  // The first start's phases, in seconds (follow/startup.h): pending, the script's set-up,
  // launch to rendezvous (or the program's first line), to the first step (or metric line).
  std::optional<double> startup_queue_s, startup_environment_s, startup_rendezvous_s,
      startup_first_step_s;

  std::optional<double> tokens_per_s_per_gpu() const;
};

// Fills speedup and efficiency: per series, relative to the mean over the repeats of the
// measured point with the fewest GPUs (ties: the first point). Rows without tokens/s get neither.
void compute_scaling(std::vector<ResultRow>& rows);

// results.csv: a header line, then one RFC 4180 row per point.
std::string results_csv(const std::vector<ResultRow>& rows);
// Parses results.csv (columns found by header name). Throws UserError "origin:LINE: ..." on a
// malformed file.
std::vector<ResultRow> parse_results_csv(const std::string& text, const std::string& origin);

// What rendering produced: files written, and problems (gnuplot missing or failing), each a line.
struct ReportOutcome {
  std::vector<std::string> written;
  std::vector<std::string> problems;
};

// Writes summary.md and plots/ (speedup.gp, efficiency.gp, scaling-STRATEGY.dat, and the PNG
// and SVG gnuplot renders from them) into `dir`. `title` heads summary.md.
ReportOutcome write_report(const std::filesystem::path& dir, const std::vector<ResultRow>& rows,
                           const std::string& title);

// `hpclaunch report DIR`: reads DIR/results.csv, recomputes speedup and efficiency, re-renders.
// Returns the exit status (1 when a plot could not be made).
int report_sweep_dir(const std::filesystem::path& dir);

// The point and series of a row, filled in for rows read from an older results.csv.
std::string point_name_of(const ResultRow& row);
std::string series_of(const ResultRow& row);

// Reads DIR/results.csv (checked as `report` checks it). Throws UserError.
std::vector<ResultRow> read_results_dir(const std::filesystem::path& dir);

// Text for summary.md: shown as written, never read as Markdown or HTML.
std::string markdown_text(const std::string& s);

}  // namespace hpc
