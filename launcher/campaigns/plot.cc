#include "campaigns/plot.h"

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
#include "render/shell.h"
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
                                             "message"};
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
void check_name(const std::string& name, const std::string& where) {
  bool ok = !name.empty() && name.size() <= 128 && name[0] != '.';
  for (unsigned char c : name)
    ok = ok && (std::isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-');
  if (!ok)
    throw UserError(where, "\"" + comment_text(name) + "\" is not a valid name",
                    "use letters, digits, '.', '_', '+' and '-', as in a preset's file name "
                    "(it names files in plots/)");
}

// plots/scaling-STRATEGY.dat, for a name check_name accepted.
std::string data_file_name(const std::string& strategy) { return "scaling-" + strategy + ".dat"; }

// The distinct strategies of the rows, in first-seen order.
std::vector<std::string> strategies_of(const std::vector<ResultRow>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (std::find(out.begin(), out.end(), r.strategy) == out.end()) out.push_back(r.strategy);
  return out;
}

// A gnuplot string constant that is only text: single-quoted, where gnuplot expands no
// backquoted command, no @macro and no backslash escape (a double-quoted one runs `...`); a
// quote is doubled. Control characters (a newline would end the command) are dropped.
std::string gnuplot_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
  }
  return out + "'";
}

// A gnuplot script that plots `column` of each strategy's data file against GPUs, to NAME.png
// and NAME.svg; `ideal` adds the dashed ideal line (an expression in x).
std::string plot_script(const std::string& name, const std::string& ylabel, int column,
                        const std::vector<std::string>& strategies, const std::string& ideal,
                        const std::string& ideal_title, const std::vector<int>& gpus,
                        const std::string& why) {
  std::string tics;
  for (int g : gpus) tics += (tics.empty() ? "" : ", ") + std::to_string(g);
  int max_gpus = gpus.empty() ? 1 : gpus.back();
  std::string s;
  s += "# " + why + "\n";
  s += "# Written by hpclaunch; re-render with `gnuplot " + name + ".gp` in this directory, or\n";
  s += "# `hpclaunch report SWEEP_DIR` after editing results.csv.\n";
  s += "# Data: scaling-STRATEGY.dat (columns: gpus speedup efficiency tokens_per_s "
       "tokens_per_s_std).\n";
  s += "set xlabel \"GPUs\"\nset ylabel " + gnuplot_string(ylabel) + "\n";
  s += "set key top left\nset grid\n";
  s += "set xtics (" + tics + ")\n";
  s += fmt::format("set xrange [0.5:{}]\n", max_gpus + 0.5);
  if (column == 3) s += "set yrange [0:*]\n";
  s += "set offsets 0, 0, graph 0.1, 0\n";
  std::string plot = "plot ";
  if (!ideal.empty())
    plot += ideal + " with lines dashtype 2 linecolor rgb \"gray40\" title " +
            gnuplot_string(ideal_title) + " noenhanced";
  for (const auto& st : strategies) {
    if (plot != "plot ") plot += ", \\\n     ";
    plot +=
        fmt::format("{} using 1:{} with linespoints pointtype 7 linewidth 2 title {} noenhanced",
                    gnuplot_string(data_file_name(st)), column, gnuplot_string(st));
  }
  s += "set terminal pngcairo size 800,560 enhanced font \"sans,11\"\n";
  s += "set output " + gnuplot_string(name + ".png") + "\n" + plot + "\n";
  s += "set terminal svg size 800,560 dynamic enhanced font \"sans,11\"\n";
  s += "set output " + gnuplot_string(name + ".svg") + "\nreplot\nunset output\n";
  return s;
}

