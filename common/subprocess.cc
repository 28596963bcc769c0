#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>

extern char** environ;

#include "text.h"

namespace hpc {
namespace {

using Clock = std::chrono::steady_clock;

// The commands run_command is waiting for (their process group ids), for a signal handler to
// kill: a fixed table of atomics, so that reading it is async-signal-safe.
constexpr int kTrackedCommands = 128;
std::atomic<pid_t> g_running[kTrackedCommands];

void track_command(pid_t pgid) {
  for (auto& slot : g_running) {
    pid_t free_slot = 0;
    if (slot.compare_exchange_strong(free_slot, pgid)) return;
  }
  // More commands at once than any verb runs: this one still dies with us (PR_SET_PDEATHSIG).
}

void untrack_command(pid_t pgid) {
  for (auto& slot : g_running) {
    pid_t mine = pgid;
    if (slot.compare_exchange_strong(mine, 0)) return;
  }
}

extern "C" void end_with_commands(int sig) {
  kill_running_commands();
  // Then end as the signal would have (the handler is reset to the default on entry).
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void kill_running_commands() {
  for (auto& slot : g_running) {
    const pid_t pgid = slot.load();
    if (pgid > 0) kill(-pgid, SIGKILL);
  }
}

void end_commands_with_this_process() {
  struct sigaction sa {};
  sa.sa_handler = end_with_commands;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction old {};
    // A signal ignored when we started (nohup, a background job's SIGINT) stays ignored.
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaction(sig, &sa, nullptr);
  }
}

std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    env[kv.substr(0, kv.find('='))] = kv;
  }
  for (const auto& kv : extra) env[kv.substr(0, kv.find('='))] = kv;
  std::vector<std::string> out;
  for (auto& [k, v] : env) out.push_back(std::move(v));
  return out;
}

std::string CommandResult::summary(const std::string& program) const {
  if (!spawn_error.empty()) return program + ": " + spawn_error;
  std::string how = timed_out     ? "timed out"
                    : term_signal ? "was killed by signal " + std::to_string(term_signal)
                                  : "exited with " + std::to_string(exit_code);
  std::string detail = first_line(err);
  if (detail.empty()) detail = first_line(out);
  return program + " " + how + (detail.empty() ? "" : ": " + detail);
}

std::string find_in_path(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos)
    return access(program.c_str(), X_OK) == 0 ? program : "";
  for (size_t start = 0;;) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon - start);
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0)
      return dir + "/" + program;
    if (colon == std::string::npos) return "";
    start = colon + 1;
  }
}

bool program_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  return !find_in_path(program, path ? path : "/usr/bin:/bin").empty();
}

