// The slurm backend: sbatch, scontrol, scancel (and sacct when the cluster has accounting) on a
// Host — this machine (LocalHost) or a login node over SSH (SshHost). Works without sacct.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/host.h"

namespace hpc {

struct SlurmBackendOptions {
  int submit_attempts = 4;                      // sbatch tries when the controller is down
  std::chrono::milliseconds retry_delay{2000};  // doubled after each failed try
  std::chrono::milliseconds command_timeout{60000};
};

class SlurmBackend : public Backend {
 public:
  SlurmBackend(std::unique_ptr<Host> host, std::string kind, SlurmBackendOptions options = {});

  std::string kind() const override { return kind_; }
  std::string host() const override { return host_->name(); }
  SubmitResult submit(const SubmitRequest& request) override;
  JobStatus status(const std::string& job_id) override;
  LogChunk read_log(const std::string& path, uint64_t offset, size_t max_bytes) override;
  void cancel(const std::string& job_id) override;
  // scancel --signal=SIG JOBID: every step's tasks, not the batch shell (no --batch, no --full).
  void signal_tasks(const std::string& job_id, const std::string& signal) override;

  Host& host_ref() { return *host_; }

 private:
  std::optional<JobStatus> status_from_sacct(const std::string& job_id);
  // Jobs whose comment carries `hpclaunch:<tag>`, lowest id first.
  std::vector<std::string> find_jobs_by_tag(const std::string& tag);
  std::string export_option(const std::vector<std::string>& names);

  std::unique_ptr<Host> host_;
  std::string kind_;
  SlurmBackendOptions options_;
  std::optional<bool> has_sacct_;  // probed on first use
};

// Parses one line of `scontrol show job -o` (Key=Value pairs) into a status. Exposed for tests.
JobStatus parse_scontrol_job(const std::string& line);

// The lines of `scontrol show job -o ID` that answer for `job_id`: the job itself; for a task
// (123_4) its own line, or the pending array record that still holds it; for a whole array
// (123) every task's line, summed up by array_status. nullopt when none does.
std::optional<JobStatus> select_job_status(const std::string& job_id,
                                           const std::vector<JobStatus>& lines);

// A job array as one job: PENDING or RUNNING while any task has not ended, then the state of
// the worst task (the one whose exit status hpclaunch would report highest, follow.h); the
// tasks' states go to array_tasks and a count of each to detail.
JobStatus array_status(const std::string& array_id, const std::vector<JobStatus>& tasks);
// Whether a Slurm client's error text means the controller could not be reached (retryable).
bool is_controller_unreachable(const std::string& text);

}  // namespace hpc
