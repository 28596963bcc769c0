#include "campaigns/repeat_stats.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace hpc {

std::optional<double> PointStats::per_gpu() const {
  if (!mean || gpus <= 0) return std::nullopt;
  return *mean / gpus;
}

std::optional<double> PointStats::per_gpu_ci95() const {
  if (!ci95 || gpus <= 0) return std::nullopt;
  return *ci95 / gpus;
}

double t_critical_95(int dof) {
  // Student's t, two-sided 95% (0.975 quantile), dof 1..30 (any statistics table).
  static const double table[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof < 1) return NAN;
  if (dof <= 30) return table[dof - 1];
  if (dof <= 40) return 2.021;
  if (dof <= 60) return 2.000;
  if (dof <= 120) return 1.980;
  return 1.960;
}

std::vector<PointStats> summarise_points(const std::vector<ResultRow>& rows) {
  std::vector<PointStats> out;
  std::map<std::string, size_t> index;
  std::map<std::string, std::vector<double>> values;
  for (const auto& r : rows) {
    const std::string name = point_name_of(r);
    auto it = index.find(name);
    if (it == index.end()) {
      PointStats s;
      s.point = name;
      s.preset = r.preset;
      s.strategy = r.strategy;
      s.series = series_of(r);
      s.nodes = r.nodes;
      s.gpus = r.gpus;
      it = index.emplace(name, out.size()).first;
      out.push_back(s);
    }
    PointStats& s = out[it->second];
    ++s.runs;
    if (!r.job_id.empty()) s.job_ids.push_back(r.job_id);
    if (r.tokens_per_s) {
      values[name].push_back(*r.tokens_per_s);
      s.step_std = r.tokens_per_s_std;
    } else {
      s.problems.push_back(r);
    }
  }
  for (auto& s : out) {
    const auto& v = values[s.point];
    s.measured = static_cast<int>(v.size());
    if (v.empty()) continue;
    double sum = 0;
    for (double x : v) sum += x;
    const double n = static_cast<double>(v.size());
    s.mean = sum / n;
    s.min = *std::min_element(v.begin(), v.end());
    s.max = *std::max_element(v.begin(), v.end());
    if (v.size() >= 2) {
      double sq = 0;
      for (double x : v) sq += (x - *s.mean) * (x - *s.mean);
      s.ci95 =
          t_critical_95(static_cast<int>(v.size()) - 1) * std::sqrt(sq / (n - 1)) / std::sqrt(n);
      s.step_std.reset();  // the spread over repeats is the one that counts
      s.disagree = *s.mean > 0 && (*s.max - *s.min) / *s.mean > kRepeatDisagreement;
    }
  }
  // Speedup per series against its measured point with the fewest GPUs.
  std::map<std::string, const PointStats*> base;
  for (const auto& s : out) {
    if (!s.mean || *s.mean <= 0 || s.gpus <= 0) continue;
    auto it = base.find(s.series);
    if (it == base.end() || s.gpus < it->second->gpus) base[s.series] = &s;
  }
  std::map<std::string, std::pair<double, int>> base_value;
  for (const auto& [series, s] : base) base_value[series] = {*s->mean, s->gpus};
  for (auto& s : out) {
    auto it = base_value.find(s.series);
    if (!s.mean || it == base_value.end()) continue;
    auto [mean, gpus] = it->second;
    const double ratio = static_cast<double>(s.gpus) / gpus;
    s.speedup = *s.mean / mean;
    s.efficiency = *s.speedup / ratio;
    if (s.ci95) {
      s.speedup_ci95 = *s.ci95 / mean;
      s.efficiency_ci95 = *s.speedup_ci95 / ratio;
    }
  }
  return out;
}

std::string summary_markdown(const std::vector<PointStats>& points, const std::string& title,
                             bool with_plots) {
  std::string md = "# " + markdown_text(title) + "\n\n";
  md += fmt::format(
      "Steady-state training throughput per point (warm-up steps excluded). With repeats: the\n"
      "mean over the repeats, **± the half-width of its 95% Student-t interval**, and min-max.\n"
      "With one run: ± the sample standard deviation over its steps. Speedup is against the\n"
      "point with the fewest GPUs of the same series (its interval is the point's divided by\n"
      "that point's mean); efficiency = speedup / (GPUs / its GPUs). Weak scaling: read\n"
      "tokens/s per GPU (flat is perfect). ⚠ marks a point whose repeats differ by more than\n"
      "{:.0f}% of their mean ((max - min) / mean).\n\n",
      kRepeatDisagreement * 100);
  md +=
      "| point | series | nodes | GPUs | runs | tokens/s | ± | min-max | tokens/s per GPU | "
      "speedup | efficiency | | jobs |\n";
  md += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n";
  auto cell = [](const std::optional<double>& v, int d) {
    return v ? fmt::format("{:.{}f}", *v, d) : std::string("–");
  };
  for (const auto& p : points) {
    std::optional<double> spread = p.ci95 ? p.ci95 : p.step_std;
    std::string range =
        p.min && p.measured > 1 ? fmt::format("{:.1f}-{:.1f}", *p.min, *p.max) : "–";
    std::string speedup = p.speedup ? fmt::format("{:.2f}x", *p.speedup) : "–";
    if (p.speedup_ci95) speedup += fmt::format(" ± {:.2f}", *p.speedup_ci95);
    std::string jobs;
    for (const auto& j : p.job_ids) jobs += (jobs.empty() ? "" : " ") + j;
    md += fmt::format("| {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                      markdown_text(p.point), markdown_text(p.series), p.nodes, p.gpus, p.measured,
                      p.runs, cell(p.mean, 1), cell(spread, 1), range, cell(p.per_gpu(), 1),
                      speedup, p.efficiency ? fmt::format("{:.0f}%", *p.efficiency * 100) : "–",
                      p.disagree ? "⚠ repeats disagree" : "",
                      jobs.empty() ? "–" : markdown_text(jobs));
  }
  std::string problems;
  for (const auto& p : points)
    for (const auto& r : p.problems) {
      problems += "- " + markdown_text(p.point);
      if (p.runs > 1) problems += " (repeat " + std::to_string(r.repeat) + ")";
      problems += ": " + markdown_text(r.state);
      if (!r.message.empty()) problems += " — " + markdown_text(r.message);
      if (!r.log.empty()) problems += " (log: " + markdown_text(r.log) + ")";
      problems += "\n";
    }
  if (!problems.empty()) md += "\n## Points without a measurement\n\n" + problems;
  if (with_plots) {
    md +=
        "\n## Plots\n\n![speedup vs GPUs](plots/speedup.png)\n\n![efficiency vs "
        "GPUs](plots/efficiency.png)\n\n![tokens/s per GPU](plots/per_gpu.png)\n\n"
        "Error bars: the 95% Student-t interval over the repeats. SVG versions, the gnuplot "
        "scripts (`*.gp`) and their data (`scaling-*.dat`) are in `plots/`.\n";
  }
  return md;
}

}  // namespace hpc