CommandResult run_command(const std::vector<std::string>& argv, const CommandOptions& options) {
  if (argv.empty()) throw std::invalid_argument("run_command: empty argv");
  CommandResult result;
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) {
    result.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  std::vector<std::string> env = options.env_only ? options.env : merged_environment(options.env);
  for (const auto& name : options.pass_env) {
    const char* value = std::getenv(name.c_str());
    if (value && options.env_only) env.push_back(name + "=" + value);
  }
  for (const auto& name : options.unset_env) {
    env.erase(std::remove_if(env.begin(), env.end(),
                             [&](const std::string& kv) { return kv.rfind(name + "=", 0) == 0; }),
              env.end());
  }
  // argv[0] is looked up in the PATH the command gets (posix_spawnp would use ours).
  std::string path_value = "/usr/bin:/bin";
  for (const auto& e : env)
    if (e.rfind("PATH=", 0) == 0) path_value = e.substr(5);
  std::string program =
      argv[0].find('/') != std::string::npos ? argv[0] : find_in_path(argv[0], path_value);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  // Every command ends with us: in a process group of its own (a timeout kills all it
  // started), killed by the kernel should we die first (PR_SET_PDEATHSIG), and by
  // kill_running_commands() should a signal end us. fork, not posix_spawn: only a forked child
  // can ask for the death signal before it execs.
  const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  int exec_error[2];
  int rc = 0;
  pid_t pid = -1;
  if (program.empty()) {
    rc = ENOENT;
  } else if (pipe2(exec_error, O_CLOEXEC) != 0) {
    rc = errno;
  } else {
    const pid_t parent = getpid();
    pid = fork();
    if (pid == 0) {
      // The child: async-signal-safe calls only, until execve.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // we died before the line above
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig = 1; sig < NSIG; ++sig)
        if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      const int from[3] = {in_pipe[0], out_pipe[1], err_pipe[1]};
      for (int fd = 0; fd < 3; ++fd) {
        if (from[fd] == fd)
          fcntl(fd, F_SETFD, 0);  // already there: keep it across exec
        else
          dup2(from[fd], fd);
      }
      if (cwd == nullptr || chdir(cwd) == 0) execve(program.c_str(), cargv.data(), cenv.data());
      const int err = errno;
      (void)!write(exec_error[1], &err, sizeof err);
      _exit(127);
    }
    if (pid < 0) rc = errno;
    close(exec_error[1]);
    if (pid > 0) {
      int err = 0;
      ssize_t n;
      while ((n = read(exec_error[0], &err, sizeof err)) < 0 && errno == EINTR) {}
      if (n == static_cast<ssize_t>(sizeof err)) {
        rc = err;  // chdir or execve failed
        while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
      } else {
        track_command(pid);
      }
    }
    close(exec_error[0]);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    result.spawn_error = std::strerror(rc);
    close(in_pipe[1]);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }

  // Writing to a command that already exited must not end us with SIGPIPE: blocked in this
  // thread only (the launcher has other threads), a pending one discarded below.
  sigset_t pipe_set, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);

  std::string input = options.stdin_data.value_or("");
  size_t written = 0;
  int in_fd = in_pipe[1];
  if (input.empty()) {
    close(in_fd);
    in_fd = -1;
  } else {
    fcntl(in_fd, F_SETFL, O_NONBLOCK);
  }
  int fds[2] = {out_pipe[0], err_pipe[0]};
  std::string* sinks[2] = {&result.out, &result.err};
  auto deadline = Clock::now() + options.timeout;
  bool open[2] = {true, true};
  while (open[0] || open[1] || in_fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd p[3];
    int n = 0;
    int index_of[3];
    for (int i = 0; i < 2; ++i)
      if (open[i]) {
        p[n] = {fds[i], POLLIN, 0};
        index_of[n++] = i;
      }
    if (in_fd >= 0) {
      p[n] = {in_fd, POLLOUT, 0};
      index_of[n++] = 2;
    }
    int ready = poll(p, n, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (int k = 0; k < n && ready > 0; ++k) {
      if (!p[k].revents) continue;
      int i = index_of[k];
      if (i == 2) {
        ssize_t w = write(in_fd, input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN && errno != EINTR) written = input.size();
        if (written >= input.size()) {
          close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      char buf[65536];
      ssize_t r = read(fds[i], buf, sizeof buf);
      if (r > 0)
        sinks[i]->append(buf, static_cast<size_t>(r));
      else if (r == 0 || (errno != EINTR && errno != EAGAIN))
        open[i] = false;
    }
  }
  if (in_fd >= 0) close(in_fd);
  close(fds[0]);
  close(fds[1]);
  // The pipes are closed, but the command may run on (it closed them, or left them to a child):
  // the deadline holds for its exit too.
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, result.timed_out ? 0 : WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0 && Clock::now() >= deadline) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
    } else if (w == 0) {
      usleep(2000);
    }
  }
  untrack_command(pid);
  if (!sigismember(&old_mask, SIGPIPE)) {
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {}
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.term_signal = WTERMSIG(status);
  return result;
}

}  // namespace hpc
