#include "campaigns/plot.h"
#include "campaigns/repeat_stats.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "shell.h"
#include "subprocess.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

const std::vector<std::string>& csv_columns() {
  static const std::vector<std::string> c = {"preset",
                                             "strategy",
                                             "nodes",
                                             "gpus",
                                             "job_id",
                                             "state",
                                             "tokens_per_s_mean",
                                             "tokens_per_s_std",
                                             "tokens_per_s_per_gpu",
                                             "speedup",
                                             "efficiency",
                                             "steps_used",
                                             "run_dir",
                                             "log",
                                             "message",
                                             "point",
                                             "series",
                                             "repeat",
                                             "startup_queue_s",
                                             "startup_environment_s",
                                             "startup_rendezvous_s",
                                             "startup_first_step_s"};
  return c;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(const std::optional<double>& v, int decimals) {
  return v ? fmt::format("{:.{}f}", *v, decimals) : "";
}

// One CSV record and the line it starts on.
struct CsvRecord {
  int line = 0;
  std::vector<std::string> fields;
};

// RFC 4180 records; quoted fields may hold commas, quotes ("") and newlines.
std::vector<CsvRecord> parse_csv(const std::string& text, const std::string& origin) {
  std::vector<CsvRecord> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, in_record = false;
  int line = 1, record_line = 1, quote_line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (!in_record && field.empty()) record_line = line;
    if (c == '"') {
      if (!field.empty()) {
        throw UserError(origin + ":" + std::to_string(line), "a quote inside an unquoted field",
                        "put quotes around the whole field and double each quote in it (\"\")");
      }
      quoted = in_record = true;
      quote_line = line;
    } else if (c == ',') {
      record.push_back(field);
      field.clear();
      in_record = true;
    } else if (c == '\r') {
      // CRLF line ends
    } else if (c == '\n') {
      if (in_record || !field.empty()) {
        record.push_back(field);
        records.push_back({record_line, record});
      }
      record.clear();
      field.clear();
      in_record = false;
      ++line;
    } else {
      field += c;
      in_record = true;
    }
  }
  if (quoted)
    throw UserError(origin + ":" + std::to_string(quote_line), "a quoted field is not closed",
                    "add the closing quote");
  if (in_record || !field.empty()) {
    record.push_back(field);
    records.push_back({record_line, record});
  }
  return records;
}

// A decimal number as results_csv writes it: no blanks, no sign but '-', finite.
std::optional<double> parse_number(const std::string& s, const std::string& where) {
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && end == s.data() + s.size() && std::isfinite(v)) return v;
  throw UserError(where, "\"" + comment_text(s) + "\" is not a number", "fix or empty the field");
}

