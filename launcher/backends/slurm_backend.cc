#include "backends/slurm_backend.h"

#include "error.h"
#include "backends/exit_status.h"
#include "spec/job_features.h"
#include "spec/slurm_time.h"
#include "text.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>

#include <re2/re2.h>

extern char** environ;

namespace hpc {
namespace {

std::string one_line(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\r') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string random_tag() {
  std::random_device rd;
  std::mt19937_64 gen((uint64_t(rd()) << 32) ^ rd() ^ uint64_t(getpid()));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(gen()));
  return buf;
}

bool is_absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

}  // namespace

bool JobStatus::terminal() const { return is_terminal_state(state); }

bool is_terminal_state(const std::string& state) {
  static const char* const kTerminal[] = {"COMPLETED",     "FAILED",       "TIMEOUT",   "CANCELLED",
                                          "NODE_FAIL",     "PREEMPTED",    "BOOT_FAIL", "DEADLINE",
                                          "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED"};
  for (const char* t : kTerminal)
    if (state == t) return true;
  return false;
}

void Backend::signal_tasks(const std::string& job_id, const std::string& signal) {
  throw BackendError("the " + kind() + " backend cannot send " + signal + " to the tasks of job " +
                     job_id);
}

namespace {

// An id from a hand-edited run.json or sweep.json never reaches scontrol or scancel as an
// option ("--me": all my jobs) or as 0 (scontrol shows every job for it).
void check_job_id(const std::string& job_id) {
  if (!is_job_id(job_id))
    throw BackendError("\"" + one_line(job_id) + "\" is not a Slurm job id (a number from 1 up)");
}

}  // namespace

bool is_controller_unreachable(const std::string& text) {
  static const char* const kSigns[] = {
      "Unable to contact slurm controller", "Socket timed out", "Connection refused",
      "Zero Bytes were transmitted", "Communication connection failure",
      "Slurm backup controller in standby mode", "Unable to establish controller machine",
      // The network between: the login node's or the route's
      "Connection reset by peer", "Connection timed out", "No route to host",
      "Network is unreachable", "Transport endpoint is not connected",
      // A controller that refuses for now (busy, in a
      // reconfigure): "retry later", as unreachable is
      "Slurm temporarily unable to accept job", "Resource temporarily unavailable"};
  for (const char* s : kSigns)
    if (text.find(s) != std::string::npos) return true;
  return false;
}

JobStatus parse_scontrol_job(const std::string& line) {
  // Keys are words followed by '='; a value runs to the next " Key=" (values may hold spaces,
  // e.g. Reason or paths, but never " Word=").
  std::map<std::string, std::string> kv;
  // RE2: linear in the line's length (scontrol's line of a job with a long command or node list).
  static const RE2 key(R"((?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=)", RE2::Latin1);
  std::vector<std::tuple<std::string, size_t, size_t>> spans;  // name, value start, match start
  re2::StringPiece m[2];
  for (size_t at = 0; key.Match(line, at, line.size(), RE2::UNANCHORED, m, 2);) {
    const size_t match_start = static_cast<size_t>(m[0].data() - line.data());
    at = match_start + m[0].size();
    spans.emplace_back(std::string(m[1].data(), m[1].size()), at, match_start);
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    size_t value_start = std::get<1>(spans[i]);
    size_t value_end = i + 1 < spans.size() ? std::get<2>(spans[i + 1]) : line.size();
    kv.emplace(std::get<0>(spans[i]), trim(line.substr(value_start, value_end - value_start)));
  }
  auto get = [&](const char* k) {
    auto it = kv.find(k);
    return it == kv.end() ? std::string() : it->second;
  };
  JobStatus s;
  s.id = get("JobId");
  s.array_job_id = get("ArrayJobId");
  s.array_task_id = get("ArrayTaskId");
  std::string state = get("JobState");
  s.state = state.empty() ? "UNKNOWN" : state;
  s.reason = get("Reason");
  if (s.reason == "None") s.reason.clear();
  s.nodes = get("NodeList");
  if (s.nodes == "(null)") s.nodes.clear();
  s.elapsed_seconds = slurm_time_seconds(get("RunTime")).value_or(-1);
  std::string exit = get("ExitCode");
  if (auto colon = exit.find(':'); colon != std::string::npos) {
    s.exit_code = std::atoi(exit.substr(0, colon).c_str());
    s.exit_signal = std::atoi(exit.substr(colon + 1).c_str());
  }
  s.restarts = std::atoi(get("Restarts").c_str());
  s.stdout_path = get("StdOut");
  s.stderr_path = get("StdErr");
  if (s.state == "CANCELLED") {
    std::string end = get("EndTime");
    if (!end.empty() && end != "Unknown") s.detail = "at " + end;
  }
  if (!s.terminal() && s.state != "PENDING") s.exit_code = -1;
  return s;
}

