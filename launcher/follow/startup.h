// The start-up budget of each start of a job: where the time between its submission (or its
// requeue) and its first training step went, phase by phase (docs/goodput.md#start-up).
//
// Sources, all written while the job runs, so a job that nobody followed (`hpclaunch submit`) has
// them too: the timeline's start and launch events (the batch script: its first line, and the
// moment its srun begins, after the modules, the venv and the rendezvous variables), its "log"
// events (the log's length as the script saw it grow after the launch), the log itself, and for
// hpctrain metrics.jsonl. The log has no times of its own: a line is dated by the first "log"
// event that counted its bytes, as precise as those events are frequent (0.25 s in the first
// 10 s after the launch, 1 s to 2 min, 5 s to 30 min; nothing later).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "follow/goodput.h"

namespace hpc {

// A test of one line of the log (its whole text, srun's label included).
using LinePredicate = std::function<bool(const std::string& line)>;

// What marks the phases in the log.
struct StartupMarkers {
  // The line that says the rendezvous is done. Null: the program's first line (any line that is
  // not the batch script's "hpclaunch: ..." or srun's "srun: ..." / "slurmstepd: ...").
  LinePredicate rendezvous;
  // The line that says the first step is done (a user's --metric-regex). Null: none in the log.
  LinePredicate first_step;
};
// hpctrain's: "hpctrain: model ..." (rank 0 prints it after attaching the strategy, whose
// parameter broadcast is the first collective); its first step comes from metrics.jsonl.
StartupMarkers hpctrain_startup_markers();

// One start of the job (restart N). Times are Unix seconds; none: not known.
struct StartPhases {
  int restart = 0;
  std::optional<double> submitted;   // restart 0: the submission; N: the previous run's end
  double started = 0;                // the batch script's first line
  std::optional<double> env_ready;   // its launch began: modules, venv, rendezvous variables done
  std::optional<double> rendezvous;  // the rendezvous line (hpctrain), else the first output
  std::optional<double> first_step;  // hpctrain's first step done, or the first metric line

  // Each phase's length: pending, the script's set-up, launch to rendezvous (a container's pull
  // under Pyxis, Python's imports, the process group), rendezvous to the first step.
  std::optional<double> queue_s() const;
  std::optional<double> environment_s() const;
  std::optional<double> rendezvous_s() const;
  std::optional<double> first_step_s() const;
  // From the start to the first step (or to the last phase known).
  std::optional<double> total_s() const;
};

// The log's bytes that a run's "log" events cover: [first mark, last mark). None without marks.
struct LogSpan {
  unsigned long long from = 0, to = 0;
};
std::optional<LogSpan> startup_log_span(const TimelineRun& run);

// When the log first held byte `offset`: the time of the first mark past it; none when no mark
// is (the line came after the marks ended).
std::optional<double> time_of_log_offset(const std::vector<TimelineRun::LogMark>& marks,
                                         unsigned long long offset);

// The phases of one start. `log`: the log from its span's start (may stop short of its end);
// `submitted`: as StartPhases::submitted; `first_step_time`: hpctrain's first step in this run
// (metrics.jsonl), which wins over the log.
StartPhases start_phases(const TimelineRun& run, std::optional<double> submitted,
                         const std::string& log, const StartupMarkers& markers,
                         std::optional<double> first_step_time);

// Every start of a job: the log's spans read through `backend` (up to 8 MiB each), hpctrain's
// first steps from `metrics` (may be null). `submitted`: the job's submission (none: unknown).
std::vector<StartPhases> read_start_phases(Backend& backend, const std::string& log_path,
                                           const std::vector<TimelineRun>& timeline,
                                           std::optional<double> submitted,
                                           const StartupMarkers& markers,
                                           const MetricsEvents* metrics);

// The table `hpclaunch report RUN` prints, one row a start; and its JSON.
std::string startup_text(const std::vector<StartPhases>& starts, bool hpctrain);
nlohmann::json startup_json(const std::vector<StartPhases>& starts);

}  // namespace hpc
