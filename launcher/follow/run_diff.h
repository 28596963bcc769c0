// `hpclaunch diff RUN_A RUN_B`: what differs between two runs, from what each run directory
// holds: spec.json (the resolved spec), run.json (the program's git state, hpclaunch's version),
// record/restart-N.json (what the job saw at each start: nodes and versions) and metrics.jsonl
// (the figures). docs/records.md describes the files.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "follow/run_record.h"

namespace hpc {

// One start of the job (restart N), as the batch script wrote it in record/restart-N.json.
struct RestartRecord {
  int restart = -1;
  std::string started_at;  // UTC, ISO 8601
  std::string nodelist;    // SLURM_JOB_NODELIST
  // What the job saw: "slurm", "modules", "container_image", "container_sha256",
  // "nvidia_driver", "python", "torch", and one "program: WORD" per line of the program's
  // --version ("program: LibTorch", "program: CUDA"): absent when a probe had nothing to say.
  std::map<std::string, std::string> versions;
  std::string problem;  // set when the file could not be read; the rest is then empty
};

// Reads RestartRecord from one file's text (`where`: its path, for `problem`). Never throws.
RestartRecord parse_restart_record(const std::string& text, const std::string& where);

// <run_dir>/record/restart-N.json, by N. None: an empty list (older hpclaunch, or the job has
// not started).
std::vector<RestartRecord> read_restart_records(const std::string& run_dir);

// The figures of a run's metrics.jsonl (trainer/metrics/metrics.h); a line that is not JSON is
// skipped. A resumed run's repeated steps count once (the last value).
struct RunFigures {
  std::optional<long> steps;         // the last step + 1
  std::optional<double> final_loss;  // the last training step's loss
  std::optional<double> final_val_loss;
  std::optional<double> tokens_per_s;   // steady state, as sweeps measure it (first steps left out)
  std::optional<double> train_seconds;  // the sum of step_ms over the steps
};
RunFigures figures_from_metrics(const std::string& jsonl);

// Everything `diff` compares, loaded from a run directory on this machine.
struct RunSnapshot {
  RunRecord record;
  nlohmann::json spec;       // spec.json; null when missing
  std::string spec_problem;  // why spec.json could not be read
  std::vector<RestartRecord> restarts;
  RunFigures figures;
  bool has_metrics = false;
};
RunSnapshot load_run_snapshot(const RunRecord& record);

// "a.b.c" -> the value as text (strings bare, the rest as JSON); objects are descended, arrays
// are leaves.
std::map<std::string, std::string> flatten_json(const nlohmann::json& doc);

struct RunDifference {
  std::string section;  // spec, program, versions, nodes, figures
  std::string key;
  std::string a, b;  // "-" where one run has no value
};

// The differences, section by section in the order above, keys sorted within a section. Spec
// keys that differ in every rerun by construction (job.name stays; nothing is left out).
std::vector<RunDifference> diff_runs(const RunSnapshot& a, const RunSnapshot& b);

// The table (`diff`) and the JSON (`diff --json`).
std::string format_run_differences(const std::vector<RunDifference>& diffs, const RunSnapshot& a,
                                   const RunSnapshot& b);
nlohmann::json run_differences_json(const std::vector<RunDifference>& diffs, const RunSnapshot& a,
                                    const RunSnapshot& b);

}  // namespace hpc
