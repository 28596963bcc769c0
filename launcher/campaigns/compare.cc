#include "campaigns/compare.h"

#include <cctype>
#include <cmath>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "atomic_file.h"
#include "error.h"
#include "shell.h"
#include "subprocess.h"

namespace fs = std::filesystem;

namespace hpc {
namespace {

std::string cell(const std::optional<double>& v, int decimals) {
  return v ? fmt::format("{:.{}f}", *v, decimals) : std::string("–");
}

std::string spread(const std::optional<PointStats>& s) {
  if (!s) return "–";
  return cell(s->ci95 ? s->ci95 : s->step_std, 1);
}

std::string sweep_label(const fs::path& dir) {
  std::string name = dir.lexically_normal().filename().string();
  if (name.empty()) name = dir.lexically_normal().parent_path().filename().string();
  return name.empty() ? "sweep" : name;
}

// A word for a file name or gnuplot text: the label's safe characters.
std::string safe_word(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    out += std::isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-' ? static_cast<char>(c)
                                                                           : '_';
  return out.empty() || out[0] == '.' ? "_" + out : out;
}

std::string ratio_plot_script(const std::string& a, const std::string& b, int bars) {
  std::string s =
      "# The ratio B / A of mean tokens/s per point; the error bars combine both sweeps' 95%\n"
      "# Student-t intervals to first order. Written by hpclaunch report --compare; re-render\n"
      "# with `gnuplot ratio.gp` here. Data: ratio.dat (columns: index ratio ratio_ci95 point).\n";
  s += "set ylabel " + gnuplot_string("tokens/s ratio " + b + " / " + a) + " noenhanced\n";
  s += "set style fill solid 0.5 border -1\nset boxwidth 0.6\nset grid ytics\n";
  s += "set xtics rotate by -35 noenhanced\nset yrange [0:*]\nset offsets 0, 0, graph 0.1, 0\n";
  s += "set key off\n";
  s += fmt::format("set xrange [-0.6:{}]\n", bars - 0.4);
  const std::string plot =
      "plot 'ratio.dat' using 1:2:3:xticlabels(4) with boxerrorbars linecolor rgb \"#4477aa\", "
      "1 with lines dashtype 2 linecolor rgb \"gray40\"";
  s += "set terminal pngcairo size 900,560 enhanced font \"sans,11\"\n";
  s += "set output 'ratio.png'\n" + plot + "\n";
  s += "set terminal svg size 900,560 dynamic enhanced font \"sans,11\"\n";
  s += "set output 'ratio.svg'\nreplot\nunset output\n";
  return s;
}

}  // namespace

std::vector<ComparedPoint> compare_points(const std::vector<PointStats>& a,
                                          const std::vector<PointStats>& b) {
  std::vector<ComparedPoint> out;
  std::map<std::string, size_t> index;
  for (const auto& s : a) {
    index[s.point] = out.size();
    out.push_back({s.point, s.gpus, s, std::nullopt, std::nullopt, std::nullopt, false});
  }
  for (const auto& s : b) {
    auto it = index.find(s.point);
    if (it == index.end()) {
      out.push_back({s.point, s.gpus, std::nullopt, s, std::nullopt, std::nullopt, false});
      continue;
    }
    out[it->second].b = s;
  }
  for (auto& p : out) {
    if (!p.a || !p.b || !p.a->mean || !p.b->mean || *p.a->mean <= 0) continue;
    const double ma = *p.a->mean, mb = *p.b->mean;
    p.ratio = mb / ma;
    const double ca = p.a->ci95.value_or(0), cb = p.b->ci95.value_or(0);
    if (p.a->ci95 || p.b->ci95)
      p.ratio_ci95 = *p.ratio * std::sqrt(std::pow(ca / ma, 2) + std::pow(cb / mb, 2));
    p.clear = p.a->ci95 && p.b->ci95 && std::abs(mb - ma) > ca + cb;
  }
  return out;
}

std::string compare_table(const std::vector<ComparedPoint>& points, const std::string& name_a,
                          const std::string& name_b) {
  std::string md = "| point | GPUs | A tokens/s | ± | B tokens/s | ± | B/A | clear |\n";
  md += "|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const auto& p : points) {
    std::string ratio = p.ratio ? fmt::format("{:.3f}", *p.ratio) : "–";
    if (p.ratio_ci95) ratio += fmt::format(" ± {:.3f}", *p.ratio_ci95);
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", markdown_text(p.point), p.gpus,
                      cell(p.a ? p.a->mean : std::nullopt, 1), spread(p.a),
                      cell(p.b ? p.b->mean : std::nullopt, 1), spread(p.b), ratio,
                      !p.a || !p.b ? "only in " + std::string(p.a ? "A" : "B")
                      : p.clear    ? "yes"
                                   : "");
  }
  md += "\nA = " + markdown_text(name_a) + ", B = " + markdown_text(name_b) +
        ". Means over each point's repeats; ± is the 95% Student-t interval of the mean (one "
        "run: the std over its steps); B/A's ± combines both to first order. clear: the means "
        "differ by more than the two intervals together.\n";
  return md;
}

