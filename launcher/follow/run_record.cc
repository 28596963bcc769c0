#include "follow/run_record.h"

#include "spec/spec.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>

#include "atomic_file.h"
#include "error.h"
#include "input_file.h"
#include "json_file.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {

json RunRecord::to_json() const {
  json j{{"job_id", job_id},
         {"name", name},
         {"backend", backend},
         {"host", host},
         {"ssh_target", ssh_target},
         {"ssh_jump", ssh_jump},
         {"ssh_config", ssh_config},
         {"known_hosts", known_hosts},
         {"run_dir", run_dir},
         {"stdout_path", stdout_path},
         {"submit_command", submit_command},
         {"submitted_at", submitted_at},
         {"hpclaunch_version", hpclaunch_version},
         {"spec_hash", spec_hash},
         {"preset", preset},
         {"cluster", cluster},
         {"strategy", strategy},
         {"launch", launch},
         {"world_size", world_size},
         {"max_steps", max_steps},
         {"max_requeues", max_requeues},
         {"generator_command", generator_command}};
  if (!array.empty()) j["array"] = array;
  if (hang_seconds > 0) {
    j["hang_seconds"] = hang_seconds;
    j["start_seconds"] = start_seconds;
  }
  if (program_recorded) j["program"] = program.to_json();
  if (!rerun_of.empty()) j["rerun_of"] = rerun_of;
  if (!code_tree.empty()) {
    j["code_tree"] = code_tree;
    j["code_dir"] = code_dir;
    j["git_revision"] = git_revision;
  }
  return j;
}

RunRecord RunRecord::from_json(const json& j) {
  RunRecord r;
  auto s = [&](const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "";
  };
  r.job_id = s("job_id");
  r.name = s("name");
  r.backend = s("backend");
  r.host = s("host");
  r.ssh_target = s("ssh_target");
  r.ssh_jump = s("ssh_jump");
  r.ssh_config = s("ssh_config");
  r.known_hosts = s("known_hosts");
  r.run_dir = s("run_dir");
  r.stdout_path = s("stdout_path");
  r.submit_command = s("submit_command");
  r.submitted_at = s("submitted_at");
  r.hpclaunch_version = s("hpclaunch_version");
  r.spec_hash = s("spec_hash");
  r.preset = s("preset");
  r.cluster = s("cluster");
  r.strategy = s("strategy");
  r.launch = s("launch").empty() ? "hpctrain" : s("launch");  // records older than the field
  r.world_size = j.value("world_size", 0);
  r.max_steps = j.value("max_steps", 0L);
  r.max_requeues = j.contains("max_requeues") && j["max_requeues"].is_number_integer()
                       ? j["max_requeues"].get<int>()
                       : -1;  // records older than the field
  r.hang_seconds = j.contains("hang_seconds") && j["hang_seconds"].is_number_integer()
                       ? j["hang_seconds"].get<int>()
                       : 0;
  // Records older than the field: the default bound (the spec's when it was absent).
  r.start_seconds = j.contains("start_seconds") && j["start_seconds"].is_number_integer()
                        ? std::clamp(j["start_seconds"].get<int>(), 0, 7 * 86400)
                        : kDefaultStartSeconds;
  r.generator_command = s("generator_command");
  r.array = s("array");
  r.program_recorded = j.contains("program") && j["program"].is_object();
  if (r.program_recorded) r.program = ProgramState::from_json(j["program"]);
  r.rerun_of = s("rerun_of");
  r.code_tree = s("code_tree");
  r.code_dir = s("code_dir");
  r.git_revision = s("git_revision");
  return r;
}

void write_run_record(const RunRecord& record) {
  write_file_atomically(fs::path(record.local_dir) / "run.json", record.to_json().dump(2) + "\n");
}

namespace {

std::string kind_of(const json& j) {
  if (j.is_array()) return "an array";
  if (j.is_null()) return "null";
  if (j.is_string()) return "a string";
  if (j.is_boolean()) return "a boolean";
  return "a number";
}

}  // namespace

