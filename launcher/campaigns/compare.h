// `hpclaunch report --compare DIR_A DIR_B`: two sweeps (before and after a change, two
// clusters) side by side, point by point, with the ratio B / A of their mean tokens/s, as a
// Markdown table (printed and written), a CSV and a gnuplot bar chart (PNG and SVG).
// docs/sweeps.md#comparing-two-sweeps.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "campaigns/repeat_stats.h"

namespace hpc {

// One point of either sweep, matched by name.
struct ComparedPoint {
  std::string point;
  int gpus = 0;
  std::optional<PointStats> a, b;
  std::optional<double> ratio;       // mean B / mean A
  std::optional<double> ratio_ci95;  // r * sqrt((ciA/mA)^2 + (ciB/mB)^2): first-order, both sides
  bool clear = false;                // |mean B - mean A| exceeds the sum of the two 95% half-widths
};

// Points of A in A's order, then those only in B.
std::vector<ComparedPoint> compare_points(const std::vector<PointStats>& a,
                                          const std::vector<PointStats>& b);

// The Markdown table: point | GPUs | A tokens/s | ± | B tokens/s | ± | B/A | clear.
std::string compare_table(const std::vector<ComparedPoint>& points, const std::string& name_a,
                          const std::string& name_b);

// Reads both sweeps' results.csv, prints the table on stdout and writes OUT/compare.md,
// compare.csv and plots/ratio.{gp,dat,png,svg}. `out` "" = compare-NAME_A-vs-NAME_B. Returns 0, or
// 1 when the plot could not be made. Throws UserError for a missing or malformed sweep.
int report_compare(const std::filesystem::path& dir_a, const std::filesystem::path& dir_b,
                   const std::string& out);

}  // namespace hpc