namespace {

// Whether a pending array record's ArrayTaskId ("1-5,7%2") still holds task `task`.
bool array_record_holds(const std::string& task_ids, const std::string& task) {
  if (!all_digits(task) || task.size() > 7) return false;
  try {
    const auto held = parse_array_indexes(task_ids, "ArrayTaskId").indexes;
    return std::binary_search(held.begin(), held.end(), std::stol(task));
  } catch (const UserError&) {
    return false;
  }
}

}  // namespace

std::optional<JobStatus> select_job_status(const std::string& job_id,
                                           const std::vector<JobStatus>& lines) {
  const size_t underscore = job_id.find('_');
  if (underscore != std::string::npos) {
    const std::string array_id = job_id.substr(0, underscore);
    const std::string task = job_id.substr(underscore + 1);
    const JobStatus* holder = nullptr;
    for (const auto& s : lines) {
      if (s.array_job_id != array_id) continue;
      if (s.array_task_id == task) {
        JobStatus found = s;
        found.id = job_id;
        return found;
      }
      // The array's pending record ("5-9%2") still holds the tasks not yet started.
      if (s.state == "PENDING" && array_record_holds(s.array_task_id, task)) holder = &s;
    }
    if (!holder) return std::nullopt;
    JobStatus pending = *holder;
    pending.id = job_id;
    pending.array_task_id = task;
    pending.stdout_path.clear();
    pending.stderr_path.clear();
    return pending;
  }
  std::vector<JobStatus> tasks;
  for (const auto& s : lines)
    if (s.array_job_id == job_id && !s.array_task_id.empty()) tasks.push_back(s);
  if (!tasks.empty()) return array_status(job_id, tasks);
  for (const auto& s : lines)
    if (s.id == job_id) return s;
  return std::nullopt;
}

JobStatus array_status(const std::string& array_id, const std::vector<JobStatus>& tasks) {
  JobStatus a;
  a.id = array_id;
  a.array_job_id = array_id;
  const JobStatus* worst = nullptr;
  const JobStatus* pending = nullptr;
  bool running = false;
  std::vector<std::pair<std::string, int>> counts;  // state -> tasks, in order of appearance
  for (const auto& t : tasks) {
    a.array_tasks.emplace_back(t.array_task_id, t.state);
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == t.state; });
    if (it == counts.end())
      counts.emplace_back(t.state, 1);
    else
      ++it->second;
    a.elapsed_seconds = std::max(a.elapsed_seconds, t.elapsed_seconds);
    a.restarts = std::max(a.restarts, t.restarts);
    if (!t.terminal()) {
      running = running || t.state != "PENDING";
      if (t.state == "PENDING" && !pending) pending = &t;
      continue;
    }
    if (!worst || exit_status_for(t) > exit_status_for(*worst)) worst = &t;
  }
  // scontrol lists the newest task first: show them by index, those not started (a range) last.
  auto index = [](const std::string& task) {
    return all_digits(task) && !task.empty() && task.size() < 10 ? std::stol(task) : LONG_MAX;
  };
  std::stable_sort(a.array_tasks.begin(), a.array_tasks.end(),
                   [&](const auto& x, const auto& y) { return index(x.first) < index(y.first); });
  std::string detail;
  for (const auto& [state, n] : counts)
    detail += (detail.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  a.detail = "(array: " + detail + ")";
  if (running || pending) {
    a.state = running ? "RUNNING" : "PENDING";
    if (!running) a.reason = pending->reason;
    return a;
  }
  a.state = worst->state;
  a.exit_code = worst->exit_code;
  a.exit_signal = worst->exit_signal;
  if (worst->state != "COMPLETED") a.detail += "; worst: task " + worst->array_task_id;
  return a;
}

SlurmBackend::SlurmBackend(std::unique_ptr<Host> host, std::string kind,
                           SlurmBackendOptions options)
    : host_(std::move(host)), kind_(std::move(kind)), options_(options) {}

