#include "dist/node_check_verdict.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "error.h"

namespace hpc::train {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

namespace {

// The figures of one kind that were measured.
std::vector<double> measured(const std::vector<NodeFigures>& nodes, double NodeFigures::*field) {
  std::vector<double> out;
  for (const auto& n : nodes) {
    if (n.*field >= 0) out.push_back(n.*field);
  }
  return out;
}

// "" when `value` is within the margin of `mid`, else why it is not.
std::string below_median(const char* what, const char* unit, double value, double mid,
                         double margin) {
  if (value < 0 || mid <= 0 || value >= mid * (1 - margin)) return "";
  return fmt::format("{} {:.4g} {} is {:.0f}% below the median {:.4g}", what, value, unit,
                     100 * (1 - value / mid), mid);
}

}  // namespace

std::vector<NodeVerdict> judge_nodes(const std::vector<NodeFigures>& nodes, double margin) {
  if (!(margin > 0 && margin < 1)) {
    throw UserError("--margin", fmt::format("{} is not between 0 and 1", margin),
                    "give the fraction below the median that makes a node slow, e.g. 0.2");
  }
  const double gemm_mid = median(measured(nodes, &NodeFigures::gemm_gflops));
  const double link_mid = median(measured(nodes, &NodeFigures::link_gbps));
  std::vector<NodeVerdict> out;
  for (const auto& n : nodes) {
    NodeVerdict v{n, false, ""};
    std::vector<std::string> reasons;
    for (auto r : {below_median("gemm", "GFLOP/s", n.gemm_gflops, gemm_mid, margin),
                   below_median("link", "GB/s", n.link_gbps, link_mid, margin)}) {
      if (!r.empty()) reasons.push_back(r);
    }
    v.slow = !reasons.empty();
    v.why = fmt::format("{}", fmt::join(reasons, "; "));
    out.push_back(v);
  }
  return out;
}

std::string verdict_line(const NodeVerdict& v) {
  std::string line = v.figures.node;
  if (v.figures.gemm_gflops >= 0)
    line += fmt::format(" gemm {:.1f} GFLOP/s", v.figures.gemm_gflops);
  if (v.figures.link_gbps >= 0) line += fmt::format(" link {:.3f} GB/s", v.figures.link_gbps);
  return line + (v.slow ? ": SLOW (" + v.why + ")" : ": ok");
}

std::vector<std::string> slow_nodes(const std::vector<NodeVerdict>& verdicts) {
  std::vector<std::string> out;
  for (const auto& v : verdicts) {
    if (v.slow) out.push_back(v.figures.node);
  }
  return out;
}

int round_partner(int rank, int round, int n) {
  const int m = n + n % 2;
  if (rank == m - 1) return round;
  if (rank == round) return m - 1;
  return ((2 * round - rank) % (m - 1) + (m - 1)) % (m - 1);
}

double test_slowdown(const std::string& node, const char* faults, const char* slow_nodes,
                     const char* factor) {
  if (!faults || std::string(faults) != "1" || !slow_nodes) return 1;
  std::stringstream names(slow_nodes);
  bool named = false;
  for (std::string one; std::getline(names, one, ',');) named = named || one == node;
  if (!named) return 1;
  double f = factor && *factor ? std::strtod(factor, nullptr) : 4;
  return f >= 1 ? f : 1;
}

}  // namespace hpc::train
