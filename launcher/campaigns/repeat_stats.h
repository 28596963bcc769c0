// A sweep point over its repeats (--repeats N): the mean, a 95% Student-t interval of the mean,
// min and max, speedup and efficiency with their intervals, and a flag when the repeats disagree
// by more than kRepeatDisagreement. What summary.md, the plots and `report --compare` show.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "campaigns/plot.h"

namespace hpc {

// Repeats of a point disagree when (max - min) / mean is above this: the point is flagged.
inline constexpr double kRepeatDisagreement = 0.10;

struct PointStats {
  std::string point, preset, strategy, series;
  int nodes = 0, gpus = 0;
  int runs = 0;                    // rows (repeats) of the point
  int measured = 0;                // of them with tokens/s
  std::optional<double> mean;      // over the measured repeats
  std::optional<double> ci95;      // half-width of the 95% t-interval of the mean; 2+ repeats
  std::optional<double> min, max;  // over the measured repeats
  std::optional<double> step_std;  // one repeat: the std over its steps (as before repeats)
  std::optional<double> speedup, speedup_ci95;  // vs the series' point with the fewest GPUs
  std::optional<double> efficiency, efficiency_ci95;
  bool disagree = false;             // (max - min) / mean > kRepeatDisagreement
  std::vector<std::string> job_ids;  // of its repeats, in order
  std::vector<ResultRow> problems;   // its repeats without a number

  std::optional<double> per_gpu() const;
  std::optional<double> per_gpu_ci95() const;
};

// Two-sided 95% critical value of Student's t with `dof` degrees of freedom (dof >= 1).
double t_critical_95(int dof);

// One PointStats per point, in the order the points first appear in `rows`. The baseline's own
// interval is not carried into speedup's: speedup_ci95 = ci95 / the baseline's mean.
std::vector<PointStats> summarise_points(const std::vector<ResultRow>& rows);

// summary.md: one row per point (mean, its 95% interval, min-max over repeats, tokens/s per GPU,
// speedup, efficiency, a flag where the repeats disagree), then the runs without a number and
// the plots.
std::string summary_markdown(const std::vector<PointStats>& points, const std::string& title,
                             bool with_plots);

}  // namespace hpc
