#include "follow/goodput_report.h"

#include <algorithm>
#include <iostream>

#include <fmt/core.h>

#include "atomic_file.h"
#include "error.h"
#include "follow/throughput.h"
#include "input_file.h"
#include "shell.h"
#include "subprocess.h"

namespace fs = std::filesystem;

namespace hpc {

namespace {

// What the batch script and hpctrain write, with room: timeline.jsonl has two or three lines of
// about 200 bytes per run (16 MiB: some 30,000 requeues); metrics.jsonl a line per step.
constexpr uint64_t kMaxTimelineBytes = uint64_t{16} << 20;
constexpr uint64_t kMaxMetricsBytes = uint64_t{256} << 20;
// A timeline plot draws a bar per run: past this many, the text report sums them up alone.
constexpr size_t kMaxPlottedRuns = 2000;

// A file of the run directory on the backend's host, whole (read_log: a regular file, never a
// FIFO, a folder or a /proc file); nullopt when it is not there.
std::optional<std::string> read_run_file(Backend& backend, const std::string& path,
                                         uint64_t max_bytes) {
  std::string text;
  uint64_t offset = 0;
  for (;;) {
    LogChunk chunk = backend.read_log(path, offset, 4 << 20);
    if (!chunk.exists) return offset == 0 ? std::nullopt : std::optional<std::string>(text);
    if (chunk.data.empty() || chunk.next_offset < offset) break;  // the end, or truncated
    text += chunk.data;
    offset = chunk.next_offset;
    if (text.size() > max_bytes)
      throw UserError(path, fmt::format("is larger than {} MiB", max_bytes >> 20),
                      "this is not a file the batch script or hpctrain wrote; check the run");
  }
  return text;
}

// The plot's time axis: seconds, minutes or hours from submission, by the span.
struct TimeAxis {
  double scale;
  const char* label;
};
TimeAxis axis_for(double span_s) {
  if (span_s <= 600) return {1.0, "seconds since submission"};
  if (span_s <= 36000) return {60.0, "minutes since submission"};
  return {3600.0, "hours since submission"};
}

std::string rect(double x0, double x1, double y, double half, const char* colour, bool pattern) {
  return fmt::format(
      "set object rectangle from {:.6f},{:.3f} to {:.6f},{:.3f} fillcolor rgb \"{}\" "
      "fillstyle {} noborder\n",
      x0, y - half, x1, y + half, colour, pattern ? "pattern 4 transparent" : "solid 1.0");
}

std::string plot_script(const GoodputReport& rep, const std::string& base_name, bool with_steps) {
  double span = 0;
  for (const auto& g : rep.runs) span = std::max(span, g.end - rep.submitted);
  const TimeAxis ax = axis_for(span);
  auto x = [&](double t) { return (t - rep.submitted) / ax.scale; };
  const int n = int(rep.runs.size());
  std::string s;
  s += "# The timeline of job " + comment_text(rep.job_id) +
       ": one bar per run of the job (restart N), from its start to its\n"
       "# end; hatched: pending in the queue; red: lost (from the run's last checkpoint to its\n"
       "# end, for a run that did not complete); black ticks: checkpoints saved; green dots:\n"
       "# tokens/s of each training step (right axis). Written by `hpclaunch report`; re-render\n"
       "# with `gnuplot " +
       comment_text(base_name) + ".gp` here.\n";
  s += fmt::format("set xlabel \"{}\"\n", ax.label);
  s += "set ylabel \"run (restart)\"\nset grid xtics\n";
  s += fmt::format("set xrange [0:{:.6f}]\n", std::max(x(rep.submitted + span) * 1.02, 1e-3));
  s += fmt::format("set yrange [{}:-0.6]\n", n - 0.4);
  std::string tics;
  for (const auto& g : rep.runs)
    tics += fmt::format("{}\"{}\" {}", tics.empty() ? "" : ", ", g.run.restart, &g - &rep.runs[0]);
  s += "set ytics (" + tics + ")\n";
  s += "set bmargin 6\nset key at screen 0.5, 0.04 center center horizontal\n";
  s +=
      "set title " +
      gnuplot_string(fmt::format("job {}: {} run(s), {} requeue(s)", rep.job_id, n, rep.requeues)) +
      " noenhanced\n";
  if (with_steps) s += "set y2label \"tokens/s\"\nset y2tics\nset y2range [0:*]\n";
  double previous_end = rep.submitted;
  for (int i = 0; i < n; ++i) {
    const RunGoodput& g = rep.runs[size_t(i)];
    if (g.run.start > previous_end)
      s += rect(x(previous_end), x(g.run.start), i, 0.18, "#969696", true);
    s += rect(x(g.run.start), x(g.end), i, 0.3, "#9ecae1", false);
    if (g.lost_s > 0) s += rect(x(g.end - g.lost_s), x(g.end), i, 0.3, "#de2d26", false);
    previous_end = g.end;
  }
  s += "# checkpoints\n";
  s += "CHECKPOINTS\n";  // replaced by the caller (it knows the checkpoint times)
  std::string plot =
      "plot NaN with boxes fillstyle solid fillcolor rgb \"#9ecae1\" title 'running', \\\n"
      "     NaN with boxes fillstyle pattern 4 fillcolor rgb \"#969696\" title 'pending', \\\n"
      "     NaN with boxes fillstyle solid fillcolor rgb \"#de2d26\" title 'lost', \\\n"
      "     NaN with lines linewidth 2 linecolor rgb \"black\" title 'checkpoint'";
  if (with_steps)
    plot += ", \\\n     " + gnuplot_string(base_name + "-steps.dat") +
            " using 1:2 axes x1y2 with points pointtype 7 pointsize 0.4 linecolor rgb "
            "\"#31a354\" title 'tokens/s'";
  s += "set terminal pngcairo size 900,420 enhanced font \"sans,11\"\n";
  s += "set output " + gnuplot_string(base_name + ".png") + "\n" + plot + "\n";
  s += "set terminal svg size 900,420 dynamic enhanced font \"sans,11\"\n";
  s += "set output " + gnuplot_string(base_name + ".svg") + "\nreplot\nunset output\n";
  return s;
}

}  // namespace

std::vector<std::string> write_goodput_plot(const fs::path& base, const GoodputReport& rep,
                                            const MetricsEvents* metrics,
                                            std::vector<std::string>& written) {
  std::vector<std::string> problems;
  if (rep.runs.empty()) return {"no run has started: no timeline plot"};
  const fs::path dir = base.parent_path().empty() ? fs::path(".") : base.parent_path();
  const std::string name = base.filename().string();
  const bool with_steps = metrics && !metrics->steps.empty();
  for (const char* ext : {".gp", "-steps.dat", ".png", ".svg"}) output_kind(dir / (name + ext));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw UserError(dir.string(), "cannot create the directory: " + ec.message(),
                    "check the permissions, or give another --plot PATH");

  double span = 0;
  for (const auto& g : rep.runs) span = std::max(span, g.end - rep.submitted);
  const TimeAxis ax = axis_for(span);
  std::string ticks;
  if (metrics) {
    for (const auto& c : metrics->checkpoints) {
      int row = -1;
      for (size_t i = 0; i < rep.runs.size(); ++i)
        if (c.time >= rep.runs[i].run.start) row = int(i);
      if (row < 0) continue;
      const double cx = (c.time - rep.submitted) / ax.scale;
      ticks += fmt::format(
          "set arrow from {:.6f},{:.3f} to {:.6f},{:.3f} nohead linewidth 2 linecolor rgb "
          "\"black\" front\n",
          cx, row - 0.38, cx, row + 0.38);
    }
  }
  std::string script = plot_script(rep, name, with_steps);
  script.replace(script.find("CHECKPOINTS\n"), 12, ticks);
  if (with_steps) {
    std::string dat = "# seconds|minutes|hours since submission (as the plot's axis), tokens/s\n";
    for (const auto& st : metrics->steps)
      dat += fmt::format("{:.6f} {:.3f}\n", (st.time - rep.submitted) / ax.scale,
                         st.seconds > 0 ? st.tokens / st.seconds : 0.0);
    write_file_atomically(dir / (name + "-steps.dat"), dat);
    written.push_back((dir / (name + "-steps.dat")).string());
  }
  write_file_atomically(dir / (name + ".gp"), script);
  written.push_back((dir / (name + ".gp")).string());
  if (!program_on_path("gnuplot")) {
    problems.push_back("gnuplot is not installed: " + (dir / (name + ".gp")).string() +
                       " was written but not rendered (Debian: apt install gnuplot-nox)");
    return problems;
  }
  CommandOptions o;
  o.cwd = dir.string();
  o.timeout = std::chrono::seconds(60);
  CommandResult res = run_command({"gnuplot", name + ".gp"}, o);
  if (!res.ok()) {
    problems.push_back((dir / (name + ".gp")).string() + ": " + res.summary("gnuplot"));
    return problems;
  }
  written.push_back((dir / (name + ".png")).string());
  written.push_back((dir / (name + ".svg")).string());
  return problems;
}

std::optional<StartPhases> read_first_start(Backend& backend, const std::string& run_dir,
                                            const std::string& log, const std::string& launch,
                                            const LinePredicate& first_step_line) {
  const std::string timeline_path = run_dir + "/timeline.jsonl";
  const auto timeline_text = read_run_file(backend, timeline_path, kMaxTimelineBytes);
  if (!timeline_text) return std::nullopt;
  auto timeline = parse_timeline(*timeline_text, timeline_path);
  if (timeline.empty()) return std::nullopt;
  timeline.resize(1);
  std::optional<MetricsEvents> metrics;
  const bool hpctrain = launch == "hpctrain";
  if (hpctrain) {
    if (auto text = read_run_file(backend, run_dir + "/metrics.jsonl", kMaxMetricsBytes))
      metrics = parse_metrics_events(*text, run_dir + "/metrics.jsonl");
  }
  std::optional<double> submitted;
  if (auto text = read_run_file(backend, run_dir + "/run.json", 1 << 20)) {
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.contains("submitted_at") && j["submitted_at"].is_string())
      submitted = parse_utc_iso8601(j["submitted_at"].get<std::string>());
  }
  StartupMarkers markers = hpctrain ? hpctrain_startup_markers() : StartupMarkers{};
  if (first_step_line) markers.first_step = first_step_line;
  return read_start_phases(backend, log, timeline, submitted, markers,
                           metrics ? &*metrics : nullptr)
      .front();
}