// Text for summary.md: shown as written, never read as Markdown or HTML. Control characters
// are shown escaped (\n), and every character that could start markup inside a line (a code
// span, emphasis, a link or image, an HTML tag or entity, a cell border, strikethrough, math)
// is backslash-escaped (CommonMark: any ASCII punctuation may be).
std::string markdown_text(const std::string& s) {
  std::string out;
  for (char c : comment_text(s)) {
    if (std::string_view("\\`*_[]<>|~&$").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string summary_markdown(const std::vector<ResultRow>& rows, const std::string& title,
                             bool with_plots) {
  std::string md = "# " + markdown_text(title) + "\n\n";
  md +=
      "Steady-state training throughput per point (warm-up steps excluded; mean ± sample\n"
      "standard deviation over the remaining steps). Speedup is against the measured point with\n"
      "the fewest GPUs of the same strategy; efficiency = speedup / (GPUs / its GPUs).\n\n";
  md +=
      "| preset | strategy | nodes | GPUs | state | tokens/s | ± std | tokens/s per GPU | speedup "
      "| efficiency | job |\n";
  md += "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n";
  auto cell = [](const std::optional<double>& v, int d) {
    return v ? fmt::format("{:.{}f}", *v, d) : std::string("–");
  };
  for (const auto& r : rows) {
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                      markdown_text(r.preset), markdown_text(r.strategy), r.nodes, r.gpus,
                      markdown_text(r.state), cell(r.tokens_per_s, 1), cell(r.tokens_per_s_std, 1),
                      cell(r.tokens_per_s_per_gpu(), 1),
                      r.speedup ? fmt::format("{:.2f}x", *r.speedup) : "–",
                      r.efficiency ? fmt::format("{:.0f}%", *r.efficiency * 100) : "–",
                      r.job_id.empty() ? "–" : markdown_text(r.job_id));
  }
  std::string problems;
  for (const auto& r : rows) {
    if (r.tokens_per_s) continue;
    problems += "- " + markdown_text(r.preset) + " / " + markdown_text(r.strategy) + ": " +
                markdown_text(r.state);
    if (!r.message.empty()) problems += " — " + markdown_text(r.message);
    if (!r.log.empty()) problems += " (log: " + markdown_text(r.log) + ")";
    problems += "\n";
  }
  if (!problems.empty()) md += "\n## Points without a measurement\n\n" + problems;
  if (with_plots) {
    md +=
        "\n## Plots\n\n![speedup vs GPUs](plots/speedup.png)\n\n![efficiency vs "
        "GPUs](plots/efficiency.png)\n\n"
        "SVG versions, the gnuplot scripts (`*.gp`) and their data (`scaling-*.dat`) are in "
        "`plots/`.\n";
  }
  return md;
}

// The rows that get a point in the plots.
std::vector<ResultRow> measured_rows(const std::vector<ResultRow>& rows) {
  std::vector<ResultRow> out;
  for (const auto& r : rows)
    if (r.tokens_per_s && r.speedup) out.push_back(r);
  return out;
}

// Every file a report writes into `dir` checked before the first is written (output_kind): a
// FIFO, link or folder in the way (a shared sweep folder) stops it with nothing written. That
// covers the PNG and SVG files gnuplot writes, which it would write through a link or block on
// as a FIFO. plots/ itself must be a directory of the sweep's own, or not there yet: a link
// would carry every plot file somewhere else.
void check_report_outputs(const fs::path& dir, const std::vector<ResultRow>& rows) {
  output_kind(dir / "summary.md");
  const std::vector<ResultRow> measured = measured_rows(rows);
  if (measured.empty()) return;
  const fs::path plots = dir / "plots";
  std::error_code ec;
  auto type = fs::symlink_status(plots, ec).type();
  if (!ec && type != fs::file_type::not_found && type != fs::file_type::directory) {
    throw UserError(plots.string(),
                    type == fs::file_type::symlink ? "is a symbolic link, not a directory"
                                                   : "is not a directory",
                    "remove it; hpclaunch report makes the plots directory itself");
  }
  for (const auto& st : strategies_of(measured)) output_kind(plots / data_file_name(st));
  for (const char* name : {"speedup", "efficiency"})
    for (const char* ext : {".gp", ".png", ".svg"}) output_kind(plots / (name + std::string(ext)));
}

}  // namespace

std::optional<double> ResultRow::tokens_per_s_per_gpu() const {
  if (!tokens_per_s || gpus <= 0) return std::nullopt;
  return *tokens_per_s / gpus;
}

std::vector<double> tokens_per_s_from_metrics(const std::string& jsonl) {
  std::map<long, double> by_step;
  size_t start = 0;
  int line = 0;
  while (start < jsonl.size()) {
    size_t end = jsonl.find('\n', start);
    if (end == std::string::npos) end = jsonl.size();
    std::string text = jsonl.substr(start, end - start);
    start = end + 1;
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      // A last line cut short by a job that was killed mid-write is not an error.
      if (start >= jsonl.size()) break;
      throw std::runtime_error("line " + std::to_string(line) + " is not a JSON object");
    }
    if (!j.contains("tokens_per_s") || !j["tokens_per_s"].is_number()) continue;
    long step = j.contains("step") && j["step"].is_number_integer()
                    ? j["step"].get<long>()
                    : static_cast<long>(by_step.size());
    by_step[step] = j["tokens_per_s"].get<double>();
  }
  std::vector<double> out;
  for (const auto& [step, v] : by_step) out.push_back(v);
  return out;
}

std::optional<Throughput> steady_state(const std::vector<double>& v, int warmup) {
  if (v.empty()) return std::nullopt;
  int n = static_cast<int>(v.size());
  int skip = warmup >= 0 ? warmup : std::max(3, static_cast<int>(std::ceil(0.2 * n)));
  skip = std::min(skip, n - 1);
  Throughput t;
  t.steps_total = n;
  t.warmup = skip;
  t.steps_used = n - skip;
  double sum = 0;
  for (int i = skip; i < n; ++i) sum += v[i];
  t.mean = sum / t.steps_used;
  if (t.steps_used > 1) {
    double sq = 0;
    for (int i = skip; i < n; ++i) sq += (v[i] - t.mean) * (v[i] - t.mean);
    t.std = std::sqrt(sq / (t.steps_used - 1));
  }
  return t;
}

