#include "backends/local_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "backends/local_job.h"
#include "backends/process_session.h"
#include "posix_io.h"

extern char** environ;

namespace fs = std::filesystem;

namespace hpc {
namespace {

using Clock = std::chrono::steady_clock;

// Slurm's timestamps in log lines: 2024-05-01T12:00:00, local time.
std::string slurm_timestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
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

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The grandchild of start_local_supervisor, before exec: only async-signal-safe calls (the
// submitting process may have threads). Reports "P<pid>" on fd 3, "E<errno>" if exec fails.
[[noreturn]] void exec_supervisor(const std::string& executable, const std::string& log,
                                  std::vector<char*>& argv, int ready_write_fd) {
  int ready = fcntl(ready_write_fd, F_DUPFD, 10);
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

// Everything written to `fd` until it closes or `seconds` pass; `timed_out` says which.
std::string read_until_closed(int fd, int seconds, bool& timed_out) {
  std::string got;
  timed_out = false;
  auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      return got;
    }
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r <= 0) continue;  // EINTR or not yet: the deadline decides
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return got;
    got.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

// Double fork + setsid: the supervisor is nobody's child (init reaps it), has no terminal and
// its own session, so neither the submitting process's exit nor its Ctrl-C reaches it. It
// writes "R" on fd 3 once local-state.json says RUNNING, "F<why>" when it cannot run the job.
SupervisorStart start_local_supervisor(const std::string& executable, const std::string& run_dir) {
  SupervisorStart result;
  std::string log = run_dir + "/local-supervisor.log";
  std::vector<std::string> args = {executable, "__local-job", run_dir, "3"};
  std::vector<char*> argv = c_strings(args);

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
    setsid();
    pid_t grandchild = fork();
    if (grandchild != 0) _exit(grandchild < 0 ? 1 : 0);
    exec_supervisor(executable, log, argv, pipe_fds[1]);
  }
  close(pipe_fds[1]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
  bool timed_out = false;
  std::string got = read_until_closed(pipe_fds[0], 20, timed_out);
  close(pipe_fds[0]);
  if (timed_out) result.error = "the supervisor did not start the job within 20 s";
  std::istringstream lines(got);
  std::string line;
  bool started = false;
  std::string failure;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (line[0] == 'P')
      result.pid = std::atoi(line.c_str() + 1);
    else if (line[0] == 'R')
      started = true;
    else if (line[0] == 'E')
      failure = "cannot run " + executable + ": " + std::strerror(std::atoi(line.c_str() + 1));
    else if (line[0] == 'F')
      failure = line.substr(1);
  }
  if (started) return result;
  if (!failure.empty())
    result.error = failure;
  else if (result.error.empty())
    result.error = "the supervisor exited before starting the job (see " + log + ")";
  return result;
}

namespace {

class Supervisor {
 public:
  Supervisor(std::string run_dir, int ready_fd)
      : run_dir_(std::move(run_dir)), ready_fd_(ready_fd) {}

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
    // A write past a file size limit fails (EFBIG, reported) instead of killing the supervisor.
    signal(SIGXFSZ, SIG_IGN);
    // Processes the job orphans come to us, not to init: we reap them and they stay countable.
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    state_.job_id = job_.job_id;
    state_.supervisor_pid = getpid();
    state_.submit_time = job_.submit_time;
    state_.max_restarts = job_.max_restarts;
    while (run_once()) {}
    report_ready("R");  // in case the job never started
    return state_.state == "COMPLETED" ? 0 : 1;
  }

 private:
  // How one run of the batch shell ended, besides its wait status.
  struct Ending {
    bool cancelled = false;  // cancel (SIGTERM/SIGINT to the supervisor)
    bool timed_out = false;  // the time limit
  };

  void report_ready(const std::string& word) {
    if (ready_fd_ < 0) return;
    write_all(ready_fd_, word + "\n");
    close(ready_fd_);
    ready_fd_ = -1;
  }

  // A state that cannot be written (disk full) is logged; the job goes on regardless.
  bool save() {
    try {
      write_local_state(run_dir_, state_);
      return true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hpclaunch supervisor: %s\n", e.what());
      return false;
    }
  }