int report_compare(const fs::path& dir_a, const fs::path& dir_b, const std::string& out) {
  const std::vector<PointStats> a = summarise_points(read_results_dir(dir_a));
  const std::vector<PointStats> b = summarise_points(read_results_dir(dir_b));
  const std::string name_a = sweep_label(dir_a), name_b = sweep_label(dir_b);
  const fs::path dir = out.empty()
                           ? fs::path("compare-" + safe_word(name_a) + "-vs-" + safe_word(name_b))
                           : fs::path(out);
  const std::vector<ComparedPoint> points = compare_points(a, b);
  const std::string table = compare_table(points, dir_a.string(), dir_b.string());

  std::string csv = "point,gpus,a_mean,a_ci95,b_mean,b_ci95,ratio,ratio_ci95,clear\n";
  std::string dat = "# index ratio ratio_ci95 point\n";
  int index = 0;
  for (const auto& p : points) {
    auto num = [](const std::optional<double>& v) { return v ? fmt::format("{:.4f}", *v) : ""; };
    csv += fmt::format("{},{},{},{},{},{},{},{},{}\n", p.point, p.gpus,
                       num(p.a ? p.a->mean : std::nullopt), num(p.a ? p.a->ci95 : std::nullopt),
                       num(p.b ? p.b->mean : std::nullopt), num(p.b ? p.b->ci95 : std::nullopt),
                       num(p.ratio), num(p.ratio_ci95), p.clear ? "yes" : "");
    if (p.ratio)
      dat += fmt::format("{} {:.6f} {:.6f} {}\n", index++, *p.ratio, p.ratio_ci95.value_or(0),
                         p.point);
  }
  // Every output checked before the first is written (a link or FIFO in the way stops it).
  std::error_code ec;
  if (fs::exists(dir, ec) && (fs::is_symlink(dir) || !fs::is_directory(dir)))
    throw UserError(dir.string(), "is not a directory of its own", "choose another --out");
  const fs::path plots = dir / "plots";
  if (fs::exists(plots, ec) && (fs::is_symlink(plots) || !fs::is_directory(plots)))
    throw UserError(plots.string(), "is not a directory of its own", "remove it");
  for (const fs::path& f : {dir / "compare.md", dir / "compare.csv", plots / "ratio.gp",
                            plots / "ratio.dat", plots / "ratio.png", plots / "ratio.svg"})
    output_kind(f);
  fs::create_directories(plots, ec);
  if (ec) throw UserError(plots.string(), "cannot create: " + ec.message(), "check the path");
  std::cout << table;
  write_file_atomically(dir / "compare.md", "# " + markdown_text(name_b) + " vs " +
                                                markdown_text(name_a) + "\n\n" + table +
                                                "\n![B / A per point](plots/ratio.png)\n");
  write_file_atomically(dir / "compare.csv", csv);
  write_file_atomically(plots / "ratio.dat", dat);
  write_file_atomically(plots / "ratio.gp", ratio_plot_script(name_a, name_b, index));
  std::cerr << "hpclaunch: wrote " << (dir / "compare.md").string() << ", "
            << (dir / "compare.csv").string() << ", " << plots.string() << "/ratio.*\n";
  if (index == 0) {
    std::cerr << "hpclaunch: no point has a measurement in both sweeps; no plot was made\n";
    return 1;
  }
  if (!program_on_path("gnuplot")) {
    std::cerr << "hpclaunch: gnuplot is not installed: ratio.gp was written but not rendered "
                 "(Debian: apt install gnuplot-nox)\n";
    return 1;
  }
  CommandOptions o;
  o.cwd = plots.string();
  o.timeout = std::chrono::seconds(60);
  CommandResult res = run_command({"gnuplot", "ratio.gp"}, o);
  if (!res.ok()) {
    std::cerr << "hpclaunch: " << comment_text(res.summary("gnuplot")) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace hpc