void compute_scaling(std::vector<ResultRow>& rows) {
  std::map<std::string, const ResultRow*> base;
  for (const auto& r : rows) {
    if (!r.tokens_per_s || *r.tokens_per_s <= 0 || r.gpus <= 0) continue;
    auto it = base.find(r.strategy);
    if (it == base.end() || r.gpus < it->second->gpus) base[r.strategy] = &r;
  }
  std::map<std::string, std::pair<double, int>> values;  // copy: rows is modified below
  for (const auto& [st, r] : base) values[st] = {*r->tokens_per_s, r->gpus};
  for (auto& r : rows) {
    r.speedup.reset();
    r.efficiency.reset();
    auto it = values.find(r.strategy);
    if (!r.tokens_per_s || r.gpus <= 0 || it == values.end()) continue;
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
                                  r.message};
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
    if (r.gpus <= 0)
      throw UserError(where + "gpus", "needs a positive GPU count", "fix the row or remove it");
    rows.push_back(r);
  }
  return rows;
}

ReportOutcome write_report(const fs::path& dir, const std::vector<ResultRow>& rows,
                           const std::string& title) {
  ReportOutcome outcome;
  check_report_outputs(dir, rows);
  const std::vector<ResultRow> measured = measured_rows(rows);
  const std::vector<std::string> strategies = strategies_of(measured);
  const fs::path plots = dir / "plots";

  write_file_atomically(dir / "summary.md", summary_markdown(rows, title, !measured.empty()));
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
  for (const auto& r : measured) gpu_set.insert(r.gpus);
  std::vector<int> gpus(gpu_set.begin(), gpu_set.end());
  for (const auto& st : strategies) {
    std::vector<ResultRow> series;
    for (const auto& r : measured)
      if (r.strategy == st) series.push_back(r);
    std::stable_sort(series.begin(), series.end(),
                     [](const ResultRow& a, const ResultRow& b) { return a.gpus < b.gpus; });
    std::string dat =
        "# " + st + ": gpus speedup efficiency tokens_per_s tokens_per_s_std preset\n";
    for (const auto& r : series) {
      dat += fmt::format("{} {:.6f} {:.6f} {:.3f} {:.3f} {}\n", r.gpus, *r.speedup, *r.efficiency,
                         *r.tokens_per_s, r.tokens_per_s_std.value_or(0.0), r.preset);
    }
    fs::path file = plots / data_file_name(st);
    write_file_atomically(file, dat);
    outcome.written.push_back(file.string());
  }
  // The ideal line starts from the smallest GPU count measured (the usual baseline).
  int base = gpus.front();
  std::string speedup = plot_script(
      "speedup", fmt::format("speedup vs {} GPU{}", base, base == 1 ? "" : "s"), 2, strategies,
      fmt::format("x / {}.0", base), "ideal", gpus,
      "Speedup vs GPUs, one series per strategy; the dashed line is ideal (linear) scaling.");
  std::string efficiency =
      plot_script("efficiency", "parallel efficiency", 3, strategies, "1", "ideal", gpus,
                  "Parallel efficiency (speedup / GPU ratio) vs GPUs, one series per strategy.");
  for (const auto& [name, text] :
       {std::pair<std::string, std::string>{"speedup", speedup}, {"efficiency", efficiency}}) {
    fs::path gp = plots / (name + ".gp");
    write_file_atomically(gp, text);
    outcome.written.push_back(gp.string());
    if (!program_on_path("gnuplot")) {
      outcome.problems.push_back("gnuplot is not installed: " + gp.string() +
                                 " was written but not rendered (Debian: apt install gnuplot-nox)");
      continue;
    }
    CommandOptions o;
    o.cwd = plots.string();
    o.timeout = std::chrono::seconds(60);
    CommandResult res = run_command({"gnuplot", name + ".gp"}, o);
    if (!res.ok()) {
      outcome.problems.push_back(gp.string() + ": " + res.summary("gnuplot"));
      continue;
    }
    outcome.written.push_back((plots / (name + ".png")).string());
    outcome.written.push_back((plots / (name + ".svg")).string());
  }
  return outcome;
}

int report_sweep_dir(const fs::path& dir) {
  fs::path csv = dir / "results.csv";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UserError(dir.string(), "no such sweep directory",
                    "pass the --out directory of hpclaunch sweep");
  if (!input_path_present(csv))
    throw UserError(csv.string(), "no results.csv here",
                    "run hpclaunch sweep --out " + dir.string() + " first");
  auto rows =
      parse_results_csv(read_input_file(csv, "results file", kMaxResultsFileBytes), csv.string());
  compute_scaling(rows);
  StagedOutput csv_out(csv, results_csv(rows));  // checked and staged before anything is written
  check_report_outputs(dir, rows);
  csv_out.commit();
  ReportOutcome out = write_report(dir, rows, "Scaling sweep " + dir.filename().string());
  for (const auto& f : out.written) std::cerr << "hpclaunch: wrote " << f << "\n";
  for (const auto& p : out.problems) std::cerr << "hpclaunch: " << comment_text(p) << "\n";
  return out.problems.empty() ? 0 : 1;
}

}  // namespace hpc