std::vector<std::string> SlurmBackend::find_jobs_by_tag(const std::string& tag) {
  CommandOptions o;
  o.timeout = options_.command_timeout;
  auto r = host_->run({"squeue", "--noheader", "--all", "--format=%i %k"}, o);
  std::vector<std::string> ids;
  if (!r.ok()) return ids;
  std::istringstream in(r.out);
  std::string id, comment;
  while (in >> id && std::getline(in, comment)) {
    if (trim(comment) == "hpclaunch:" + tag) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  return ids;
}

// sbatch's --export for the variables passed by name: the mode sbatch would use on that host
// anyway (its SBATCH_EXPORT, e.g. a site's NONE; unset: ALL), plus the names. On the command
// line it wins over SBATCH_EXPORT, and a bare name takes its value from sbatch's environment
// (man sbatch, --export: "Environment variable names may be specified to propagate the current
// value"). Slurm 22.05 accepts NONE,NAME as well (checked on the test cluster).
std::string SlurmBackend::export_option(const std::vector<std::string>& names) {
  CommandOptions o;
  o.timeout = options_.command_timeout;
  CommandResult r = host_->run({"printenv", "SBATCH_EXPORT"}, o);
  std::string mode = r.ok() ? trim(r.out) : "";
  std::string option = "--export=" + (mode.empty() ? std::string("ALL") : mode);
  for (const auto& n : names) option += "," + n;
  return option;
}

// The variables of an allocation hpclaunch itself runs in (a JupyterLab session that is a Slurm
// job, an salloc shell): sbatch would copy them into the new job, where those Slurm does not set
// again for it stay stale, and srun reads them as its own options (man srun, INPUT ENVIRONMENT
// VARIABLES: SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, SLURM_MEM_PER_NODE, SLURM_NTASKS,
// SLURM_CPUS_PER_GPU, SLURM_GPUS_PER_TASK, SLURM_DISTRIBUTION, SLURM_EXPORT_ENV, ...; newer
// Slurm adds SLURM_TRES_PER_TASK). A stale SLURM_MEM_PER_CPU beside the job's own
// SLURM_MEM_PER_GPU ends the step with "SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and
// SLURM_MEM_PER_NODE are mutually exclusive". Kept: how to reach the cluster (SLURM_CONF,
// SLURM_CLUSTERS) and output formats, which are the user's, not the allocation's.
namespace {
std::vector<std::string> enclosing_allocation_variables() {
  std::vector<std::string> names;
  if (!std::getenv("SLURM_JOB_ID") && !std::getenv("SLURM_JOBID")) return names;
  static const std::vector<std::string> keep = {"SLURM_CONF", "SLURM_CLUSTERS", "SLURM_TIME_FORMAT",
                                                "SLURM_DEBUG_FLAGS"};
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (name.rfind("SLURM_", 0) != 0 && name.rfind("SLURMD_", 0) != 0) continue;
    if (std::find(keep.begin(), keep.end(), name) == keep.end()) names.push_back(name);
  }
  return names;
}
}  // namespace