RunRecord read_run_record(const fs::path& dir) {
  const fs::path file = dir / "run.json";
  const json j = read_json_file(file);  // a regular file, at most 4 MiB, no NUL byte
  const std::string fix = "fix the file or remove that run directory";
  if (!j.is_object())
    throw UserError(file.string(), "is " + kind_of(j) + ", not a run record (a JSON object)", fix);
  RunRecord r;
  try {
    r = RunRecord::from_json(j);
  } catch (const json::exception& e) {
    throw UserError(file.string(), "a field has the wrong type (" + std::string(e.what()) + ")",
                    fix);
  }
  r.local_dir = dir.string();
  return r;
}

namespace {

// The runs under runs_root, and the run directories whose run.json is there but unreadable
// (with the reader's one line about it).
void scan_runs(const std::string& runs_root, std::vector<RunRecord>& runs,
               std::vector<std::pair<fs::path, std::string>>& bad) {
  std::error_code ec;
  for (fs::directory_iterator it(runs_root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!input_path_present(it->path() / "run.json")) continue;  // not a run directory
    try {
      runs.push_back(read_run_record(it->path()));
    } catch (const UserError& e) {
      bad.emplace_back(it->path(), e.what());
    }
  }
  std::sort(runs.begin(), runs.end(), [](const RunRecord& a, const RunRecord& b) {
    return a.submitted_at != b.submitted_at ? a.submitted_at < b.submitted_at
                                            : a.local_dir < b.local_dir;
  });
}

}  // namespace

std::vector<RunRecord> list_runs(const std::string& runs_root, std::vector<std::string>* problems) {
  std::vector<RunRecord> runs;
  std::vector<std::pair<fs::path, std::string>> bad;
  scan_runs(runs_root, runs, bad);
  if (problems)
    for (auto& [dir, why] : bad) problems->push_back(why);
  return runs;
}

std::optional<RunRecord> find_run(const std::string& runs_root, const std::string& job) {
  // A path to a run directory: its record, or what is wrong with it.
  if (!job.empty() && input_path_present(fs::path(job) / "run.json")) {
    RunRecord r = read_run_record(job);
    r.local_dir = job;
    return r;
  }
  std::vector<RunRecord> runs;
  std::vector<std::pair<fs::path, std::string>> bad;
  scan_runs(runs_root, runs, bad);
  std::optional<RunRecord> found;
  for (auto& r : runs) {
    if (r.job_id == job || fs::path(r.local_dir).filename() == job) found = r;  // newest wins
  }
  if (found) return found;
  // A run directory named for the job (NAME-JOBID, or the name given) whose run.json cannot be
  // read: say so, not "no run of that job id".
  for (auto& [dir, why] : bad) {
    const std::string name = dir.filename().string();
    const std::string suffix = "-" + job;
    if (name == job || (name.size() > suffix.size() &&
                        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0))
      throw UserError(why);
  }
  return std::nullopt;
}

namespace {

bool is_state_word(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  for (unsigned char c : s)
    if (!(std::isupper(c) || c == '_')) return false;
  return true;
}

}  // namespace

void write_final_state(const std::string& local_dir, const std::string& state) {
  if (local_dir.empty() || !is_state_word(state)) return;
  try {
    write_file_atomically(fs::path(local_dir) / "final_state", state + "\n");
  } catch (const std::exception&) {
    // A cache: a run directory that cannot take it (read-only, full) is asked again next time.
  }
}

std::string read_final_state(const std::string& local_dir) {
  const fs::path file = fs::path(local_dir) / "final_state";
  if (local_dir.empty() || !input_path_present(file)) return "";
  try {
    std::string s = read_input_file(file, "final state", 64);
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return is_state_word(s) ? s : "";
  } catch (const std::exception&) {
    return "";
  }
}

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace hpc
