#include "follow/goodput.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <map>

#include <fmt/core.h>

#include "error.h"
#include "shell.h"

using nlohmann::json;

namespace hpc {

namespace {

// The complete lines of a JSON-lines file, numbered from 1; a last line without its newline is
// still being written and is left out. Empty lines are skipped.
template <typename Visit>
void for_each_json_line(const std::string& text, const std::string& origin, Visit visit) {
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a partial last line
    ++line_no;
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object())
      throw UserError(fmt::format("{}:{}", origin, line_no), "is not a JSON object",
                      "the file is written one JSON object a line; remove or fix that line");
    visit(j, fmt::format("{}:{}", origin, line_no));
  }
}

std::optional<double> number(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
  double v = j[key].get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string text_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// A count the batch script wrote as a string (Slurm's variables): "2" -> 2, else 0.
int count_of(const json& j, const char* key) {
  if (j.contains(key) && j[key].is_number_integer()) return std::max(0, j[key].get<int>());
  const std::string s = text_of(j, key);
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v > 0 ? v : 0;
}

constexpr double kLatestTime = 1e10;

double time_of(const json& j, const std::string& where) {
  auto t = number(j, "time");
  if (!t) throw UserError(where, "has no \"time\" (Unix seconds)", "remove or fix that line");
  // Unix seconds of a job the batch script ran: never before 1970, never past 2286. What is
  // outside would reach the plot as a bar gnuplot refuses.
  if (!(*t >= 0 && *t <= kLatestTime))
    throw UserError(where, fmt::format("\"time\" is {}, not Unix seconds of a run", *t),
                    "remove or fix that line (the batch script writes date +%s.%N)");
  return *t;
}

}  // namespace

int sum_cpus_per_node(const std::string& text) {
  // "4(x2),2": groups of CPUS or CPUS(xNODES), comma-separated.
  int total = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    std::string group =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() : comma + 1;
    int cpus = 0, times = 1;
    const size_t paren = group.find("(x");
    std::string head = group.substr(0, paren);
    auto [e1, ec1] = std::from_chars(head.data(), head.data() + head.size(), cpus);
    if (ec1 != std::errc() || e1 != head.data() + head.size()) return 0;
    if (paren != std::string::npos) {
      if (group.back() != ')') return 0;
      std::string n = group.substr(paren + 2, group.size() - paren - 3);
      auto [e2, ec2] = std::from_chars(n.data(), n.data() + n.size(), times);
      if (ec2 != std::errc() || e2 != n.data() + n.size()) return 0;
    }
    total += cpus * times;
  }
  return total;
}

double TimelineRun::last_seen() const {
  if (end) return *end;
  double t = std::max({start, launch.value_or(start), stop.value_or(start)});
  if (!log_marks.empty()) t = std::max(t, log_marks.back().time);
  return t;
}

std::vector<TimelineRun> parse_timeline(const std::string& jsonl, const std::string& origin) {
  std::vector<TimelineRun> runs;
  for_each_json_line(jsonl, origin, [&](const json& j, const std::string& where) {
    const std::string event = text_of(j, "event");
    const double t = time_of(j, where);
    const int restart = j.contains("restart") && j["restart"].is_number_integer()
                            ? j["restart"].get<int>()
                            : (runs.empty() ? 0 : runs.back().restart);
    if (event == "start") {
      TimelineRun r;
      r.restart = restart;
      r.start = t;
      r.nodelist = text_of(j, "nodelist");
      r.nodes = count_of(j, "nodes");
      r.tasks = count_of(j, "tasks");
      r.gpus = count_of(j, "gpus_per_node") * std::max(1, r.nodes);
      r.cpus = sum_cpus_per_node(text_of(j, "cpus_per_node"));
      runs.push_back(r);
      return;
    }
    if (event != "stop" && event != "end" && event != "launch" && event != "log")
      throw UserError(where, "\"event\" is \"" + comment_text(event) + "\"",
                      "remove the line or fix its event: start, launch, log, stop or end, as the "
                      "batch script writes them");
    if (runs.empty() || runs.back().end)
      return;  // its start was not recorded (a template without the timeline): nothing to hang it
               // on
    TimelineRun& r = runs.back();
    if (t < r.start)
      throw UserError(where,
                      fmt::format("\"time\" is {}, before the start of its run ({})", t, r.start),
                      "remove or fix that line: a run's " + event + " comes after its start");
    if (event == "launch") {
      if (!r.launch) r.launch = t;
      return;
    }
    if (event == "log") {
      auto bytes = number(j, "bytes");
      if (bytes && *bytes >= 0) r.log_marks.push_back({t, (unsigned long long)(*bytes)});
      return;
    }
    if (event == "stop") {
      if (!r.stop) {
        r.stop = t;
        r.stop_signal = text_of(j, "signal");
      }
      return;
    }
    r.end = t;
    r.exit_status = j.contains("exit") && j["exit"].is_number_integer() ? j["exit"].get<int>() : -1;
    r.why = text_of(j, "why");
    r.detail = text_of(j, "detail");
    if (r.stop_signal.empty()) r.stop_signal = text_of(j, "signal");
  });
  return runs;
}

