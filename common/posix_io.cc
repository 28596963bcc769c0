#include "posix_io.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

#include "error.h"
#include "input_file.h"
#include "text.h"

namespace hpc {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void close_fds_from(int first) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, 0) == 0) return;
#endif
  for (int fd = first; fd < 4096; ++fd) close(fd);
}

int signal_from_name(std::string name) {
  if (all_digits(name)) {
    int n = std::atoi(name.c_str());
    return n >= 1 && n < 65 ? n : 0;
  }
  std::transform(name.begin(), name.end(), name.begin(), ::toupper);
  if (starts_with(name, "SIG")) name = name.substr(3);
  static const std::map<std::string, int> names = {
      {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT}, {"ILL", SIGILL},
      {"TRAP", SIGTRAP}, {"ABRT", SIGABRT},     {"BUS", SIGBUS},   {"FPE", SIGFPE},
      {"KILL", SIGKILL}, {"USR1", SIGUSR1},     {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
      {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},     {"TERM", SIGTERM}, {"CONT", SIGCONT},
      {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},     {"URG", SIGURG},   {"XCPU", SIGXCPU},
      {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}};
  auto it = names.find(name);
  return it == names.end() ? 0 : it->second;
}

int poll_timeout_ms(
    std::initializer_list<std::optional<std::chrono::steady_clock::time_point>> deadlines) {
  using Clock = std::chrono::steady_clock;
  auto next = Clock::time_point::max();
  for (const auto& t : deadlines)
    if (t) next = std::min(next, *t);
  if (next == Clock::time_point::max()) return -1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms + 1, 0, 60000));
}

std::string read_small_file(const std::string& path) {
  // The one reader: a FIFO or device in a run directory is never read from, nor more than 1 MiB.
  try {
    return read_input_file(path, "file", std::size_t{1} << 20);
  } catch (const UserError&) {
    return "";
  }
}

}  // namespace hpc
