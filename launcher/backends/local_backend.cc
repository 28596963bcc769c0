#include "backends/local_backend.h"

#include "follow/run_record.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "error.h"
#include "backends/host.h"
#include "backends/job_counter.h"
#include "backends/local_srun.h"
#include "spec/spec.h"

extern char** environ;

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

using Clock = std::chrono::steady_clock;

// The processes whose session id is `sid`, zombies too if asked.
std::vector<pid_t> session_members(pid_t sid, bool with_zombies);

double now_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Slurm's timestamps in log lines: 2024-05-01T12:00:00, local time.
std::string slurm_timestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

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

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// ---- local-state.json ---------------------------------------------------------------------

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

// ---- the job description the supervisor runs (local-job.json) -------------------------------

struct LocalJob {
  std::string job_id, job_name, run_dir, runs_root, script, workdir;
  std::string stdout_path, stderr_path;
  bool open_mode_append = false;
  long time_limit_seconds = -1;
  int signal_number = 0, signal_seconds = 0;
  bool signal_batch_only = false;
  bool requeue_allowed = true;
  int max_restarts = 5;
  int kill_wait_seconds = 5;
  double submit_time = 0;
  std::map<std::string, std::string> env;  // added to the submitter's environment
};

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
              {"signal", {{"number", j.signal_number},
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

std::optional<LocalJob> read_local_job(const std::string& run_dir) {
  std::string text = read_small_file(run_dir + "/" + kLocalJobFile);
  if (text.empty()) return std::nullopt;
  try {
    return job_from_json(json::parse(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Sends `sig` to every process of the session `sid` but `except`.
void signal_session(pid_t sid, int sig, pid_t except = 0) {
  if (sid <= 0) return;
  if (except == 0) kill(-sid, sig);  // the batch shell's own group first: bash and srun
  for (pid_t p : processes_in_session(sid)) {
    if (p == except) continue;
    if (sig == SIGTERM) kill(p, SIGCONT);  // a stopped process must wake to see SIGTERM
    kill(p, sig);
  }
}

// ---- starting the supervisor ------------------------------------------------------------------

void close_fds_from(int first) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, 0) == 0) return;
#endif
  for (int fd = first; fd < 4096; ++fd) close(fd);
}

// Async-signal-safe decimal formatting (for the forked child).
void put_number(char* out, long value) {
  char tmp[24];
  int n = 0;
  if (value == 0) tmp[n++] = '0';
  while (value > 0) {
    tmp[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  int i = 0;
  while (n > 0) out[i++] = tmp[--n];
  out[i] = '\0';
}

struct SupervisorStart {
  pid_t pid = 0;
  std::string error;  // "" when the supervisor reported that the job started
};

// Double fork + setsid: the supervisor is nobody's child (init reaps it), has no terminal and
// its own session, so neither the submitting process's exit nor its Ctrl-C reaches it. It
// writes "R" on fd 3 once local-state.json says RUNNING; "P<pid>" comes from the child before
// exec, "E<errno>" when exec failed.
SupervisorStart start_supervisor(const std::string& executable, const std::string& run_dir) {
  SupervisorStart result;
  std::string log = run_dir + "/local-supervisor.log";
  std::vector<std::string> args = {executable, "__local-job", run_dir, "3"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  pid_t child = fork();
  if (child < 0) {
    result.error = std::string("fork: ") + std::strerror(errno);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return result;
  }
  if (child == 0) {
    // Only async-signal-safe calls from here to exec: the parent may have threads.
    setsid();
    pid_t grandchild = fork();
    if (grandchild != 0) _exit(grandchild < 0 ? 1 : 0);
    int ready = fcntl(pipe_fds[1], F_DUPFD, 10);
    int null_fd = open("/dev/null", O_RDONLY);
    int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (null_fd >= 0) dup2(null_fd, 0);
    if (log_fd >= 0) {
      dup2(log_fd, 1);
      dup2(log_fd, 2);
    }
    dup2(ready, 3);
    close_fds_from(4);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    char msg[40] = "P";
    put_number(msg + 1, getpid());
    size_t len = std::strlen(msg);
    msg[len++] = '\n';
    if (write(3, msg, len) < 0) _exit(126);
    execve(executable.c_str(), argv.data(), environ);
    msg[0] = 'E';
    put_number(msg + 1, errno);
    len = std::strlen(msg);
    if (write(3, msg, len) < 0) _exit(127);
    _exit(127);
  }
  close(pipe_fds[1]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  std::string got;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      result.error = "the supervisor did not start the job within 20 s";
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[512];
    ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  std::istringstream lines(got);
  std::string line;
  bool started = false;
  std::string failure;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (line[0] == 'P') result.pid = std::atoi(line.c_str() + 1);
    else if (line[0] == 'R') started = true;
    else if (line[0] == 'E') failure = "cannot run " + executable + ": " + std::strerror(std::atoi(line.c_str() + 1));
    else if (line[0] == 'F') failure = line.substr(1);
  }
  if (started) return result;
  if (!failure.empty()) result.error = failure;
  else if (result.error.empty()) result.error = "the supervisor exited before starting the job (see " + log + ")";
  return result;
}

// ---- the supervisor --------------------------------------------------------------------------

class Supervisor {
 public:
  Supervisor(std::string run_dir, int ready_fd) : run_dir_(std::move(run_dir)), ready_fd_(ready_fd) {}

  int run() {
    auto job = read_local_job(run_dir_);
    if (!job) {
      report_ready("F" + run_dir_ + "/" + kLocalJobFile + " is missing or unreadable");
      return 1;
    }
    job_ = *job;
    // Every path it uses is absolute; holding no directory keeps the submitter's cwd removable.
    if (chdir("/") != 0) return 1;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    // Processes the job orphans come to us, not to init: we reap them and they stay countable.
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    state_.job_id = job_.job_id;
    state_.supervisor_pid = getpid();
    state_.submit_time = job_.submit_time;
    state_.max_restarts = job_.max_restarts;
    while (true) {
      RunEnd end = run_once();
      if (end.requeue) continue;
      break;
    }
    report_ready("R");  // in case the job never started
    return state_.state == "COMPLETED" ? 0 : 1;
  }

 private:
  struct RunEnd {
    bool requeue = false;
  };

  void report_ready(const std::string& word) {
    if (ready_fd_ < 0) return;
    write_all(ready_fd_, word + "\n");
    close(ready_fd_);
    ready_fd_ = -1;
  }

  // A state that cannot be written (disk full) is logged; the job goes on regardless.
  void save() {
    try {
      write_local_state(run_dir_, state_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hpclaunch supervisor: %s\n", e.what());
    }
  }

  void log_to_job(const std::string& line) {
    int fd = open(job_.stderr_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    write_all(fd, line + "\n");
    close(fd);
  }

  std::vector<std::string> job_environment() const {
    std::map<std::string, std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      std::string name = kv.substr(0, kv.find('='));
      // A job sees its own allocation, not one the submitter happened to run inside.
      if (name.rfind("SLURM_", 0) == 0 || name == "SLURMD_NODENAME") continue;
      env[name] = kv.substr(std::min(kv.size(), name.size() + 1));
    }
    for (const auto& [k, v] : job_.env) env[k] = v;
    env["SLURM_RESTART_COUNT"] = std::to_string(state_.restarts);
    std::string path = env.count("PATH") ? env["PATH"] : "/usr/local/bin:/usr/bin:/bin";
    env["PATH"] = job_.run_dir + "/bin:" + path;
    std::vector<std::string> out;
    for (const auto& [k, v] : env) out.push_back(k + "=" + v);
    return out;
  }

  // Kills what is left of the session after the batch shell ended and reaps it (orphans come
  // to us, the subreaper), until not even a zombie of the job is left.
  void clean_up_session(pid_t sid) {
    for (int round = 0; round < 100; ++round) {
      reap(0);
      auto left = session_members(sid, true);
      if (left.empty()) return;
      for (pid_t p : left) kill(p, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Reaps every child that has ended, noting the batch shell's wait status when it is one.
  void reap(pid_t shell) {
    int status = 0;
    pid_t p;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
      if (shell > 0 && p == shell) {
        shell_status_ = status;
        shell_done_ = true;
      }
    }
  }

  RunEnd run_once() {
    RunEnd end;
    shell_done_ = false;
    shell_status_ = 0;
    int mode = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (job_.open_mode_append ? 0 : O_TRUNC);
    int out_fd = open(job_.stdout_path.c_str(), mode, 0644);
    int err_fd = -1;
    if (out_fd >= 0) {
      err_fd = job_.stderr_path == job_.stdout_path ? fcntl(out_fd, F_DUPFD_CLOEXEC, 0)
                                                    : open(job_.stderr_path.c_str(), mode, 0644);
    }
    if (out_fd < 0 || err_fd < 0) {
      std::string which = out_fd < 0 ? job_.stdout_path : job_.stderr_path;
      state_.state = "FAILED";
      state_.detail = "cannot open " + which + ": " + std::strerror(errno);
      state_.exit_code = 1;
      state_.start_time = state_.end_time = now_epoch();
      if (out_fd >= 0) close(out_fd);
      save();
      return end;
    }

    std::vector<std::string> env = job_environment();
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string bash = access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "bash";
    std::vector<std::string> args = {bash, job_.script};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    // The batch shell waits at this gate until local-state.json names it: nothing of the job
    // (scontrol requeue, a status call) can see it running before its state says so.
    int gate[2];
    if (pipe2(gate, O_CLOEXEC) != 0) gate[0] = gate[1] = -1;
    pid_t pid = fork();
    if (pid == 0) {
      setsid();  // the job's session and process group: every process of the job
      if (gate[1] >= 0) {
        close(gate[1]);
        char c;
        while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
        }
      }
      int null_fd = open("/dev/null", O_RDONLY);
      dup2(null_fd, 0);
      dup2(out_fd, 1);
      dup2(err_fd, 2);
      close_fds_from(3);
      // The supervisor is single-threaded: the child may allocate.
      if (chdir(job_.workdir.c_str()) != 0) {
        write_all(2, "slurmstepd: error: couldn't chdir to `" + job_.workdir + "': " +
                         std::strerror(errno) + ": going to /tmp instead\n");
        if (chdir("/tmp") != 0) _exit(1);
      }
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      signal(SIGPIPE, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      if (bash[0] == '/') execve(bash.c_str(), argv.data(), envp.data());
      else execvpe(bash.c_str(), argv.data(), envp.data());
      write_all(2, "slurmstepd: error: execve(): bash: " + std::string(std::strerror(errno)) + "\n");
      _exit(127);
    }
    close(out_fd);
    close(err_fd);
    if (gate[0] >= 0) close(gate[0]);
    auto open_gate = [&]() {
      if (gate[1] >= 0) close(gate[1]);
      gate[1] = -1;
    };
    if (pid < 0) {
      open_gate();
      state_.state = "FAILED";
      state_.detail = std::string("cannot start the batch shell: fork: ") + std::strerror(errno);
      state_.exit_code = 1;
      state_.start_time = state_.end_time = now_epoch();
      save();
      return end;
    }

    state_.state = "RUNNING";
    state_.detail.clear();
    state_.pid = pid;
    state_.pgid = pid;
    state_.start_time = now_epoch();
    state_.end_time = 0;
    state_.exit_code = -1;
    state_.exit_signal = 0;
    save();
    open_gate();
    report_ready("R");

    auto start = Clock::now();
    std::optional<Clock::time_point> signal_at, limit_at, kill_at;
    if (job_.time_limit_seconds > 0) {
      limit_at = start + std::chrono::seconds(job_.time_limit_seconds);
      if (job_.signal_number > 0)
        signal_at = *limit_at - std::chrono::seconds(job_.signal_seconds);
    }
    bool cancelled = false, timed_out = false;
    auto terminate = [&](const std::string& why) {
      log_to_job("slurmstepd: error: *** JOB " + job_.job_id + " ON localhost CANCELLED AT " +
                 slurm_timestamp() + why + " ***");
      state_.state = "COMPLETING";
      state_.detail = cancelled ? "cancelled" : "time limit reached";
      save();
      signal_session(pid, SIGTERM);
      kill_at = Clock::now() + std::chrono::seconds(job_.kill_wait_seconds);
    };

    while (!shell_done_) {
      auto now = Clock::now();
      if (signal_at && now >= *signal_at) {
        signal_at.reset();
        if (job_.signal_batch_only) kill(pid, job_.signal_number);
        else signal_session(pid, job_.signal_number, pid);
      }
      if (limit_at && now >= *limit_at && !cancelled && !timed_out) {
        limit_at.reset();
        timed_out = true;
        terminate(" DUE TO TIME LIMIT");
      }
      if (kill_at && now >= *kill_at) {
        kill_at.reset();
        signal_session(pid, SIGKILL);
      }
      auto next = Clock::time_point::max();
      for (const auto& t : {signal_at, limit_at, kill_at})
        if (t) next = std::min(next, *t);
      int timeout_ms = -1;
      if (next != Clock::time_point::max()) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
        timeout_ms = static_cast<int>(std::clamp<long long>(ms + 1, 0, 60000));
      }
      pollfd p{signal_fd_, POLLIN, 0};
      int r = poll(&p, 1, timeout_ms);
      if (r < 0 && errno != EINTR) break;
      signalfd_siginfo info;
      while (read(signal_fd_, &info, sizeof info) == sizeof info) {
        int sig = static_cast<int>(info.ssi_signo);
        if ((sig == SIGTERM || sig == SIGINT) && !cancelled && !timed_out) {
          cancelled = true;
          terminate("");
        } else if ((sig == SIGTERM || sig == SIGINT) && timed_out) {
          cancelled = true;  // cancelled while ending at the time limit: the user's word wins
        }
      }
      reap(pid);
    }
    clean_up_session(pid);

    std::error_code ec;
    bool requeue_requested = fs::remove(run_dir_ + "/" + kLocalRequeueFile, ec);
    int status = shell_status_;
    state_.end_time = now_epoch();
    state_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    state_.exit_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (requeue_requested && !cancelled && job_.requeue_allowed &&
        state_.restarts < state_.max_restarts) {
      state_.restarts += 1;
      state_.state = "REQUEUED";
      state_.detail = "requeued by scontrol requeue (restart " + std::to_string(state_.restarts) +
                      " of at most " + std::to_string(state_.max_restarts) + ")";
      save();
      end.requeue = true;
      return end;
    }
    state_.detail.clear();
    if (cancelled) {
      state_.state = "CANCELLED";
      state_.exit_code = 0;
      state_.exit_signal = SIGTERM;
    } else if (timed_out) {
      state_.state = "TIMEOUT";
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      state_.state = "COMPLETED";
    } else {
      state_.state = "FAILED";
    }
    if (requeue_requested && !cancelled && state_.restarts >= state_.max_restarts)
      state_.detail = "requeue refused: " + std::to_string(state_.max_restarts) + " restarts already";
    save();
    return end;
  }

  std::string run_dir_;
  int ready_fd_;
  int signal_fd_ = -1;
  LocalJob job_;
  LocalJobState state_;
  bool shell_done_ = false;
  int shell_status_ = 0;
};

}  // namespace

// ---- public helpers ----------------------------------------------------------------------------

std::optional<LocalJobState> read_local_state(const std::string& run_dir) {
  std::string text = read_small_file(run_dir + "/" + kLocalStateFile);
  if (text.empty()) return std::nullopt;
  try {
    json v = json::parse(text);
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
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void write_local_state(const std::string& run_dir, const LocalJobState& state) {
  try {
    write_file_atomically(run_dir + "/" + kLocalStateFile, state_to_json(state).dump(2) + "\n");
  } catch (const UserError& e) {
    throw BackendError(e.what());
  }
}

bool is_local_final_state(const std::string& state) {
  return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT";
}

std::vector<pid_t> processes_in_session(pid_t sid) { return session_members(sid, false); }

namespace {

std::vector<pid_t> session_members(pid_t sid, bool with_zombies) {
  std::vector<pid_t> out;
  if (sid <= 0) return out;
  DIR* dir = opendir("/proc");
  if (!dir) return out;
  while (dirent* entry = readdir(dir)) {
    if (!std::isdigit(static_cast<unsigned char>(entry->d_name[0]))) continue;
    std::string stat = read_small_file(std::string("/proc/") + entry->d_name + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) continue;
    std::istringstream fields(stat.substr(paren + 2));
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0;
    if (!(fields >> state >> ppid >> pgrp >> session)) continue;
    bool dead = state == 'Z' || state == 'X';
    if (session == sid && (with_zombies || !dead)) out.push_back(std::atoi(entry->d_name));
  }
  closedir(dir);
  return out;
}

}  // namespace

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

std::string find_local_run_dir(const std::string& runs_root, const std::string& job_id) {
  if (!all_digits(job_id)) return "";
  std::error_code ec;
  std::string suffix = "-" + job_id;
  for (fs::directory_iterator it(runs_root, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string dir = it->path().string();
    auto job = read_local_job(dir);
    if (job && job->job_id == job_id) return dir;
  }
  return "";
}

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

SubmitResult LocalBackend::submit(const SubmitRequest& request) {
  SbatchOptions o = parse_sbatch_options(request.script, "batch script");
  if (o.nodes > 1) {
    throw UserError("--nodes=" + std::to_string(o.nodes),
                    "the local backend runs one node", "use a 1nXg preset or a Slurm backend");
  }
  const int ntasks = o.tasks();
  const int cpus = options_.cpus > 0 ? options_.cpus : available_cpus();
  const int requested_cpus = o.cpus_per_task > 0 ? o.cpus_per_task : 1;
  // An allocation on this machine could not give more than it has: ntasks x cpus <= CPUs.
  const int cpus_per_task = std::max(1, std::min(requested_cpus, cpus / ntasks));

  std::error_code ec;
  std::string submit_dir = fs::current_path(ec).string();
  auto absolute_from = [](const std::string& base, const std::string& p) {
    fs::path path(p);
    return (path.is_absolute() ? path : fs::path(base) / path).lexically_normal().string();
  };
  std::string runs_root = request.runs_root.empty() ? runs_root_ : absolute_from(submit_dir, request.runs_root);
  if (runs_root.size() > 1 && runs_root.back() == '/') runs_root.pop_back();
  std::string workdir = !request.workdir.empty() ? absolute_from(submit_dir, request.workdir)
                        : !o.chdir.empty()       ? absolute_from(submit_dir, o.chdir)
                                                 : submit_dir;
  if (!fs::is_directory(workdir, ec)) {
    throw UserError(workdir, "the job's working directory does not exist", "create it or choose another");
  }

  std::string executable = options_.executable;
  if (executable.empty()) {
    executable = fs::read_symlink("/proc/self/exe", ec).string();
    if (ec) throw BackendError("cannot find the hpclaunch executable (/proc/self/exe): " + ec.message());
  }
  executable = absolute_from(submit_dir, executable);
  if (access(executable.c_str(), X_OK) != 0) {
    throw BackendError("the hpclaunch executable " + executable + " cannot be run: " + std::strerror(errno));
  }

  fs::create_directories(runs_root, ec);
  if (ec) throw BackendError("cannot create the runs directory " + runs_root + ": " + ec.message());

  std::string job_id = allocate_local_job_id(runs_root);
  std::string job_name = !o.job_name.empty() ? o.job_name : !request.job_name.empty() ? request.job_name : "sbatch";
  std::string dir_name = run_dir_name(request.job_name.empty() ? job_name : request.job_name) + "-" + job_id;
  std::string run_dir = runs_root + "/" + dir_name;

  SlurmFilenameContext names{job_id, job_name, user_name(), "localhost"};
  std::string output = !request.output.empty() ? request.output : !o.output.empty() ? o.output : "slurm-%j.out";
  std::string error = !request.error.empty() ? request.error : o.error;
  std::string stdout_path = absolute_from(run_dir, expand_slurm_filename(output, names));
  std::string stderr_path = error.empty() ? stdout_path : absolute_from(run_dir, expand_slurm_filename(error, names));
  for (const auto& path : {stdout_path, stderr_path}) {
    fs::path parent = fs::path(path).parent_path();
    bool inside_run_dir = path.rfind(run_dir + "/", 0) == 0;
    if (!inside_run_dir && !fs::is_directory(parent, ec)) {
      throw UserError(path, "the job's output directory " + parent.string() + " does not exist",
                      "create it first (Slurm does not)");
    }
  }
  for (const auto& [file, content] : request.files) {
    (void)content;
    if (file.empty() || file.find("..") != std::string::npos || file[0] == '/')
      throw BackendError("bad run directory file name \"" + file + "\"");
  }

  if (!fs::create_directory(run_dir, ec) || ec) {
    throw BackendError("cannot create the run directory " + run_dir + ": " +
                       (ec ? ec.message() : "it exists already"));
  }
  LocalJob job;
  job.job_id = job_id;
  job.job_name = job_name;
  job.run_dir = run_dir;
  job.runs_root = runs_root;
  job.script = run_dir + "/script.sbatch";
  job.workdir = workdir;
  job.stdout_path = stdout_path;
  job.stderr_path = stderr_path;
  job.open_mode_append = o.open_mode_append;
  job.time_limit_seconds = o.time_limit_seconds;
  job.signal_number = o.signal_number;
  job.signal_seconds = o.signal_seconds;
  job.signal_batch_only = o.signal_batch_only;
  job.requeue_allowed = !o.no_requeue;
  job.max_restarts = options_.max_restarts;
  job.kill_wait_seconds = options_.kill_wait_seconds;
  job.submit_time = now_epoch();
  const std::string n = std::to_string(ntasks), c = std::to_string(cpus_per_task);
  const std::string node_cpus = std::to_string(ntasks * cpus_per_task);
  job.env = {
      {"SLURM_JOB_ID", job_id},
      {"SLURM_JOBID", job_id},
      {"SLURM_JOB_NAME", job_name},
      {"SLURM_JOB_NODELIST", "localhost"},
      {"SLURM_NODELIST", "localhost"},
      {"SLURMD_NODENAME", "localhost"},
      {"SLURM_JOB_NUM_NODES", "1"},
      {"SLURM_NNODES", "1"},
      {"SLURM_NTASKS", n},
      {"SLURM_NPROCS", n},
      {"SLURM_NTASKS_PER_NODE", n},
      {"SLURM_TASKS_PER_NODE", n},
      {"SLURM_CPUS_PER_TASK", c},
      {"SLURM_CPUS_ON_NODE", node_cpus},
      {"SLURM_JOB_CPUS_PER_NODE", node_cpus},
      {"SLURM_NODEID", "0"},
      {"SLURM_PROCID", "0"},
      {"SLURM_LOCALID", "0"},
      {"SLURM_GTIDS", "0"},
      {"SLURM_SUBMIT_DIR", submit_dir},
      {"SLURM_SUBMIT_HOST", host_name()},
      {"SLURM_CLUSTER_NAME", "local"},
      {"SLURM_JOB_PARTITION", "local"},
      {"SLURM_JOB_USER", user_name()},
      {"SLURM_JOB_UID", std::to_string(getuid())},
      {"SLURM_JOB_GID", std::to_string(getgid())},
      {"ENVIRONMENT", "BATCH"},
      // As with the slurm backend: the script puts the trainer's metrics into the run dir.
      {"HPCLAUNCH_RUN_DIR_PREFIX", runs_root + "/" + run_dir_name(request.job_name.empty() ? job_name : request.job_name) + "-"},
      // For the local scontrol (requeue) and srun.
      {"HPCLAUNCH_LOCAL_RUN_DIR", run_dir},
      {"HPCLAUNCH_LOCAL_RUNS_ROOT", runs_root},
  };

  SubmitResult result;
  result.job_id = job_id;
  result.run_dir = run_dir;
  result.submit_command = "hpclaunch __local-job " + run_dir + " (local backend: bash script.sbatch in " + workdir + ")";
  try {
    write_file_atomically(job.script, request.script, 0755);
    for (const auto& [file, content] : request.files) {
      fs::path target = fs::path(run_dir) / file;
      fs::create_directories(target.parent_path(), ec);
      write_file_atomically(target, content, 0644);
    }
    for (const auto& path : {stdout_path, stderr_path}) {
      if (path.rfind(run_dir + "/", 0) == 0) fs::create_directories(fs::path(path).parent_path(), ec);
    }
    fs::create_directory(run_dir + "/bin", ec);
    for (const char* shim : {"srun", "scontrol"}) {
      fs::create_symlink(executable, run_dir + "/bin/" + shim, ec);
      if (ec) throw BackendError("cannot link " + run_dir + "/bin/" + shim + ": " + ec.message());
    }
    write_file_atomically(run_dir + "/" + kLocalJobFile, job_to_json(job).dump(2) + "\n");
  } catch (const UserError& e) {
    throw BackendError(e.what());
  }

  SupervisorStart started = start_supervisor(executable, run_dir);
  if (!started.error.empty()) {
    if (started.pid > 0) kill(started.pid, SIGKILL);
    LocalJobState failed;
    failed.job_id = job_id;
    failed.state = "FAILED";
    failed.detail = started.error;
    failed.submit_time = failed.start_time = failed.end_time = job.submit_time;
    failed.exit_code = 1;
    try {
      write_local_state(run_dir, failed);
    } catch (const BackendError&) {
    }
    throw BackendError("local job " + job_id + " did not start: " + started.error);
  }
  submitted_[job_id] = run_dir;
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
  if (!is_local_final_state(state->state) && !local_supervisor_alive(state->supervisor_pid, run_dir)) {
    // It may have written its last state just before exiting: look once more.
    if (auto again = read_local_state(run_dir)) state = again;
    if (!is_local_final_state(state->state)) {
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

void LocalBackend::cancel(const std::string& job_id) {
  std::string run_dir = run_dir_of(job_id);
  if (run_dir.empty()) throw BackendError("cancel: no local job " + job_id + " under " + runs_root_);
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

int run_local_job_supervisor(const std::string& run_dir, int ready_fd) {
  Supervisor supervisor(run_dir, ready_fd);
  return supervisor.run();
}

std::optional<int> run_local_entry_point(const std::vector<std::string>& argv) {
  if (argv.empty()) return std::nullopt;
  std::string base = fs::path(argv[0]).filename().string();
  if (base == "srun") return run_local_srun(argv);
  if (base == "scontrol") return run_local_scontrol(argv);
  if (argv.size() >= 2 && argv[1] == "__local-job") {
    if (argv.size() != 4 || !all_digits(argv[3])) {
      std::fprintf(stderr, "hpclaunch __local-job RUN_DIR READY_FD: the local backend's job supervisor, "
                           "started by the local backend only\n");
      return kExitUsage;
    }
    return run_local_job_supervisor(argv[2], std::atoi(argv[3].c_str()));
  }
  return std::nullopt;
}

}  // namespace hpc