MetricsEvents parse_metrics_events(const std::string& jsonl, const std::string& origin) {
  MetricsEvents m;
  for_each_json_line(jsonl, origin, [&](const json& j, const std::string&) {
    const auto t = number(j, "time");
    const bool is_step = j.contains("tokens_per_s") && j.contains("step");
    const bool is_checkpoint = j.contains("checkpoint");
    const bool is_resume = j.contains("resume_step");
    if (!is_step && !is_checkpoint && !is_resume) return;  // validation and other lines
    if (!t) {
      ++m.untimed_lines;
      return;
    }
    if (is_step) {
      auto step = number(j, "step");
      auto ms = number(j, "step_ms");
      auto tps = number(j, "tokens_per_s");
      if (!step || !ms) return;
      MetricsEvents::Step s;
      s.step = long(*step);
      s.time = *t;
      s.seconds = *ms / 1e3;
      s.tokens = tps ? *tps * s.seconds : 0;
      m.steps.push_back(s);
    } else if (is_checkpoint) {
      auto step = number(j, "checkpoint");
      if (!step) return;
      m.checkpoints.push_back({long(*step), *t, number(j, "save_s").value_or(0)});
    } else {
      auto step = number(j, "resume_step");
      if (step) m.resumes.push_back({long(*step), *t});
    }
  });
  return m;
}

std::optional<double> parse_utc_iso8601(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return std::nullopt;
  double fraction = 0;
  if (*end == '.') {
    char* after = nullptr;
    fraction = std::strtod(end, &after);
    end = after;
  }
  if (std::string(end) != "Z") return std::nullopt;
  return double(timegm(&tm)) + fraction;
}

namespace {

// The metrics of each run: lines whose time falls in [its start, the next run's start).
void attach_metrics(std::vector<RunGoodput>& runs, const MetricsEvents& m) {
  auto run_of = [&](double t) -> RunGoodput* {
    RunGoodput* found = nullptr;
    for (auto& r : runs)
      if (t >= r.run.start) found = &r;
    return found;
  };
  for (const auto& s : m.steps) {
    RunGoodput* r = run_of(s.time);
    if (!r) continue;
    ++r->steps;
    if (r->first_step < 0) {
      r->first_step = s.step;
      r->startup_s = std::max(0.0, s.time - s.seconds - r->run.start);
    }
    r->last_step = s.step;
    r->step_s += s.seconds;
    r->tokens += s.tokens;
    if (!r->run.end) r->end = std::max(r->end, s.time);
  }
  for (const auto& c : m.checkpoints) {
    RunGoodput* r = run_of(c.time);
    if (!r) continue;
    ++r->checkpoints;
    r->checkpoint_s += c.save_s;
    r->last_checkpoint_step = c.step;
    r->last_checkpoint_time = c.time;
    if (!r->run.end) r->end = std::max(r->end, c.time);
  }
  for (const auto& s : m.resumes)
    if (RunGoodput* r = run_of(s.time)) r->resume_step = s.first_step;
}

// Steps a later run trained again: for each step number, every occurrence but the last.
void count_redone(std::vector<RunGoodput>& runs, const MetricsEvents& m, GoodputReport& report) {
  std::map<long, size_t> last_of_step;  // step -> index in m.steps
  for (size_t i = 0; i < m.steps.size(); ++i) last_of_step[m.steps[i].step] = i;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const auto& s = m.steps[i];
    RunGoodput* run = nullptr;
    for (auto& r : runs)
      if (s.time >= r.run.start) run = &r;
    if (!run) continue;
    if (last_of_step[s.step] != i) {
      ++run->redone_steps;
      run->redone_s += s.seconds;
    } else {
      report.useful_s += s.seconds;
      report.useful_device_s += s.seconds * run->devices;
      report.tokens += s.tokens;
    }
  }
}

}  // namespace

