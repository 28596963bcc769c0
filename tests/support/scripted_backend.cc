#include "support/scripted_backend.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "backends/host.h"

namespace hpc::test {

const ScriptedStep& ScriptedBackend::Job::current() const {
  static const ScriptedStep kCompleted{"COMPLETED", 0, "", 0, ""};
  if (script.steps.empty()) return kCompleted;
  // Before the first status() the job is in its first step.
  return script.steps[std::min(polls == 0 ? 0 : polls - 1, script.steps.size() - 1)];
}

void ScriptedBackend::add_job(const std::string& id, ScriptedJob job) {
  Job& j = jobs_[id];
  j.script = std::move(job);
  j.stdout_path = "/job.out";
}

ScriptedBackend& ScriptedBackend::on_name(const std::string& name_part, ScriptedJob job) {
  by_name_.emplace_back(name_part, std::move(job));
  return *this;
}

size_t ScriptedBackend::polls(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? 0 : it->second.polls;
}

SubmitResult ScriptedBackend::submit(const SubmitRequest& request) {
  const std::string id = std::to_string(first_id_ + static_cast<int>(submitted.size()));
  SubmitResult result{id, request.runs_root + "/" + request.job_name + "-" + id, "scripted"};
  std::filesystem::create_directories(result.run_dir);
  Job& j = jobs_[id];
  for (const auto& [part, job] : by_name_) {
    if (request.job_name.find(part) == std::string::npos) continue;
    j.script = job;
    break;
  }
  for (const auto& [name, content] : j.script.files)
    std::ofstream(result.run_dir + "/" + name, std::ios::binary) << content;
  j.stdout_path = result.run_dir + "/job.out";
  scripts[request.job_name] = request.script;
  submitted.push_back(request.job_name);
  return result;
}

JobStatus ScriptedBackend::status(const std::string& job_id) {
  JobStatus s;
  s.id = job_id;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    s.found = false;
    return s;
  }
  Job& j = it->second;
  if (j.polls < j.script.steps.size()) j.log += j.script.steps[j.polls].log;
  ++j.polls;
  const ScriptedStep& step = j.current();
  if (step.state == "GONE" && !j.cancelled_while_active) {
    s.found = false;
    s.detail = "slurm_load_jobs error: Invalid job id specified";
    return s;
  }
  s.state = j.cancelled_while_active ? "CANCELLED" : step.state;
  s.restarts = step.restarts;
  s.exit_code = j.cancelled_while_active ? -1 : step.exit_code;
  s.reason = j.cancelled_while_active ? "" : step.reason;
  s.nodes = kNodes;
  s.stdout_path = j.stdout_path;
  return s;
}

LogChunk ScriptedBackend::read_log(const std::string& path, uint64_t offset, size_t max_bytes) {
  for (const auto& [id, j] : jobs_) {
    if (j.stdout_path != path) continue;
    LogChunk c;
    c.exists = true;
    c.data = offset < j.log.size() ? j.log.substr(offset, max_bytes) : "";
    c.next_offset = offset + c.data.size();
    return c;
  }
  return LocalHost().read_file(path, offset, max_bytes);
}

void ScriptedBackend::cancel(const std::string& job_id) {
  cancelled.insert(job_id);
  auto it = jobs_.find(job_id);
  if (it != jobs_.end() && !is_terminal_state(it->second.current().state))
    it->second.cancelled_while_active = true;
}

}  // namespace hpc::test
