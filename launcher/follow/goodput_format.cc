// The goodput report as text (a terminal) and as JSON (--json).
#include <cmath>
#include <ctime>

#include <fmt/core.h>

#include "follow/goodput.h"
#include "shell.h"

using nlohmann::json;

namespace hpc {

namespace {

// "0.42 s", "12.3 s", "4m 05s", "3h 12m".
std::string duration(double s) {
  if (s < 10) return fmt::format("{:.2f} s", s);
  if (s < 60) return fmt::format("{:.1f} s", s);
  const long whole = std::lround(s);
  if (whole < 3600) return fmt::format("{}m {:02d}s", whole / 60, whole % 60);
  return fmt::format("{}h {:02d}m", whole / 3600, (whole % 3600) / 60);
}

// "14:20:01.4" (UTC); with the date when `with_date`.
std::string clock_time(double t, bool with_date = false) {
  std::time_t whole = std::time_t(std::floor(t));
  std::tm tm{};
  gmtime_r(&whole, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, with_date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm);
  return fmt::format("{}.{}", buf, int((t - std::floor(t)) * 10));
}

// 1234567 -> "1,234,567".
std::string grouped(double v) {
  std::string digits = std::to_string(std::llround(v));
  std::string out;
  int n = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (n > 0 && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return out;
}

// 123456789 -> "123.5M".
std::string short_count(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.1f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

// The table's last column: how the run ended, in a word or two.
std::string end_word(const TimelineRun& r) {
  if (!r.end) return "no end recorded";
  std::string signal = r.stop_signal.empty() ? "" : " (" + r.stop_signal + ")";
  if (r.why == "requeued") return "requeued" + (signal.empty() ? " (tasks stopped)" : signal);
  if (r.why == "completed") return "completed";
  if (r.why == "failed") return fmt::format("failed (exit {})", r.exit_status);
  if (r.why == "requeue_limit") return "stopped, no requeue left";
  if (r.why == "requeue_failed") return "stopped, requeue refused";
  if (r.why == "stopped_no_marker") return "stopped, no marker" + signal;
  if (r.why == "node_check_requeue") return "requeued (node check)";
  return comment_text(r.why);
}

// What stopped the run, for the lines under the table.
std::string stop_cause(const TimelineRun& r) {
  if (r.stop_signal == "TERM") return "TERM to the batch script (scancel --signal=TERM --batch)";
  if (!r.stop_signal.empty())
    return comment_text(r.stop_signal) +
           " to the batch script (job.signal before the time limit, or scancel --signal=" +
           comment_text(r.stop_signal) + " --batch)";
  return "TERM to the tasks (preemption, or scancel --signal=TERM)";
}

std::string why_line(const RunGoodput& g) {
  const TimelineRun& r = g.run;
  const std::string checkpoint =
      g.last_checkpoint_step ? fmt::format("checkpoint after step {}", *g.last_checkpoint_step)
                             : "no checkpoint";
  if (!r.end)
    return "no end recorded: still running, or killed before the batch script could write it";
  if (r.why == "completed") return fmt::format("completed (exit {})", r.exit_status);
  if (r.why == "requeued") return stop_cause(r) + "; " + checkpoint + ", requeued";
  if (r.why == "requeue_limit")
    return fmt::format("{}; {}, no requeue: job.max_requeues reached (exit {})", stop_cause(r),
                       checkpoint, r.exit_status);
  if (r.why == "requeue_failed")
    return fmt::format("{}; {}, `scontrol requeue` refused (exit {})", stop_cause(r), checkpoint,
                       r.exit_status);
  if (r.why == "stopped_no_marker")
    return fmt::format("{}; the tasks ended (status {}) without the requeue marker: no requeue",
                       stop_cause(r), r.exit_status);
  if (r.why == "node_check_requeue")
    return "the node check (job.preflight) found slow nodes (" + comment_text(r.detail) +
           ") and requeued the job without them, before training";
  return fmt::format("failed with exit status {}; {}", r.exit_status, checkpoint);
}

}  // namespace

std::string goodput_text(const GoodputReport& rep) {
  const std::string unit = rep.gpu_job ? "GPU" : "CPU";
  std::string s;
  s += fmt::format("Job {} ({}, {}): {} run{}, {} requeue{}\n", rep.job_id, comment_text(rep.name),
                   comment_text(rep.launch), rep.runs.size(), rep.runs.size() == 1 ? "" : "s",
                   rep.requeues, rep.requeues == 1 ? "" : "s");
  if (rep.runs.empty()) {
    s += "  no run has started (the timeline is empty): nothing to report yet\n";
    return s;
  }
  if (rep.queue_wait_s)
    s += fmt::format("  submitted {} UTC; first start {} later\n",
                     clock_time(rep.submitted, true).substr(0, 19), duration(*rep.queue_wait_s));
  s += "\n";
  s += fmt::format("{:>3}  {:<12} {:>8} {:>9}  {:<14} {:>11} {:>10} {:>8} {:>8}  {}\n", "run",
                   "start (UTC)", "waited", "run time", "nodes", "steps", "tokens/s", "ckpt",
                   "lost", "end");
  for (const auto& g : rep.runs) {
    std::string steps = g.steps > 0 ? fmt::format("{}-{}", g.first_step, g.last_step) : "-";
    std::string nodes = comment_text(g.run.nodelist.empty() ? "-" : g.run.nodelist);
    s += fmt::format("{:>3}  {:<12} {:>8} {:>9}  {:<14} {:>11} {:>10} {:>8} {:>8}  {}\n",
                     g.run.restart, clock_time(g.run.start), duration(g.wait_s), duration(g.run_s),
                     nodes, steps, g.tokens_per_s ? grouped(*g.tokens_per_s) : "-",
                     rep.has_metrics ? duration(g.checkpoint_s) : "-", duration(g.lost_s),
                     end_word(g.run));
  }
  s += "\nwhy each run ended\n";
  for (const auto& g : rep.runs) s += fmt::format("  run {}: {}\n", g.run.restart, why_line(g));
  s += "\n";
  const double hours = rep.charged_device_s / 3600.0;
  s += fmt::format("{:<19}{:.4f} ({} over {} run{} x {} {}{})\n", unit + "-hours charged", hours,
                   duration(rep.run_s), rep.runs.size(), rep.runs.size() == 1 ? "" : "s",
                   rep.devices, unit, rep.devices == 1 ? "" : "s");
  if (rep.goodput)
    s += fmt::format("{:<19}{:.1f}% ({} of training steps kept, of {} charged)\n", "goodput",
                     100 * *rep.goodput, duration(rep.useful_s), duration(rep.run_s));
  double waited = 0;
  for (size_t i = 1; i < rep.runs.size(); ++i) waited += rep.runs[i].wait_s;
  s += fmt::format("{:<19}{} before the first start", "queue wait",
                   duration(rep.queue_wait_s.value_or(0)));
  if (rep.runs.size() > 1) s += fmt::format(", {} pending between runs", duration(waited));
  s += "\n";
  if (rep.has_metrics) {
    double startup = 0;
    for (const auto& g : rep.runs) startup += g.startup_s;
    s += fmt::format(
        "{:<19}{} from each run's start to its first step (rendezvous, loading the "
        "checkpoint)\n",
        "start-up", duration(startup));
  }
  s += fmt::format("{:<19}{} after the last checkpoint before each stop", "lost",
                   duration(rep.lost_s));
  if (rep.has_metrics)
    s += fmt::format("; {} step{} trained again ({})", rep.redone_steps,
                     rep.redone_steps == 1 ? "" : "s", duration(rep.redone_s));
  s += "\n";
  if (rep.has_metrics) {
    s += fmt::format("{:<19}{} save{}, {} in all\n", "checkpoints", rep.checkpoints,
                     rep.checkpoints == 1 ? "" : "s", duration(rep.checkpoint_s));
    if (rep.tokens > 0)
      s += fmt::format(
          "{:<19}{} trained; {} tokens/s in the steps kept; {} per {}-hour charged\n", "tokens",
          grouped(rep.tokens), rep.tokens_per_s ? grouped(*rep.tokens_per_s) : "-",
          rep.tokens_per_device_hour ? short_count(*rep.tokens_per_device_hour) : "-", unit);
  }
  for (const auto& n : rep.notes) s += "note: " + comment_text(n) + "\n";
  return s;
}

json goodput_json(const GoodputReport& rep) {
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  json runs = json::array();
  for (const auto& g : rep.runs) {
    const TimelineRun& r = g.run;
    runs.push_back({{"restart", r.restart},
                    {"start", r.start},
                    {"end", r.end ? json(*r.end) : json(nullptr)},
                    {"last_seen", g.end},
                    {"waited_s", g.wait_s},
                    {"run_s", g.run_s},
                    {"nodelist", r.nodelist},
                    {"nodes", r.nodes},
                    {"tasks", r.tasks},
                    {"devices", g.devices},
                    {"stop_signal", r.stop_signal},
                    {"stop_time", opt(r.stop)},
                    {"why", r.end ? r.why : "no_end"},
                    {"exit_status", r.exit_status},
                    {"detail", r.detail},
                    {"steps", g.steps},
                    {"first_step", g.steps ? json(g.first_step) : json(nullptr)},
                    {"last_step", g.steps ? json(g.last_step) : json(nullptr)},
                    {"resume_step", opt(g.resume_step)},
                    {"step_s", g.step_s},
                    {"startup_s", g.startup_s},
                    {"tokens", g.tokens},
                    {"tokens_per_s", opt(g.tokens_per_s)},
                    {"checkpoints", g.checkpoints},
                    {"checkpoint_s", g.checkpoint_s},
                    {"last_checkpoint_step", opt(g.last_checkpoint_step)},
                    {"last_checkpoint_time", opt(g.last_checkpoint_time)},
                    {"lost_s", g.lost_s},
                    {"redone_steps", g.redone_steps},
                    {"redone_s", g.redone_s}});
  }
  return {{"job_id", rep.job_id},
          {"name", rep.name},
          {"launch", rep.launch},
          {"submitted_at", rep.submitted_at},
          {"queue_wait_s", opt(rep.queue_wait_s)},
          {"device", rep.gpu_job ? "gpu" : "cpu"},
          {"devices", rep.devices},
          {"requeues", rep.requeues},
          {"run_s", rep.run_s},
          {"device_hours_charged", rep.charged_device_s / 3600.0},
          {"useful_s", rep.useful_s},
          {"useful_device_hours", rep.useful_device_s / 3600.0},
          {"goodput", opt(rep.goodput)},
          {"lost_s", rep.lost_s},
          {"checkpoints", rep.checkpoints},
          {"checkpoint_s", rep.checkpoint_s},
          {"redone_steps", rep.redone_steps},
          {"redone_s", rep.redone_s},
          {"has_metrics", rep.has_metrics},
          {"tokens", rep.tokens},
          {"tokens_per_s", opt(rep.tokens_per_s)},
          {"tokens_per_device_hour", opt(rep.tokens_per_device_hour)},
          {"runs", runs},
          {"notes", rep.notes}};
}

}  // namespace hpc