SubmitResult SlurmBackend::submit(const SubmitRequest& request) {
  std::string runs_root = host_->absolute(request.runs_root);
  std::string name = run_dir_name(request.job_name);
  std::string dir_pattern = runs_root + "/" + name + "-%j";
  std::string tag = random_tag();

  // An array's tasks each log into their own run directory: <name>-<array id>_<task index>.
  const bool array = !request.array_tasks.empty();
  if (array) dir_pattern = runs_root + "/" + name + "-%A_%a";

  std::vector<std::string> argv = {"sbatch", "--parsable", "--hold", "--comment=hpclaunch:" + tag};
  // Logs go into the run directory unless the spec names an absolute path.
  std::string output = request.output.empty() ? "%x-%j.out" : request.output;
  if (!is_absolute(output)) argv.push_back("--output=" + dir_pattern + "/" + output);
  if (!request.error.empty() && !is_absolute(request.error))
    argv.push_back("--error=" + dir_pattern + "/" + request.error);
  if (!request.workdir.empty()) argv.push_back("--chdir=" + request.workdir);
  if (!request.env_from_submit.empty()) argv.push_back(export_option(request.env_from_submit));

  CommandOptions o;
  o.pass_env = request.env_from_submit;
  o.unset_env = enclosing_allocation_variables();
  o.stdin_data = request.script;
  o.timeout = options_.command_timeout;
  // The script puts the trainer's metrics into the run directory (for follow's status line).
  o.env = {"HPCLAUNCH_RUN_DIR_PREFIX=" + runs_root + "/" + name + "-"};
  if (!request.workdir.empty()) o.cwd = request.workdir;

  std::string job_id;
  bool retried = false;
  auto delay = options_.retry_delay;
  for (int attempt = 1;; ++attempt) {
    CommandResult r = host_->run(argv, o);
    if (r.ok()) {
      job_id = trim(r.out.substr(0, r.out.find(';')));
      retried = attempt > 1;
      break;
    }
    std::string why = one_line(r.err.empty() ? r.out : r.err);
    bool retryable = r.timed_out || is_controller_unreachable(why);
    // A lost reply may still have submitted the job: look for our tag before trying again.
    if (retryable) {
      auto found = find_jobs_by_tag(tag);
      if (!found.empty()) {
        job_id = found.front();
        retried = true;
        break;
      }
    }
    if (!retryable || attempt >= options_.submit_attempts) {
      if (!r.spawn_error.empty()) {
        throw BackendError("cannot run sbatch on " + host_->name() + ": " + r.spawn_error +
                           "; is Slurm installed there? (use --local to run without Slurm)");
      }
      std::string what = "sbatch on " + host_->name() + " failed" +
                         (retryable ? " after " + std::to_string(attempt) + " attempts" : "") +
                         ": " + (why.empty() ? r.summary("sbatch") : why);
      if (retryable)
        throw BackendUnreachable(what + "; check that slurmctld is up (scontrol ping)");
      throw BackendError(what);
    }
    std::this_thread::sleep_for(delay);
    delay *= 2;
  }
  if (job_id.empty() || !std::all_of(job_id.begin(), job_id.end(), ::isdigit)) {
    throw BackendError("sbatch printed no job id (\"" + one_line(job_id) + "\")");
  }

  // A try that timed out may still have been carried out by a slow controller: every job
  // carrying our tag but the one we keep is cancelled (they are held, so none has run).
  if (retried) {
    for (const auto& extra : find_jobs_by_tag(tag)) {
      if (extra != job_id) host_->run({"scancel", extra}, CommandOptions{});
    }
  }

  SubmitResult result;
  result.job_id = job_id;
  result.run_dir = runs_root + "/" + name + "-" + job_id;
  result.submit_command = "sbatch";
  for (size_t i = 1; i < argv.size(); ++i) result.submit_command += " " + argv[i];
  result.submit_command += " < script.sbatch";
  // The job is held: create its run directory, then let it go. Any failure cancels it, so a
  // job is never left behind without its record.
  try {
    host_->make_dirs(result.run_dir);
    host_->write_file(result.run_dir + "/script.sbatch", request.script, 0755);
    for (const auto& [file, content] : request.files)
      host_->write_file(result.run_dir + "/" + file, content, 0644);
    for (long task : request.array_tasks)
      host_->make_dirs(result.run_dir + "_" + std::to_string(task));
    CommandOptions ro;
    ro.timeout = options_.command_timeout;
    CommandResult released;
    auto release_delay = options_.retry_delay;
    for (int attempt = 1;; ++attempt) {
      released = host_->run({"scontrol", "release", job_id}, ro);
      if (released.ok() || attempt >= options_.submit_attempts ||
          !is_controller_unreachable(released.err))
        break;
      std::this_thread::sleep_for(release_delay);
      release_delay *= 2;
    }
    if (!released.ok()) {
      std::string what = "scontrol release " + job_id + ": " + one_line(released.err);
      if (released.timed_out || is_controller_unreachable(released.err))
        throw BackendUnreachable(what);
      throw BackendError(what);
    }
  } catch (const BackendError& e) {
    host_->run({"scancel", job_id}, CommandOptions{});
    std::string what = std::string(e.what()) + " (job " + job_id + " was cancelled)";
    if (dynamic_cast<const BackendUnreachable*>(&e)) throw BackendUnreachable(what);
    throw BackendError(what);
  }
  return result;
}

