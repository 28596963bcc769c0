// `hpclaunch report RUN`: a job's goodput across its requeues (follow/goodput.h), read from its
// run directory on the backend's host (here, or the login node over SSH), printed as text or
// JSON, and drawn as a timeline (gnuplot: PNG and SVG, the script and data beside them).
#pragma once

#include <filesystem>
#include <string>

#include "follow/goodput.h"
#include "follow/jobs.h"
#include "follow/startup.h"

namespace hpc {

struct RunReportOptions {
  bool as_json = false;
  std::string plot;  // where the plot goes (PATH.png, PATH.svg); "" = <run dir>/goodput
  // --metric-regex: a program's line that says a step is done (its start-up's first step)
  LinePredicate first_step_line;
};

// Whether `arg` names a run rather than a sweep directory: a directory with run.json, or (when
// no such path exists) a job id or a run directory name under the runs directory.
bool names_a_run(const std::string& arg, const BackendChoice& choice);

// Prints the report of run `job` (job id, run directory name or path); writes the plot. Returns
// the exit status (1 when the plot could not be rendered). Throws UserError for bad input.
int report_run(const std::string& job, const BackendChoice& choice,
               const RunReportOptions& options);

// The phases of a run's first start (follow/startup.h), read from its run directory through
// `backend` (timeline.jsonl, metrics.jsonl for hpctrain, run.json for the submission) and its
// log; none without a timeline. What `hpclaunch sweep` writes per point into results.csv.
std::optional<StartPhases> read_first_start(Backend& backend, const std::string& run_dir,
                                            const std::string& log, const std::string& launch,
                                            const LinePredicate& first_step_line);

// The timeline plot of `report` into PATH.gp, PATH-steps.dat, and through gnuplot PATH.png and
// PATH.svg; `steps`: the metrics' steps, for tokens/s on the right axis (may be null). Returns
// the problems (gnuplot missing or failing), one line each; the files written go to `written`.
std::vector<std::string> write_goodput_plot(const std::filesystem::path& base,
                                            const GoodputReport& report, const MetricsEvents* steps,
                                            std::vector<std::string>& written);

}  // namespace hpc