  // The job's last state: a disk that filled up (the job's log) must not leave it RUNNING with
  // nobody to say otherwise; try again every few seconds, for an hour, while status sees us
  // alive and the state before.
  void save_final() {
    for (int attempt = 0; attempt < 720 && !save(); ++attempt)
      std::this_thread::sleep_for(std::chrono::seconds(5));
  }

  void fail(const std::string& detail) {
    state_.state = "FAILED";
    state_.detail = detail;
    state_.exit_code = 1;
    state_.start_time = state_.end_time = now_epoch();
    save();
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

  // Opens the job's output file(s) as sbatch's --output/--error and --open-mode say; -1 and
  // the job recorded FAILED when one cannot be opened.
  bool open_outputs(int& out_fd, int& err_fd) {
    int mode = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (job_.open_mode_append ? 0 : O_TRUNC);
    out_fd = open(job_.stdout_path.c_str(), mode, 0644);
    err_fd = -1;
    if (out_fd >= 0) {
      err_fd = job_.stderr_path == job_.stdout_path ? fcntl(out_fd, F_DUPFD_CLOEXEC, 0)
                                                    : open(job_.stderr_path.c_str(), mode, 0644);
    }
    if (out_fd >= 0 && err_fd >= 0) return true;
    std::string which = out_fd < 0 ? job_.stdout_path : job_.stderr_path;
    std::string why = std::strerror(errno);
    if (out_fd >= 0) close(out_fd);
    fail("cannot open " + which + ": " + why);
    return false;
  }

  // The batch shell, in a session of its own: the job's processes are that session. It waits
  // at `gate_read` until local-state.json names it, so nothing of the job (scontrol requeue,
  // a status call) can see it running before its state says so.
  pid_t fork_batch_shell(int out_fd, int err_fd, int gate_read, int gate_write) {
    std::vector<std::string> env = job_environment();
    std::vector<char*> envp = c_strings(env);
    std::string bash = access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "bash";
    std::vector<std::string> args = {bash, job_.script};
    std::vector<char*> argv = c_strings(args);
    pid_t pid = fork();
    if (pid != 0) return pid;
    setsid();
    if (gate_write >= 0) {
      close(gate_write);
      char c;
      while (read(gate_read, &c, 1) < 0 && errno == EINTR) {}
    }
    int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    close_fds_from(3);
    // The supervisor is single-threaded: the child may allocate.
    if (chdir(job_.workdir.c_str()) != 0) {
      write_all(2, "slurmstepd: error: couldn't chdir to `" + job_.workdir +
                       "': " + std::strerror(errno) + ": going to /tmp instead\n");
      if (chdir("/tmp") != 0) _exit(1);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    if (bash[0] == '/')
      execve(bash.c_str(), argv.data(), envp.data());
    else
      execvpe(bash.c_str(), argv.data(), envp.data());
    write_all(2, "slurmstepd: error: execve(): bash: " + std::string(std::strerror(errno)) + "\n");
    _exit(127);
  }

  // Starts the batch shell and records the job RUNNING; 0 (and FAILED) when it cannot.
  pid_t start_batch_shell() {
    int out_fd = -1, err_fd = -1;
    if (!open_outputs(out_fd, err_fd)) return 0;
    int gate[2];
    if (pipe2(gate, O_CLOEXEC) != 0) gate[0] = gate[1] = -1;
    pid_t pid = fork_batch_shell(out_fd, err_fd, gate[0], gate[1]);
    close(out_fd);
    close(err_fd);
    if (gate[0] >= 0) close(gate[0]);
    if (pid < 0) {
      if (gate[1] >= 0) close(gate[1]);
      fail(std::string("cannot start the batch shell: fork: ") + std::strerror(errno));
      return 0;
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
    if (gate[1] >= 0) close(gate[1]);  // opens the gate
    report_ready("R");
    return pid;
  }

  // Waits for the batch shell `pid` to end while keeping the time limit and obeying cancel.
  Ending watch(pid_t pid) {
    Ending ending;
    auto start = Clock::now();
    std::optional<Clock::time_point> signal_at, limit_at, kill_at;
    if (job_.time_limit_seconds > 0) {
      limit_at = start + std::chrono::seconds(job_.time_limit_seconds);
      if (job_.signal_number > 0) signal_at = *limit_at - std::chrono::seconds(job_.signal_seconds);
    }
    auto terminate = [&](const std::string& why) {
      log_to_job("slurmstepd: error: *** JOB " + job_.job_id + " ON localhost CANCELLED AT " +
                 slurm_timestamp() + why + " ***");
      state_.state = "COMPLETING";
      state_.detail = ending.cancelled ? "cancelled" : "time limit reached";
      save();
      signal_session(pid, SIGTERM);
      kill_at = Clock::now() + std::chrono::seconds(job_.kill_wait_seconds);
    };

    while (!shell_done_) {
      auto now = Clock::now();
      if (signal_at && now >= *signal_at) {
        signal_at.reset();
        if (job_.signal_batch_only)
          kill(pid, job_.signal_number);
        else
          signal_session(pid, job_.signal_number, pid);
      }
      if (limit_at && now >= *limit_at && !ending.cancelled && !ending.timed_out) {
        limit_at.reset();
        ending.timed_out = true;
        terminate(" DUE TO TIME LIMIT");
      }
      if (kill_at && now >= *kill_at) {
        kill_at.reset();
        signal_session(pid, SIGKILL);
      }
      int timeout_ms = poll_timeout_ms({signal_at, limit_at, kill_at});
      pollfd p{signal_fd_, POLLIN, 0};
      int r = poll(&p, 1, timeout_ms);
      if (r < 0 && errno != EINTR) break;
      signalfd_siginfo info;
      while (read(signal_fd_, &info, sizeof info) == sizeof info) {
        int sig = static_cast<int>(info.ssi_signo);
        if (sig != SIGTERM && sig != SIGINT) continue;
        if (!ending.cancelled && !ending.timed_out) {
          ending.cancelled = true;
          terminate("");
        } else if (ending.timed_out) {
          ending.cancelled = true;  // cancelled while ending at the time limit: the user's word
        }
      }
      reap(pid);
    }
    return ending;
  }

  // Records how the run ended; true when `scontrol requeue` asked for another run.
  bool finish(const Ending& ending) {
    std::error_code ec;
    bool requeue_requested = fs::remove(run_dir_ + "/" + kLocalRequeueFile, ec);
    int status = shell_status_;
    state_.end_time = now_epoch();
    state_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    state_.exit_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (requeue_requested && !ending.cancelled && job_.requeue_allowed &&
        state_.restarts < state_.max_restarts) {
      state_.restarts += 1;
      state_.state = "REQUEUED";
      state_.detail = "requeued by scontrol requeue (restart " + std::to_string(state_.restarts) +
                      " of at most " + std::to_string(state_.max_restarts) + ")";
      save();
      return true;
    }
    state_.detail.clear();
    if (ending.cancelled) {
      state_.state = "CANCELLED";
      state_.exit_code = 0;
      state_.exit_signal = SIGTERM;
    } else if (ending.timed_out) {
      state_.state = "TIMEOUT";
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      state_.state = "COMPLETED";
    } else {
      state_.state = "FAILED";
    }
    if (requeue_requested && !ending.cancelled && state_.restarts >= state_.max_restarts) {
      state_.detail =
          "requeue refused: " + std::to_string(state_.max_restarts) + " restarts already";
    }
    save_final();
    return false;
  }

  // One run of the batch script; true when it is to run again (requeued).
  bool run_once() {
    shell_done_ = false;
    shell_status_ = 0;
    pid_t pid = start_batch_shell();
    if (pid <= 0) return false;
    Ending ending = watch(pid);
    clean_up_session(pid);
    return finish(ending);
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

int run_local_job_supervisor(const std::string& run_dir, int ready_fd) {
  Supervisor supervisor(run_dir, ready_fd);
  return supervisor.run();
}

}  // namespace hpc
