#include "backends/local_job.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "backends/backend.h"
#include "error.h"
#include "posix_io.h"
#include "text.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

json job_to_json(const LocalJob& j) {
  return json{{"job_id", j.job_id},
              {"job_name", j.job_name},
              {"run_dir", j.run_dir},
              {"runs_root", j.runs_root},
              {"script", j.script},
              {"workdir", j.workdir},
              {"stdout", j.stdout_path},
              {"stderr", j.stderr_path},
              {"open_mode", j.open_mode_append ? "append" : "truncate"},
              {"time_limit_seconds", j.time_limit_seconds},
              {"signal",
               {{"number", j.signal_number},
                {"seconds", j.signal_seconds},
                {"batch_only", j.signal_batch_only}}},
              {"requeue_allowed", j.requeue_allowed},
              {"max_restarts", j.max_restarts},
              {"kill_wait_seconds", j.kill_wait_seconds},
              {"submit_time", j.submit_time},
              {"env", j.env}};
}

LocalJob job_from_json(const json& v) {
  LocalJob j;
  j.job_id = v.at("job_id").get<std::string>();
  j.job_name = v.at("job_name").get<std::string>();
  j.run_dir = v.at("run_dir").get<std::string>();
  j.runs_root = v.at("runs_root").get<std::string>();
  j.script = v.at("script").get<std::string>();
  j.workdir = v.at("workdir").get<std::string>();
  j.stdout_path = v.at("stdout").get<std::string>();
  j.stderr_path = v.at("stderr").get<std::string>();
  j.open_mode_append = v.at("open_mode").get<std::string>() == "append";
  j.time_limit_seconds = v.at("time_limit_seconds").get<long>();
  j.signal_number = v.at("signal").at("number").get<int>();
  j.signal_seconds = v.at("signal").at("seconds").get<int>();
  j.signal_batch_only = v.at("signal").at("batch_only").get<bool>();
  j.requeue_allowed = v.at("requeue_allowed").get<bool>();
  j.max_restarts = v.at("max_restarts").get<int>();
  j.kill_wait_seconds = v.at("kill_wait_seconds").get<int>();
  j.submit_time = v.at("submit_time").get<double>();
  j.env = v.at("env").get<std::map<std::string, std::string>>();
  return j;
}

json state_to_json(const LocalJobState& s) {
  return json{{"job_id", s.job_id},
              {"state", s.state},
              {"detail", s.detail},
              {"supervisor_pid", s.supervisor_pid},
              {"pid", s.pid},
              {"pgid", s.pgid},
              {"submit_time", s.submit_time},
              {"start_time", s.start_time},
              {"end_time", s.end_time},
              {"exit_code", s.exit_code},
              {"exit_signal", s.exit_signal},
              {"restarts", s.restarts},
              {"max_restarts", s.max_restarts}};
}

LocalJobState state_from_json(const json& v) {
  LocalJobState s;
  s.job_id = v.value("job_id", "");
  s.state = v.value("state", "UNKNOWN");
  s.detail = v.value("detail", "");
  s.supervisor_pid = v.value("supervisor_pid", 0);
  s.pid = v.value("pid", 0);
  s.pgid = v.value("pgid", 0);
  s.submit_time = v.value("submit_time", 0.0);
  s.start_time = v.value("start_time", 0.0);
  s.end_time = v.value("end_time", 0.0);
  s.exit_code = v.value("exit_code", -1);
  s.exit_signal = v.value("exit_signal", 0);
  s.restarts = v.value("restarts", 0);
  s.max_restarts = v.value("max_restarts", 0);
  return s;
}

void write_json_file(const std::string& path, const json& value) {
  try {
    write_file_atomically(path, value.dump(2) + "\n");
  } catch (const UserError& e) {
    throw BackendError(e.what());
  }
}

}  // namespace

void write_local_job(const LocalJob& job) {
  write_json_file(job.run_dir + "/" + kLocalJobFile, job_to_json(job));
}

std::optional<LocalJob> read_local_job(const std::string& run_dir) {
  std::string text = read_small_file(run_dir + "/" + kLocalJobFile);
  if (text.empty()) return std::nullopt;
  try {
    return job_from_json(json::parse(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<LocalJobState> read_local_state(const std::string& run_dir) {
  std::string text = read_small_file(run_dir + "/" + kLocalStateFile);
  if (text.empty()) return std::nullopt;
  try {
    return state_from_json(json::parse(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void write_local_state(const std::string& run_dir, const LocalJobState& state) {
  const std::string path = run_dir + "/" + kLocalStateFile;
  const std::string text = state_to_json(state).dump(2) + "\n";
  try {
    write_file_atomically(path, text);
    return;
  } catch (const UserError& e) {
    // A full disk has no room for the temp file beside it; the old state's own block, freed
    // by truncating it, takes the new one (a reader may see it half-written: it then reads
    // nothing and asks again).
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
    const bool written = fd >= 0 && write_all(fd, text);
    if (fd >= 0) ::close(fd);
    if (!written) throw BackendError(e.what());
  }
}

bool is_local_final_state(const std::string& state) {
  return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT";
}

std::string find_local_run_dir(const std::string& runs_root, const std::string& job_id) {
  if (!all_digits(job_id)) return "";
  std::error_code ec;
  std::string suffix = "-" + job_id;
  for (fs::directory_iterator it(runs_root, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    bool ends_with_id = name.size() > suffix.size() &&
                        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (!ends_with_id) continue;
    std::string dir = it->path().string();
    auto job = read_local_job(dir);
    if (job && job->job_id == job_id) return dir;
  }
  return "";
}

bool local_supervisor_alive(pid_t pid, const std::string& run_dir) {
  if (pid <= 0) return false;
  std::string base = "/proc/" + std::to_string(pid);
  std::string stat = read_small_file(base + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  if (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X') return false;
  std::string cmdline = read_small_file(base + "/cmdline");
  std::vector<std::string> args;
  std::string arg;
  for (char c : cmdline) {
    if (c == '\0') {
      args.push_back(arg);
      arg.clear();
    } else {
      arg += c;
    }
  }
  return args.size() >= 3 && args[1] == "__local-job" && args[2] == run_dir;
}

double now_epoch() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace hpc