GoodputReport compute_goodput(const RunFacts& facts, const std::vector<TimelineRun>& timeline,
                              const MetricsEvents* metrics) {
  GoodputReport report;
  report.job_id = facts.job_id;
  report.name = facts.name;
  report.launch = facts.launch;
  report.submitted_at = facts.submitted_at;
  report.has_metrics = metrics && !metrics->steps.empty();
  int gpus = 0;
  for (const auto& t : timeline) gpus = std::max(gpus, t.gpus);
  report.gpu_job = gpus > 0;
  for (const auto& t : timeline) {
    RunGoodput r;
    r.run = t;
    r.end = t.last_seen();
    // GPUs charged; a job without GPUs is charged its CPUs (the tasks, without Slurm's count).
    r.devices = report.gpu_job ? (t.gpus > 0 ? t.gpus : facts.world_size)
                               : (t.cpus > 0 ? t.cpus : std::max(1, t.tasks));
    report.devices = std::max(report.devices, r.devices);
    report.runs.push_back(r);
  }
  const auto submitted = parse_utc_iso8601(facts.submitted_at);
  report.submitted = submitted.value_or(timeline.empty() ? 0 : timeline.front().start);
  if (report.runs.empty()) return report;
  if (metrics) attach_metrics(report.runs, *metrics);
  if (submitted) report.queue_wait_s = std::max(0.0, report.runs.front().run.start - *submitted);

  for (size_t i = 0; i < report.runs.size(); ++i) {
    RunGoodput& r = report.runs[i];
    // Preemption with PreemptMode=REQUEUE: Slurm requeues the job itself and may refuse the
    // script's own `scontrol requeue` (already being requeued); the run after it says so.
    if (r.run.why == "requeue_failed" && i + 1 < report.runs.size()) r.run.why = "requeued";
    r.wait_s = i == 0 ? report.queue_wait_s.value_or(0)
                      : std::max(0.0, r.run.start - report.runs[i - 1].end);
    r.run_s = std::max(0.0, r.end - r.run.start);
    if (r.step_s > 0) r.tokens_per_s = r.tokens / r.step_s;
    // A run that did not complete loses what came after its last checkpoint.
    if (r.run.why != "completed")
      r.lost_s = std::max(0.0, r.end - r.last_checkpoint_time.value_or(r.run.start));
    report.run_s += r.run_s;
    report.charged_device_s += r.run_s * r.devices;
    report.lost_s += r.lost_s;
    report.checkpoint_s += r.checkpoint_s;
    report.checkpoints += r.checkpoints;
  }
  report.requeues = int(report.runs.size()) - 1;
  if (metrics) count_redone(report.runs, *metrics, report);
  for (const auto& r : report.runs) {
    report.redone_steps += r.redone_steps;
    report.redone_s += r.redone_s;
  }
  if (report.has_metrics && report.charged_device_s > 0)
    report.goodput = report.useful_device_s / report.charged_device_s;
  if (report.useful_s > 0 && report.tokens > 0)
    report.tokens_per_s = report.tokens / report.useful_s;
  if (report.charged_device_s > 0 && report.tokens > 0)
    report.tokens_per_device_hour = report.tokens / (report.charged_device_s / 3600.0);

  for (const auto& r : report.runs)
    if (!r.run.end)
      report.notes.push_back(fmt::format(
          "run {} has no end in the timeline: it is still running, or it was killed before the "
          "batch script could record it (SIGKILL, a node failure); its figures stop at the last "
          "time seen",
          r.run.restart));
  if (!report.gpu_job)
    report.notes.push_back(
        "the allocation had no GPUs: it is charged in CPU-hours (Slurm's CPUs of the job)");
  if (!report.has_metrics) {
    if (metrics && metrics->untimed_lines > 0)
      report.notes.push_back(
          "metrics.jsonl has no times (written by an hpctrain older than this report): no "
          "steps, tokens or goodput");
    else
      report.notes.push_back(
          "no training steps with times (metrics.jsonl is hpctrain's): the figures are the "
          "timeline's alone, without steps, tokens or goodput");
  }
  return report;
}

}  // namespace hpc