// A preset or strategy name: it names a file (plots/scaling-STRATEGY.dat) and is a word in
// the data files, the gnuplot scripts and summary.md, so it keeps to the characters of a preset
// file name (catalog.h) and nothing there can run, move or break anything.
void check_name(const std::string& name, const std::string& where, size_t max_size = 128) {
  bool ok = !name.empty() && name.size() <= max_size && name[0] != '.';
  for (unsigned char c : name)
    ok = ok && (std::isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-');
  if (!ok)
    throw UserError(where, "\"" + comment_text(name) + "\" is not a valid name",
                    "use letters, digits, '.', '_', '+' and '-', as in a preset's file name "
                    "(it names files in plots/)");
}

// plots/scaling-SERIES.dat, for a name check_name accepted.
std::string data_file_name(const std::string& series) { return "scaling-" + series + ".dat"; }

// The distinct series of the points, in first-seen order.
std::vector<std::string> series_names(const std::vector<PointStats>& points) {
  std::vector<std::string> out;
  for (const auto& p : points)
    if (std::find(out.begin(), out.end(), p.series) == out.end()) out.push_back(p.series);
  return out;
}

// One plot: a data column against GPUs with its error bars, to NAME.png and NAME.svg.
struct PlotSpec {
  std::string name, ylabel, why;
  int column, err_column;  // columns of scaling-SERIES.dat: the value and its 95% half-width
  std::string ideal;       // an expression in x for the dashed ideal line, or ""
};

std::vector<PlotSpec> plot_specs(int base_gpus) {
  return {
      {"speedup", fmt::format("speedup vs {} GPU{}", base_gpus, base_gpus == 1 ? "" : "s"),
       "Speedup vs GPUs, one series each; the dashed line is ideal (linear) scaling.", 2, 7,
       fmt::format("x / {}.0", base_gpus)},
      {"efficiency", "parallel efficiency",
       "Parallel efficiency (speedup / GPU ratio) vs GPUs, one series each.", 3, 8, "1"},
      {"per_gpu", "tokens/s per GPU",
       "Throughput per GPU vs GPUs (weak scaling: flat is perfect), one series each.", 9, 10, ""},
  };
}

std::string plot_script(const PlotSpec& spec, const std::vector<std::string>& series,
                        const std::vector<int>& gpus) {
  std::string tics;
  for (int g : gpus) tics += (tics.empty() ? "" : ", ") + std::to_string(g);
  int max_gpus = gpus.empty() ? 1 : gpus.back();
  std::string s;
  s += "# " + spec.why + "\n";
  s += "# Error bars: the 95% Student-t interval of the mean over a point's repeats (none for\n";
  s += "# one repeat). Written by hpclaunch; re-render with `gnuplot " + spec.name + ".gp` here,\n";
  s += "# or `hpclaunch report SWEEP_DIR` after editing results.csv.\n";
  s += "# Data: scaling-SERIES.dat (columns: gpus speedup efficiency tokens_per_s\n";
  s += "# tokens_per_s_std preset speedup_ci95 efficiency_ci95 tokens_per_s_per_gpu "
       "per_gpu_ci95).\n";
  s += "set xlabel \"GPUs\"\nset ylabel " + gnuplot_string(spec.ylabel) + "\n";
  s += "set key top left\nset grid\n";
  s += "set xtics (" + tics + ")\n";
  s += fmt::format("set xrange [0.5:{}]\n", max_gpus + 0.5);
  if (spec.column != 2) s += "set yrange [0:*]\n";
  s += "set offsets 0, 0, graph 0.1, 0\n";
  std::string plot = "plot ";
  if (!spec.ideal.empty())
    plot += spec.ideal + " with lines dashtype 2 linecolor rgb \"gray40\" title 'ideal'";
  for (const auto& st : series) {
    if (plot != "plot ") plot += ", \\\n     ";
    plot += fmt::format(
        "{} using 1:{}:{} with yerrorlines pointtype 7 linewidth 2 title {} noenhanced",
        gnuplot_string(data_file_name(st)), spec.column, spec.err_column, gnuplot_string(st));
  }
  s += "set terminal pngcairo size 800,560 enhanced font \"sans,11\"\n";
  s += "set output " + gnuplot_string(spec.name + ".png") + "\n" + plot + "\n";
  s += "set terminal svg size 800,560 dynamic enhanced font \"sans,11\"\n";
  s += "set output " + gnuplot_string(spec.name + ".svg") + "\nreplot\nunset output\n";
  return s;
}

// plots/ is a directory of the sweep's own, or not there yet: a link would carry every plot
// file somewhere else.
void check_plots_dir(const fs::path& plots) {
  std::error_code ec;
  auto type = fs::symlink_status(plots, ec).type();
  if (!ec && type != fs::file_type::not_found && type != fs::file_type::directory) {
    throw UserError(plots.string(),
                    type == fs::file_type::symlink ? "is a symbolic link, not a directory"
                                                   : "is not a directory",
                    "remove it; hpclaunch report makes the plots directory itself");
  }
}

// The points that get a mark in the plots.
std::vector<PointStats> measured_points(const std::vector<ResultRow>& rows) {
  std::vector<PointStats> out;
  for (const auto& p : summarise_points(rows))
    if (p.mean && p.speedup) out.push_back(p);
  return out;
}

// Every file a report writes into `dir` checked before the first is written (output_kind): a
// FIFO, link or folder in the way (a shared sweep folder) stops it with nothing written. That
// covers the PNG and SVG files gnuplot writes, which it would write through a link or block on
// as a FIFO. plots/ itself must be a directory of the sweep's own, or not there yet: a link
// would carry every plot file somewhere else.
void check_report_outputs(const fs::path& dir, const std::vector<ResultRow>& rows) {
  output_kind(dir / "summary.md");
  const std::vector<PointStats> measured = measured_points(rows);
  if (measured.empty()) return;
  check_plots_dir(dir / "plots");
  for (const auto& st : series_names(measured)) output_kind(dir / "plots" / data_file_name(st));
  for (const auto& spec : plot_specs(1))
    for (const char* ext : {".gp", ".png", ".svg"})
      output_kind(dir / "plots" / (spec.name + std::string(ext)));
}

}  // namespace

