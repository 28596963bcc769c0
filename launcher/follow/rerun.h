// `hpclaunch rerun RUN [--set KEY=VALUE ...]`: the run's saved spec.json submitted again, with
// --set applied and checked as usual; refused (or, with --force, warned about in one line) when
// the program's code changed since the run (follow/program_state.h). docs/records.md.
#pragma once

#include <string>
#include <vector>

#include "follow/jobs.h"

namespace hpc {

struct RerunRequest {
  std::string run;                // a job id, a run directory name, or a path to one
  std::vector<std::string> sets;  // "key.path=value", over the saved spec
  std::string template_file;      // "": the built-in template
  bool force = false;             // run even when the code changed
  // Where the run is found (runs_dir) and where the new job goes: the recorded backend (and
  // login node) unless backend_given.
  BackendChoice choice;
  bool backend_given = false;
  RunOptions options;
};

// What changed in the program since `record` was submitted, for a rerun from `dir`: "" when
// nothing did (or nothing was recorded).
std::string program_change_since(const RunRecord& record, const std::string& dir);

// The run `run` names (a job id, a run directory's name or its path) under runs_dir; UserError
// (one line: hpclaunch list, --runs-dir) when there is none.
RunRecord find_recorded_run(const std::string& run, const std::string& runs_dir);

int rerun_job(const RerunRequest& request, const std::vector<std::string>& command);

}  // namespace hpc