std::optional<JobStatus> SlurmBackend::status_from_sacct(const std::string& job_id) {
  if (has_sacct_ && !*has_sacct_) return std::nullopt;
  CommandOptions o;
  o.timeout = options_.command_timeout;
  auto r = host_->run({"sacct", "--noheader", "--parsable2", "--allocations", "--jobs", job_id,
                       "--format=JobID,State,ExitCode,NodeList,ElapsedRaw,Restarts,End"},
                      o);
  if (!r.ok()) {
    // "accounting storage is disabled", no sacct binary: remember, never ask again.
    if (!r.spawn_error.empty() || r.err.find("disabled") != std::string::npos) has_sacct_ = false;
    return std::nullopt;
  }
  has_sacct_ = true;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string field;
    while (std::getline(ls, field, '|')) f.push_back(field);
    if (f.size() < 7 || f[0] != job_id) continue;
    JobStatus s;
    s.id = job_id;
    std::string state = f[1];
    // "CANCELLED by 1000": keep who did it for the user.
    if (auto by = state.find(" by "); by != std::string::npos) {
      s.detail = "by uid " + state.substr(by + 4) + (f[6].empty() ? "" : " at " + f[6]);
      state = state.substr(0, by);
    }
    s.state = state;
    if (auto colon = f[2].find(':'); colon != std::string::npos) {
      s.exit_code = std::atoi(f[2].substr(0, colon).c_str());
      s.exit_signal = std::atoi(f[2].substr(colon + 1).c_str());
    }
    s.nodes = f[3] == "None assigned" ? "" : f[3];
    s.elapsed_seconds = f[4].empty() ? -1 : std::atol(f[4].c_str());
    s.restarts = std::atoi(f[5].c_str());
    return s;
  }
  return std::nullopt;
}

JobStatus SlurmBackend::status(const std::string& job_id) {
  check_job_id(job_id);
  CommandOptions o;
  o.timeout = options_.command_timeout;
  auto r = host_->run({"scontrol", "show", "job", "--oneliner", job_id}, o);
  if (r.ok()) {
    std::istringstream in(r.out);
    std::string line;
    std::vector<JobStatus> lines;
    while (std::getline(in, line)) {
      if (!trim(line).empty()) lines.push_back(parse_scontrol_job(line));
    }
    if (auto found = select_job_status(job_id, lines)) {
      JobStatus s = *found;
      // sacct knows who cancelled a job; scontrol does not.
      if (s.state == "CANCELLED" && s.array_tasks.empty() && has_sacct_.value_or(true)) {
        if (auto acct = status_from_sacct(job_id); acct && !acct->detail.empty())
          s.detail = acct->detail;
      }
      return s;
    }
  }
  std::string why = one_line(r.err);
  if (!r.spawn_error.empty())
    throw BackendError("cannot run scontrol on " + host_->name() + ": " + r.spawn_error);
  if (r.timed_out || is_controller_unreachable(why))
    throw BackendUnreachable("cannot reach slurmctld from " + host_->name() + ": " +
                             (why.empty() ? "scontrol timed out" : why) +
                             "; check that slurmctld is up (scontrol ping)");
  if (why.find("Invalid job id") == std::string::npos) {
    throw BackendError("scontrol show job " + job_id + " on " + host_->name() +
                       " failed: " + (why.empty() ? r.summary("scontrol") : why));
  }
  // The controller forgot the job (older than MinJobAge): accounting may still know it.
  if (auto s = status_from_sacct(job_id)) return *s;
  JobStatus gone;
  gone.id = job_id;
  gone.found = false;
  gone.detail = why;
  return gone;
}

LogChunk SlurmBackend::read_log(const std::string& path, uint64_t offset, size_t max_bytes) {
  return host_->read_file(path, offset, max_bytes);
}

void SlurmBackend::cancel(const std::string& job_id) {
  check_job_id(job_id);
  CommandOptions o;
  o.timeout = options_.command_timeout;
  // scancel sends TERM, and a job of hpclaunch's takes TERM for a preemption: its program
  // checkpoints, writes the requeue marker, and the script runs `scontrol requeue`, which Slurm
  // 22.05 grants (the job came back PENDING, Restarts=1). A job being cancelled may not be
  // requeued: Requeue=0 first (best effort: a job that already ended refuses the update).
  host_->run({"scontrol", "update", "JobId=" + job_id.substr(0, job_id.find('_')), "Requeue=0"},
             o);
  auto r = host_->run({"scancel", job_id}, o);
  if (r.ok()) return;
  std::string what = "scancel " + job_id + " on " + host_->name() + ": " + r.summary("scancel");
  if (r.timed_out || is_controller_unreachable(r.err)) throw BackendUnreachable(what);
  throw BackendError(what);
}

void SlurmBackend::signal_tasks(const std::string& job_id, const std::string& signal) {
  check_job_id(job_id);
  CommandOptions o;
  o.timeout = options_.command_timeout;
  auto r = host_->run({"scancel", "--signal=" + signal, job_id}, o);
  if (r.ok()) return;
  std::string what = "scancel --signal=" + signal + " " + job_id + " on " + host_->name() + ": " +
                     r.summary("scancel");
  if (r.timed_out || is_controller_unreachable(r.err)) throw BackendUnreachable(what);
  throw BackendError(what);
}

}  // namespace hpc
