#include "follow/startup.h"

#include <algorithm>

#include <fmt/core.h>

namespace hpc {

namespace {

constexpr size_t kMaxSpanBytes = size_t{8} << 20;

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// A line the program wrote: not the batch script's own, nor srun's or slurmstepd's.
bool program_line(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return false;
  return !starts_with(line, "hpclaunch: ") && !starts_with(line, "srun: ") &&
         !starts_with(line, "slurmstepd: ");
}

std::optional<double> minus(std::optional<double> a, std::optional<double> b) {
  if (!a || !b) return std::nullopt;
  return std::max(0.0, *a - *b);
}

std::string seconds(std::optional<double> s) {
  if (!s) return "-";
  if (*s < 100) return fmt::format("{:.1f} s", *s);
  return fmt::format("{:.0f} s", *s);
}

std::optional<double> first_step_of(const MetricsEvents* metrics, const TimelineRun& run) {
  if (!metrics) return std::nullopt;
  for (const auto& s : metrics->steps)
    if (s.time >= run.start && (!run.end || s.time <= *run.end)) return s.time;
  return std::nullopt;
}

}  // namespace

StartupMarkers hpctrain_startup_markers() {
  StartupMarkers m;
  m.rendezvous = [](const std::string& line) {
    return line.find("hpctrain: model ") != std::string::npos;
  };
  return m;
}

std::optional<double> StartPhases::queue_s() const { return minus(started, submitted); }
std::optional<double> StartPhases::environment_s() const { return minus(env_ready, started); }
std::optional<double> StartPhases::rendezvous_s() const { return minus(rendezvous, env_ready); }
std::optional<double> StartPhases::first_step_s() const {
  return minus(first_step, rendezvous ? rendezvous : env_ready);
}
std::optional<double> StartPhases::total_s() const {
  for (auto t : {first_step, rendezvous, env_ready})
    if (t) return minus(t, started);
  return std::nullopt;
}

std::optional<LogSpan> startup_log_span(const TimelineRun& run) {
  if (run.log_marks.empty()) return std::nullopt;
  return LogSpan{run.log_marks.front().bytes, run.log_marks.back().bytes};
}

std::optional<double> time_of_log_offset(const std::vector<TimelineRun::LogMark>& marks,
                                         unsigned long long offset) {
  for (const auto& m : marks)
    if (m.bytes > offset) return m.time;
  return std::nullopt;
}

StartPhases start_phases(const TimelineRun& run, std::optional<double> submitted,
                         const std::string& log, const StartupMarkers& markers,
                         std::optional<double> first_step_time) {
  StartPhases p;
  p.restart = run.restart;
  p.submitted = submitted;
  p.started = run.start;
  p.env_ready = run.launch;
  p.first_step = first_step_time;
  const auto span = startup_log_span(run);
  if (!span) return p;
  // Whole lines only: a line the marks cut in two was not whole when they ended.
  size_t pos = 0;
  while (pos < log.size() && (!p.rendezvous || (!p.first_step && markers.first_step))) {
    const size_t nl = log.find('\n', pos);
    if (nl == std::string::npos) break;
    const std::string line = log.substr(pos, nl - pos);
    const unsigned long long offset = span->from + pos;
    pos = nl + 1;
    if (!program_line(line)) continue;
    const bool rendezvous = markers.rendezvous ? markers.rendezvous(line) : true;
    if (!p.rendezvous && rendezvous) p.rendezvous = time_of_log_offset(run.log_marks, offset);
    if (!p.first_step && markers.first_step && markers.first_step(line))
      p.first_step = time_of_log_offset(run.log_marks, offset);
  }
  // A line is dated up to a mark's interval late; hpctrain's first step comes exactly from its
  // metrics: the rendezvous line, printed before it, cannot have come after it.
  if (p.rendezvous && p.first_step && *p.rendezvous > *p.first_step) p.rendezvous = p.first_step;
  return p;
}

std::vector<StartPhases> read_start_phases(Backend& backend, const std::string& log_path,
                                           const std::vector<TimelineRun>& timeline,
                                           std::optional<double> submitted,
                                           const StartupMarkers& markers,
                                           const MetricsEvents* metrics) {
  std::vector<StartPhases> starts;
  std::optional<double> before = submitted;
  for (const auto& run : timeline) {
    std::string log;
    if (auto span = startup_log_span(run); span && !log_path.empty()) {
      const size_t want =
          size_t(std::min<unsigned long long>(span->to - span->from, kMaxSpanBytes));
      uint64_t offset = span->from;
      try {
        while (log.size() < want) {
          LogChunk c = backend.read_log(log_path, offset, want - log.size());
          if (!c.exists || c.data.empty() || c.next_offset <= offset) break;
          log += c.data;
          offset = c.next_offset;
        }
      } catch (const BackendError&) {
        log.clear();  // unreadable now: the phases from the log stay unknown
      }
    }
    starts.push_back(start_phases(run, before, log, markers, first_step_of(metrics, run)));
    before = run.last_seen();  // a run killed before its end: from when it was last seen
  }
  return starts;
}

std::string startup_text(const std::vector<StartPhases>& starts, bool hpctrain) {
  std::string s = fmt::format("\nstart-up, each start of the job ({}):\n",
                              hpctrain ? "rendezvous: hpctrain's first collective"
                                       : "rendezvous: the program's first output line");
  s += fmt::format("  {:<9} {:>9} {:>12} {:>11} {:>11} {:>14}\n", "restart", "queue", "environment",
                   "rendezvous", "first step", "start to step");
  for (const auto& p : starts)
    s += fmt::format("  {:<9} {:>9} {:>12} {:>11} {:>11} {:>14}\n", p.restart, seconds(p.queue_s()),
                     seconds(p.environment_s()), seconds(p.rendezvous_s()),
                     seconds(p.first_step_s()), seconds(p.first_step ? p.total_s() : std::nullopt));
  return s;
}

nlohmann::json startup_json(const std::vector<StartPhases>& starts) {
  auto opt = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : starts)
    a.push_back({{"restart", p.restart},
                 {"submitted", opt(p.submitted)},
                 {"started", p.started},
                 {"environment_ready", opt(p.env_ready)},
                 {"rendezvous", opt(p.rendezvous)},
                 {"first_step", opt(p.first_step)},
                 {"queue_s", opt(p.queue_s())},
                 {"environment_s", opt(p.environment_s())},
                 {"rendezvous_s", opt(p.rendezvous_s())},
                 {"first_step_s", opt(p.first_step_s())}});
  return a;
}

}  // namespace hpc
