// A Backend whose jobs live the lives a test writes down, for the unit tests of follow, sweep
// and tune. Each status() call of a job reports its next step (the last step repeats), and the
// job's log grows by the text of a step when that step is first reported. submit() makes the
// run directory <request.runs_root>/<job name>-<id> on this machine (the caller writes run.json
// there) and writes the job's files into it; the log stays in memory, at <run dir>/job.out.
//
//   ScriptedBackend b;                          // a job that exists without a submit:
//   b.add_job("7", {{{"RUNNING", 0, "0: step 1\n"}, {"FAILED", 0, "", 137}}});
//   ScriptedBackend sweep("local", 100);        // or jobs by name, as they are submitted:
//   sweep.on_name("-1n2g-", {{{"FAILED", 0, "log\n", 3}}});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"

namespace hpc::test {

// One status() answer.
struct ScriptedStep {
  std::string state;     // JobState: PENDING, RUNNING, COMPLETED, PREEMPTED, ...; GONE:
                         // "Invalid job id" (found = false), as a controller may answer
  int restarts = 0;      // Restarts=
  std::string log{};     // appended to the job's log when this step is first reported
  int exit_code = -1;    // ExitCode=N:0
  std::string reason{};  // Reason= (Resources, Priority, ...)
};

struct ScriptedJob {
  std::vector<ScriptedStep> steps;  // empty: COMPLETED at once
  // Written into the run directory at submit (metrics.jsonl, allreduce.json, ...).
  std::vector<std::pair<std::string, std::string>> files{};
};

class ScriptedBackend : public Backend {
 public:
  // `kind` as the pool and sweep see it ("local" refuses multi-node presets); submitted jobs
  // get the ids first_id, first_id + 1, ...
  explicit ScriptedBackend(std::string kind = "slurm", int first_id = 1)
      : kind_(std::move(kind)), first_id_(first_id) {}

  // A job that exists already (attached to, not submitted).
  void add_job(const std::string& id, ScriptedJob job);
  // Submitted jobs whose name contains `name_part` live `job` (the first match counts).
  ScriptedBackend& on_name(const std::string& name_part, ScriptedJob job);

  // How many times status() asked about `id` (submit_job asks once itself).
  size_t polls(const std::string& id) const;

  std::vector<std::string> submitted;          // job names, in order
  std::map<std::string, std::string> scripts;  // job name -> the script it was given
  std::set<std::string> cancelled;             // job ids
  // NodeList= that every job reports.
  static constexpr const char* kNodes = "node[01-02]";

  std::string kind() const override { return kind_; }
  std::string host() const override { return "localhost"; }
  SubmitResult submit(const SubmitRequest& request) override;
  // A job cancelled before it ended reports CANCELLED from then on.
  JobStatus status(const std::string& job_id) override;
  // The job's log from memory; any other path from this machine's disk.
  LogChunk read_log(const std::string& path, uint64_t offset, size_t max_bytes) override;
  void cancel(const std::string& job_id) override;
  // Records the signal, then runs on_signal (a test writes the ranks' answers there).
  void signal_tasks(const std::string& job_id, const std::string& signal) override {
    signalled.emplace_back(job_id, signal);
    if (on_signal) on_signal();
  }
  std::vector<std::pair<std::string, std::string>> signalled;  // job id, signal
  std::function<void()> on_signal;

 private:
  struct Job {
    ScriptedJob script;
    std::string stdout_path;
    std::string log;
    size_t polls = 0;
    bool cancelled_while_active = false;
    const ScriptedStep& current() const;
  };
  std::string kind_;
  int first_id_;
  std::vector<std::pair<std::string, ScriptedJob>> by_name_;
  std::map<std::string, Job> jobs_;
};

}  // namespace hpc::test
