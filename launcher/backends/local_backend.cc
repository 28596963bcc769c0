#include "backends/local_backend.h"

#include "shell.h"

#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "atomic_file.h"
#include "backends/host.h"
#include "backends/job_counter.h"
#include "backends/local_plan.h"
#include "backends/local_srun.h"
#include "backends/local_supervisor.h"
#include "backends/process_session.h"
#include "error.h"
#include "posix_io.h"
#include "spec/spec.h"
#include "text.h"

namespace fs = std::filesystem;

namespace hpc {
namespace {

using Clock = std::chrono::steady_clock;

std::string user_name() {
  if (passwd* pw = getpwuid(getuid()); pw && pw->pw_name) return pw->pw_name;
  return std::to_string(getuid());
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// The CPUs this process may run on (a container's or taskset's mask, not the whole machine).
int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

bool inside(const std::string& path, const std::string& dir) {
  return path.rfind(dir + "/", 0) == 0;
}

// Writes script.sbatch, the request's files, the output directories inside the run directory,
// bin/srun and bin/scontrol, and local-job.json (last: it makes the run directory a job's).
void write_run_dir(const LocalJob& job, const SubmitRequest& request,
                   const std::string& executable) {
  std::error_code ec;
  try {
    write_file_atomically(job.script, request.script, 0755);
    for (const auto& [file, content] : request.files) {
      fs::path target = fs::path(job.run_dir) / file;
      fs::create_directories(target.parent_path(), ec);
      write_file_atomically(target, content, 0644);
    }
    for (const auto& path : {job.stdout_path, job.stderr_path}) {
      if (inside(path, job.run_dir)) fs::create_directories(fs::path(path).parent_path(), ec);
    }
    fs::create_directory(job.run_dir + "/bin", ec);
    for (const char* shim : {"srun", "scontrol"}) {
      fs::create_symlink(executable, job.run_dir + "/bin/" + shim, ec);
      if (ec) {
        throw BackendError("cannot link " + job.run_dir + "/bin/" + shim + ": " + ec.message());
      }
    }
  } catch (const UserError& e) {
    throw BackendError(e.what());
  }
  write_local_job(job);
}

}  // namespace

// ---- LocalBackend ------------------------------------------------------------------------------

LocalBackend::LocalBackend(std::string runs_root, LocalBackendOptions options)
    : options_(std::move(options)) {
  std::error_code ec;
  fs::path abs = fs::absolute(runs_root.empty() ? "runs" : runs_root, ec);
  runs_root_ = (ec ? fs::path(runs_root) : abs).lexically_normal().string();
  if (runs_root_.size() > 1 && runs_root_.back() == '/') runs_root_.pop_back();
}

std::string LocalBackend::run_dir_of(const std::string& job_id) const {
  // Jobs this backend submitted into another runs root (SubmitRequest::runs_root) are known.
  if (auto it = submitted_.find(job_id); it != submitted_.end()) return it->second;
  return find_local_run_dir(runs_root_, job_id);
}

LocalSubmitContext LocalBackend::submit_context() const {
  LocalSubmitContext context;
  std::error_code ec;
  context.submit_dir = fs::current_path(ec).string();
  context.runs_root = runs_root_;
  context.cpus = options_.cpus > 0 ? options_.cpus : available_cpus();
  context.user = user_name();
  context.submit_host = host_name();
  context.uid = getuid();
  context.gid = getgid();
  context.max_restarts = options_.max_restarts;
  context.kill_wait_seconds = options_.kill_wait_seconds;
  context.submit_time = now_epoch();
  return context;
}

std::string LocalBackend::executable(const std::string& submit_dir) const {
  std::error_code ec;
  fs::path path = options_.executable;
  if (path.empty()) {
    path = fs::read_symlink("/proc/self/exe", ec);
    if (ec) {
      throw BackendError("cannot find the hpclaunch executable (/proc/self/exe): " + ec.message());
    }
  }
  std::string absolute = (fs::path(submit_dir) / path).lexically_normal().string();
  if (access(absolute.c_str(), X_OK) != 0) {
    throw BackendError("the hpclaunch executable " + absolute +
                       " cannot be run: " + std::strerror(errno));
  }
  return absolute;
}

SubmitResult LocalBackend::submit(const SubmitRequest& request) {
  SbatchOptions options = parse_sbatch_options(request.script, "batch script");
  // No scheduler here: nothing could wait for another job, nor run tasks side by side.
  if (!options.dependency.empty()) {
    throw UserError("--backend local",
                    "cannot wait for other jobs (#SBATCH --dependency=" +
                        comment_text(options.dependency) + "): it runs a job at once",
                    "use Slurm (--backend slurm, or --host LOGIN), or chain local runs: "
                    "hpclaunch run ... && hpclaunch run ...");
  }
  if (!options.array.empty()) {
    throw UserError("--backend local",
                    "runs no job arrays (#SBATCH --array=" + comment_text(options.array) + ")",
                    "use Slurm for the array (--backend slurm, or --host LOGIN), or remove "
                    "job.array (--set job.array=null) to run one job here");
  }
  LocalSubmitContext context = submit_context();
  LocalJobPlace place = place_local_job(request, options, context);
  std::error_code ec;
  if (!fs::is_directory(place.workdir, ec)) {
    throw UserError(place.workdir, "the job's working directory does not exist",
                    "create it or choose another");
  }
  std::string program = executable(context.submit_dir);
  fs::create_directories(place.runs_root, ec);
  if (ec) {
    throw BackendError("cannot create the runs directory " + place.runs_root + ": " + ec.message());
  }

  LocalJob job =
      plan_local_job(request, options, context, place, allocate_local_job_id(place.runs_root));
  for (const auto& path : {job.stdout_path, job.stderr_path}) {
    fs::path parent = fs::path(path).parent_path();
    if (!inside(path, job.run_dir) && !fs::is_directory(parent, ec)) {
      throw UserError(path, "the job's output directory " + parent.string() + " does not exist",
                      "create it first (Slurm does not)");
    }
  }
  if (!fs::create_directory(job.run_dir, ec) || ec) {
    throw BackendError("cannot create the run directory " + job.run_dir + ": " +
                       (ec ? ec.message() : "it exists already"));
  }
  write_run_dir(job, request, program);

  SupervisorStart started = start_local_supervisor(program, job.run_dir);
  if (!started.error.empty()) {
    if (started.pid > 0) kill(started.pid, SIGKILL);
    LocalJobState failed;
    failed.job_id = job.job_id;
    failed.state = "FAILED";
    failed.detail = started.error;
    failed.submit_time = failed.start_time = failed.end_time = job.submit_time;
    failed.exit_code = 1;
    try {
      write_local_state(job.run_dir, failed);
    } catch (const BackendError&) {}
    throw BackendError("local job " + job.job_id + " did not start: " + started.error);
  }
  submitted_[job.job_id] = job.run_dir;
  SubmitResult result;
  result.job_id = job.job_id;
  result.run_dir = job.run_dir;
  result.submit_command = "hpclaunch __local-job " + job.run_dir +
                          " (local backend: bash script.sbatch in " + job.workdir + ")";
  return result;
}

JobStatus LocalBackend::status(const std::string& job_id) {
  JobStatus s;
  s.id = job_id;
  std::string run_dir = run_dir_of(job_id);
  if (run_dir.empty()) {
    s.found = false;
    s.detail = "no local job " + job_id + " under " + runs_root_;
    return s;
  }
  auto job = read_local_job(run_dir);
  if (job) {
    s.stdout_path = job->stdout_path;
    s.stderr_path = job->stderr_path;
  }
  auto state = read_local_state(run_dir);
  if (!state) {
    s.state = "PENDING";
    return s;
  }
  if (!is_local_final_state(state->state) &&
      !local_supervisor_alive(state->supervisor_pid, run_dir)) {
    // It may have written its last state just before exiting: look once more.
    if (auto again = read_local_state(run_dir)) state = again;
    const size_t left =
        is_local_final_state(state->state) ? 0 : processes_in_session(state->pgid).size();
    if (left > 0) {
      // Its processes run on without it: the job has not ended (cancel ends them).
      state->detail = "the local supervisor died; " + std::to_string(left) +
                      " process(es) of the job still run (hpclaunch cancel ends them)";
    } else if (!is_local_final_state(state->state)) {
      state->state = "FAILED";
      state->detail = "local supervisor died";
      if (state->end_time == 0) state->end_time = now_epoch();
    }
  }
  s.state = state->state;
  s.detail = state->detail;
  s.exit_code = is_local_final_state(s.state) ? state->exit_code : -1;
  s.exit_signal = is_local_final_state(s.state) ? state->exit_signal : 0;
  s.restarts = state->restarts;
  if (state->start_time > 0) {
    s.nodes = "localhost";
    double end = state->end_time > 0 ? state->end_time : now_epoch();
    s.elapsed_seconds = std::max(0L, static_cast<long>(end - state->start_time));
  }
  return s;
}

LogChunk LocalBackend::read_log(const std::string& path, uint64_t offset, size_t max_bytes) {
  LocalHost host;
  return host.read_file(path, offset, max_bytes);
}

// Like scancel --signal without --batch: every process of the job's session but the batch shell.
void LocalBackend::signal_tasks(const std::string& job_id, const std::string& signal) {
  const std::string run_dir = run_dir_of(job_id);
  const int sig = signal_from_name(signal);
  if (run_dir.empty() || sig <= 0)
    throw BackendError("signal: no local job " + job_id + " under " + runs_root_ +
                       (sig <= 0 ? " (or no signal " + signal + ")" : ""));
  auto state = read_local_state(run_dir);
  if (!state || state->pgid <= 0 || is_local_final_state(state->state)) return;
  signal_session(state->pgid, sig, /*except=*/state->pgid);
}

void LocalBackend::cancel(const std::string& job_id) {
  std::string run_dir = run_dir_of(job_id);
  if (run_dir.empty())
    throw BackendError("cancel: no local job " + job_id + " under " + runs_root_);
  auto state = read_local_state(run_dir);
  if (state && is_local_final_state(state->state)) return;
  if (state && local_supervisor_alive(state->supervisor_pid, run_dir)) {
    // The supervisor ends the job (TERM, KILL after KillWait) and records CANCELLED.
    kill(state->supervisor_pid, SIGTERM);
    auto deadline = Clock::now() + std::chrono::seconds(2);
    while (Clock::now() < deadline) {
      auto now = read_local_state(run_dir);
      if (!now || now->state == "COMPLETING" || is_local_final_state(now->state)) return;
      if (!local_supervisor_alive(state->supervisor_pid, run_dir)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (local_supervisor_alive(state->supervisor_pid, run_dir)) return;
    state = read_local_state(run_dir);
    if (state && is_local_final_state(state->state)) return;
  }
  // No supervisor: end what is left of the job ourselves.
  LocalJobState s = state.value_or(LocalJobState{});
  s.job_id = job_id;
  if (s.pgid > 0) {
    signal_session(s.pgid, SIGTERM);
    auto deadline = Clock::now() + std::chrono::seconds(options_.kill_wait_seconds);
    while (Clock::now() < deadline && !processes_in_session(s.pgid).empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int round = 0; round < 50 && !processes_in_session(s.pgid).empty(); ++round) {
      signal_session(s.pgid, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  s.state = "CANCELLED";
  s.detail = "cancelled (the local supervisor was gone)";
  s.exit_code = 0;
  s.exit_signal = SIGTERM;
  s.end_time = now_epoch();
  write_local_state(run_dir, s);
}

// ---- entry points ------------------------------------------------------------------------------

std::optional<int> run_local_entry_point(const std::vector<std::string>& argv) {
  if (argv.empty()) return std::nullopt;
  std::string base = fs::path(argv[0]).filename().string();
  if (base == "srun") return run_local_srun(argv);
  if (base == "scontrol") return run_local_scontrol(argv);
  if (argv.size() >= 2 && argv[1] == "__local-job") {
    if (argv.size() != 4 || !all_digits(argv[3])) {
      std::fprintf(stderr,
                   "hpclaunch __local-job RUN_DIR READY_FD: the local backend's job supervisor, "
                   "started by the local backend only\n");
      return kExitUsage;
    }
    return run_local_job_supervisor(argv[2], std::atoi(argv[3].c_str()));
  }
  return std::nullopt;
}

}  // namespace hpc