bool names_a_run(const std::string& arg, const BackendChoice& choice) {
  std::error_code ec;
  if (input_path_present(fs::path(arg) / "run.json")) return true;  // the reader says the rest
  if (fs::exists(fs::symlink_status(arg, ec))) return false;  // a path: a sweep's, or nothing's
  if (is_job_id(arg)) return true;
  return find_run(choice.runs_dir, arg).has_value();
}

int report_run(const std::string& job, const BackendChoice& choice,
               const RunReportOptions& options) {
  // Only a run with a record: the timeline lives in the run directory hpclaunch made.
  // A task of an array (123_4) has its run directory under the array's record (open_run).
  auto found = find_run(choice.runs_dir, job);
  const size_t underscore = job.find('_');
  if (!found && is_job_id(job) && underscore != std::string::npos) {
    found = find_run(choice.runs_dir, job.substr(0, underscore));
    if (found && found->array.empty()) found.reset();
  }
  if (!found || found->run_dir.empty())
    throw UserError(job, "no run directory of " + comment_text(job) + " under " + choice.runs_dir,
                    "report reads the run directory that hpclaunch run or submit made "
                    "(hpclaunch list shows them); pass --runs-dir if the runs live elsewhere");
  OpenedRun run = open_run(job, choice);
  const RunRecord& record = run.record;
  const std::string timeline_path = record.run_dir + "/timeline.jsonl";
  const auto timeline_text = read_run_file(*run.backend, timeline_path, kMaxTimelineBytes);
  if (!timeline_text)
    throw UserError(timeline_path, "no timeline in the run directory",
                    "check that the job has started (hpclaunch status); a job whose batch script "
                    "is older than the timeline has none: submit it again to get one");
  const auto timeline = parse_timeline(*timeline_text, timeline_path);
  const std::string metrics_path = record.run_dir + "/metrics.jsonl";
  std::optional<MetricsEvents> metrics;
  if (auto text = read_run_file(*run.backend, metrics_path, kMaxMetricsBytes))
    metrics = parse_metrics_events(*text, metrics_path);

  RunFacts facts{record.job_id, record.name, record.launch, record.submitted_at, record.world_size};
  const GoodputReport report = compute_goodput(facts, timeline, metrics ? &*metrics : nullptr);
  const bool hpctrain = record.launch == "hpctrain";
  StartupMarkers markers = hpctrain ? hpctrain_startup_markers() : StartupMarkers{};
  if (options.first_step_line) markers.first_step = options.first_step_line;
  const auto starts = read_start_phases(*run.backend, record.stdout_path, timeline,
                                        parse_utc_iso8601(record.submitted_at), markers,
                                        metrics ? &*metrics : nullptr);

  // The plot goes into the run directory where it is on this machine (slurm, local), else into
  // the local copy of the record (ssh), named by the job for a task of an array.
  fs::path base = options.plot;
  // A folder given (or a path ending in '/') is where the files go, as goodput.*: never a stem
  // that would put /tmp-steps.dat and /tmp.gp beside it.
  std::error_code dir_ec;
  if (!base.empty() && (!base.has_filename() || fs::is_directory(base, dir_ec))) base /= "goodput";
  if (base.empty()) {
    base = record.backend == "ssh" ? fs::path(record.local_dir) : fs::path(record.run_dir);
    base /= record.backend == "ssh" && !record.array.empty() ? "goodput-" + record.job_id
                                                             : std::string("goodput");
  }
  if (base.extension() == ".png" || base.extension() == ".svg") base.replace_extension();
  std::vector<std::string> written;
  std::vector<std::string> problems;
  const bool too_many = report.runs.size() > kMaxPlottedRuns;
  if (!too_many)
    problems = write_goodput_plot(base, report, metrics ? &*metrics : nullptr, written);

  if (options.as_json) {
    nlohmann::json j = goodput_json(report);
    j["plot"] = written;
    j["startup"] = startup_json(starts);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << goodput_text(report) << startup_text(starts, hpctrain);
  }
  if (too_many)
    std::cerr << "hpclaunch: " << report.runs.size() << " runs: more than the " << kMaxPlottedRuns
              << " a timeline plot draws; no plot (the report sums them up)\n";
  for (const auto& f : written) std::cerr << "hpclaunch: wrote " << f << "\n";
  for (const auto& p : problems) std::cerr << "hpclaunch: " << comment_text(p) << "\n";
  return problems.empty() || report.runs.empty() ? 0 : 1;
}

}  // namespace hpc