// Text for summary.md: shown as written, never read as Markdown or HTML. Control characters
// are shown escaped (\n), and every character that could start markup inside a line (a code
// span, emphasis, a link or image, an HTML tag or entity, a cell border, strikethrough, math)
// is backslash-escaped (CommonMark: any ASCII punctuation may be). So are the characters that
// make a bare URL a link in GitHub's Markdown and its kin (autolinks: "https://", "www.", an
// address's '@'): a message's https\://example.org shows as written, not as a link (issue 35).
std::string markdown_text(const std::string& s) {
  const std::string text = comment_text(s);
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    bool escape = std::string_view("\\`*_[]<>|~&$:@").find(c) != std::string_view::npos;
    // The '.' of "www." at the start of a word.
    if (c == '.' && i >= 3 && (i == 3 || !std::isalnum(static_cast<unsigned char>(text[i - 4])))) {
      std::string w = text.substr(i - 3, 3);
      for (auto& ch : w) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      escape = escape || w == "www";
    }
    if (escape) out += '\\';
    out += c;
  }
  return out;
}

std::optional<double> ResultRow::tokens_per_s_per_gpu() const {
  if (!tokens_per_s || gpus <= 0) return std::nullopt;
  return *tokens_per_s / gpus;
}

void compute_scaling(std::vector<ResultRow>& rows) {
  std::map<std::string, std::pair<double, int>> base;  // series -> (mean tokens/s, GPUs)
  for (const auto& s : summarise_points(rows))
    if (s.speedup && *s.speedup == 1.0 && !base.count(s.series)) base[s.series] = {*s.mean, s.gpus};
  for (auto& r : rows) {
    r.speedup.reset();
    r.efficiency.reset();
    auto it = base.find(series_of(r));
    if (!r.tokens_per_s || r.gpus <= 0 || it == base.end()) continue;
    auto [tps, gpus] = it->second;
    r.speedup = *r.tokens_per_s / tps;
    r.efficiency = *r.speedup / (static_cast<double>(r.gpus) / gpus);
  }
}

std::string results_csv(const std::vector<ResultRow>& rows) {
  std::string out;
  for (const auto& c : csv_columns()) out += (out.empty() ? "" : ",") + c;
  out += "\n";
  for (const auto& r : rows) {
    std::vector<std::string> f = {r.preset,
                                  r.strategy,
                                  std::to_string(r.nodes),
                                  std::to_string(r.gpus),
                                  r.job_id,
                                  r.state,
                                  number(r.tokens_per_s, 2),
                                  number(r.tokens_per_s_std, 2),
                                  number(r.tokens_per_s_per_gpu(), 2),
                                  number(r.speedup, 4),
                                  number(r.efficiency, 4),
                                  std::to_string(r.steps_used),
                                  r.run_dir,
                                  r.log,
                                  r.message,
                                  point_name_of(r),
                                  series_of(r),
                                  std::to_string(r.repeat),
                                  number(r.startup_queue_s, 2),
                                  number(r.startup_environment_s, 2),
                                  number(r.startup_rendezvous_s, 2),
                                  number(r.startup_first_step_s, 2)};
    std::string line;
    for (size_t i = 0; i < f.size(); ++i) line += (i ? "," : "") + csv_field(f[i]);
    out += line + "\n";
  }
  return out;
}

