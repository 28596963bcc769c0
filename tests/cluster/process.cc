#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace hpc::test {
namespace {

using Clock = std::chrono::steady_clock;

// Closes a descriptor once, on scope exit or when asked.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { close(); }
  int get() const { return fd_; }
  void reset(int fd) {
    close();
    fd_ = fd;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read;
  Fd write;
  // Both ends close-on-exec: the child gets only what dup2 puts on 0, 1 and 2.
  bool open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    read.reset(fds[0]);
    write.reset(fds[1]);
    return true;
  }
};

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

// Reads what is there; false at end of file or on a real error.
bool drain(int fd, std::string& into) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<std::size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    return false;
  }
}

}  // namespace

std::vector<std::string> merged_environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    bool replaced = false;
    for (const auto& o : overrides) replaced = replaced || name_of(o) == name_of(entry);
    if (!replaced) env.push_back(std::move(entry));
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string ProcessResult::summary() const {
  std::string s = "`" + command + "`";
  if (!spawn_error.empty()) return s + " could not start: " + spawn_error;
  if (timed_out) s += " timed out";
  if (term_signal != 0) s += " killed by signal " + std::to_string(term_signal);
  if (exit_code >= 0) s += " exited " + std::to_string(exit_code);
  std::string e = err.substr(0, 400);
  for (char& c : e) {
    if (c == '\n') c = ' ';
  }
  if (!e.empty()) s += "; stderr: " + e;
  return s;
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw std::invalid_argument("run_process: empty argv");
  ProcessResult result;
  result.command = join(argv);

  Pipe in, out, err;
  if ((options.stdin_data && !in.open()) || !out.open() || !err.open()) {
    result.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.stdin_data) {
    posix_spawn_file_actions_adddup2(&actions, in.read.get(), STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, out.write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.write.get(), STDERR_FILENO);
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());

  // Its own process group (so a timeout kills its children too), default signal handling and
  // an empty signal mask, whatever the test runner set for itself.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> args = argv;
  std::vector<std::string> env = merged_environment(options.env);
  std::vector<char*> c_args = c_strings(args);
  std::vector<char*> c_env = c_strings(env);

  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, c_args[0], &actions, &attr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    result.spawn_error = std::strerror(rc);
    return result;
  }
  // Our copies of the child's ends: without closing them we would never see end of file.
  in.read.close();
  out.write.close();
  err.write.close();

  // Writing to a program that already exited must not kill the test with SIGPIPE: block it in
  // this thread and discard a pending one below.
  sigset_t pipe_set, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);

  const std::string& input = options.stdin_data ? *options.stdin_data : std::string();
  std::size_t written = 0;
  if (options.stdin_data) {
    fcntl(in.write.get(), F_SETFL, fcntl(in.write.get(), F_GETFL) | O_NONBLOCK);
    if (input.empty()) in.write.close();
  }
  const auto deadline = Clock::now() + options.timeout;

  while (out.read.get() >= 0 || err.read.get() >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd fds[3];
    int n = 0;
    int out_i = -1, err_i = -1, in_i = -1;
    if (out.read.get() >= 0) fds[out_i = n++] = {out.read.get(), POLLIN, 0};
    if (err.read.get() >= 0) fds[err_i = n++] = {err.read.get(), POLLIN, 0};
    if (in.write.get() >= 0) fds[in_i = n++] = {in.write.get(), POLLOUT, 0};
    const int wait_ms = static_cast<int>(std::min<long long>(left.count(), 1000));
    const int ready = poll(fds, static_cast<nfds_t>(n), wait_ms);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (out_i >= 0 && fds[out_i].revents && !drain(out.read.get(), result.out)) out.read.close();
    if (err_i >= 0 && fds[err_i].revents && !drain(err.read.get(), result.err)) err.read.close();
    if (in_i >= 0 && fds[in_i].revents) {
      const ssize_t w = ::write(in.write.get(), input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<std::size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) in.write.close();
    }
  }
  in.write.close();

  // Both pipes are closed, but the program may still run (it closed them, or handed them to
  // a child that it left behind): the deadline holds for its exit too.
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, result.timed_out ? 0 : WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0 && Clock::now() >= deadline) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
    } else if (w == 0) {
      usleep(2000);
    }
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);

  // Discard a SIGPIPE raised by our writes, then restore the mask.
  if (!sigismember(&old_mask, SIGPIPE)) {
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return result;
}

}  // namespace hpc::test