std::vector<ResultRow> parse_results_csv(const std::string& text, const std::string& origin) {
  auto records = parse_csv(text, origin);
  if (records.empty())
    throw UserError(origin, "empty file", "it needs a header line and one row per point");
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < records[0].fields.size(); ++i) col[records[0].fields[i]] = i;
  for (const char* needed : {"preset", "strategy", "gpus", "state", "tokens_per_s_mean"}) {
    if (!col.count(needed)) {
      throw UserError(origin + ":1", std::string("no column \"") + needed + "\" in the header",
                      "use the header hpclaunch sweep writes (it names every column)");
    }
  }
  std::vector<ResultRow> rows;
  for (size_t n = 1; n < records.size(); ++n) {
    const auto& rec = records[n].fields;
    const std::string where = origin + ":" + std::to_string(records[n].line) + ": ";
    auto get = [&](const std::string& name) -> std::string {
      auto it = col.find(name);
      return it != col.end() && it->second < rec.size() ? rec[it->second] : "";
    };
    auto number = [&](const std::string& name) { return parse_number(get(name), where + name); };
    auto integer = [&](const std::string& name) {
      auto v = number(name);
      // Whole and within int's range, or the cast is undefined (found by fuzzing: "1e10" and
      // "nan" became -2147483648, "2.9" became 2). NaN fails the first test.
      constexpr double kMax = std::numeric_limits<int>::max();
      if (v && (*v != std::floor(*v) || *v < 0 || *v > kMax))
        throw UserError(where + name, "\"" + get(name) + "\" is not a count",
                        "write a whole number from 0 to 2147483647, or empty the field");
      return v ? static_cast<int>(*v) : 0;
    };
    ResultRow r;
    r.preset = get("preset");
    r.strategy = get("strategy");
    check_name(r.preset, where + "preset");
    check_name(r.strategy, where + "strategy");
    r.point = get("point");
    r.series = get("series");
    // A point or series name joins a preset and a strategy (and values): up to 2 x 128 + 1.
    if (!r.point.empty()) check_name(r.point, where + "point", 257);
    if (!r.series.empty()) check_name(r.series, where + "series", 257);
    r.repeat = get("repeat").empty() ? 1 : integer("repeat");
    if (r.repeat < 1)
      throw UserError(where + "repeat", "\"" + get("repeat") + "\" is not a repeat number",
                      "number the repeats of a point from 1");
    r.nodes = integer("nodes");
    r.gpus = integer("gpus");
    r.job_id = get("job_id");
    r.state = get("state");
    r.tokens_per_s = number("tokens_per_s_mean");
    r.tokens_per_s_std = number("tokens_per_s_std");
    r.speedup = number("speedup");
    r.efficiency = number("efficiency");
    r.steps_used = integer("steps_used");
    r.run_dir = get("run_dir");
    r.log = get("log");
    r.message = get("message");
    r.startup_queue_s = number("startup_queue_s");
    r.startup_environment_s = number("startup_environment_s");
    r.startup_rendezvous_s = number("startup_rendezvous_s");
    r.startup_first_step_s = number("startup_first_step_s");
    if (r.gpus <= 0)
      throw UserError(where + "gpus", "needs a positive GPU count", "fix the row or remove it");
    rows.push_back(r);
  }
  return rows;
}

// Runs gnuplot on plots/NAME.gp; a problem is a line in `outcome`.
static void render_gnuplot(const fs::path& plots, const std::string& name, ReportOutcome& outcome) {
  const fs::path gp = plots / (name + ".gp");
  if (!program_on_path("gnuplot")) {
    outcome.problems.push_back("gnuplot is not installed: " + gp.string() +
                               " was written but not rendered (Debian: apt install gnuplot-nox)");
    return;
  }
  CommandOptions o;
  o.cwd = plots.string();
  o.timeout = std::chrono::seconds(60);
  CommandResult res = run_command({"gnuplot", name + ".gp"}, o);
  if (!res.ok()) {
    outcome.problems.push_back(gp.string() + ": " + res.summary("gnuplot"));
    return;
  }
  outcome.written.push_back((plots / (name + ".png")).string());
  outcome.written.push_back((plots / (name + ".svg")).string());
}

ReportOutcome write_report(const fs::path& dir, const std::vector<ResultRow>& rows,
                           const std::string& title) {
  ReportOutcome outcome;
  check_report_outputs(dir, rows);
  const std::vector<PointStats> points = summarise_points(rows);
  const std::vector<PointStats> measured = measured_points(rows);
  const fs::path plots = dir / "plots";

  write_file_atomically(dir / "summary.md", summary_markdown(points, title, !measured.empty()));
  outcome.written.push_back((dir / "summary.md").string());
  if (measured.empty()) {
    outcome.problems.push_back("no point has a measurement; no plots were made");
    return outcome;
  }
  std::error_code ec;
  fs::create_directories(plots, ec);
  if (ec)
    throw UserError(plots.string(), "cannot create the directory: " + ec.message(),
                    "check the permissions");
  std::set<int> gpu_set;
  for (const auto& p : measured) gpu_set.insert(p.gpus);
  std::vector<int> gpus(gpu_set.begin(), gpu_set.end());
  const std::vector<std::string> series = series_names(measured);
  for (const auto& st : series) {
    std::vector<PointStats> line;
    for (const auto& p : measured)
      if (p.series == st) line.push_back(p);
    std::stable_sort(line.begin(), line.end(),
                     [](const PointStats& a, const PointStats& b) { return a.gpus < b.gpus; });
    std::string dat = "# " + st +
                      ": gpus speedup efficiency tokens_per_s tokens_per_s_std preset "
                      "speedup_ci95 efficiency_ci95 tokens_per_s_per_gpu per_gpu_ci95\n";
    for (const auto& p : line) {
      dat += fmt::format("{} {:.6f} {:.6f} {:.3f} {:.3f} {} {:.6f} {:.6f} {:.3f} {:.3f}\n", p.gpus,
                         *p.speedup, *p.efficiency, *p.mean, p.step_std.value_or(0.0), p.preset,
                         p.speedup_ci95.value_or(0.0), p.efficiency_ci95.value_or(0.0),
                         *p.per_gpu(), p.per_gpu_ci95().value_or(0.0));
    }
    fs::path file = plots / data_file_name(st);
    write_file_atomically(file, dat);
    outcome.written.push_back(file.string());
  }
  // The ideal line starts from the smallest GPU count measured (the usual baseline).
  for (const auto& spec : plot_specs(gpus.front())) {
    fs::path gp = plots / (spec.name + ".gp");
    write_file_atomically(gp, plot_script(spec, series, gpus));
    outcome.written.push_back(gp.string());
    render_gnuplot(plots, spec.name, outcome);
  }
  return outcome;
}

std::string point_name_of(const ResultRow& r) {
  return r.point.empty() ? r.preset + "-" + r.strategy : r.point;
}

std::string series_of(const ResultRow& r) { return r.series.empty() ? r.strategy : r.series; }

std::vector<ResultRow> read_results_dir(const fs::path& dir) {
  fs::path csv = dir / "results.csv";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UserError(dir.string(), "no such sweep directory",
                    "pass the --out directory of hpclaunch sweep");
  if (!input_path_present(csv))
    throw UserError(csv.string(), "no results.csv here",
                    "run hpclaunch sweep --out " + dir.string() + " first");
  return parse_results_csv(read_input_file(csv, "results file", kMaxResultsFileBytes),
                           csv.string());
}

int report_sweep_dir(const fs::path& dir) {
  auto rows = read_results_dir(dir);
  compute_scaling(rows);
  StagedOutput csv_out(dir / "results.csv",
                       results_csv(rows));  // checked and staged before anything is written
  check_report_outputs(dir, rows);
  csv_out.commit();
  ReportOutcome out = write_report(dir, rows, "Scaling sweep " + dir.filename().string());
  for (const auto& f : out.written) std::cerr << "hpclaunch: wrote " << f << "\n";
  for (const auto& p : out.problems) std::cerr << "hpclaunch: " << comment_text(p) << "\n";
  return out.problems.empty() ? 0 : 1;
}

}  // namespace hpc
