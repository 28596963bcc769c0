#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#ifndef HPCLAUNCH_BIN
#error "HPCLAUNCH_BIN must name the built hpclaunch binary"
#endif
#ifndef HPC_TEST_SOURCE_DIR
#error "HPC_TEST_SOURCE_DIR must name the source tree"
#endif

namespace cli_test {
namespace {

std::string env_value(const std::vector<std::string>& env, const std::string& name) {
  for (const auto& e : env)
    if (e.rfind(name + "=", 0) == 0) return e.substr(name.size() + 1);
  return "";
}

// argv[0] as given when it has a slash, else the first match in the PATH of `env`.
std::string resolve(const std::string& program, const std::vector<std::string>& env) {
  if (program.find('/') != std::string::npos) return program;
  std::string path = env_value(env, "PATH");
  for (size_t start = 0;;) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + program;
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return program;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string Run::describe() const {
  std::ostringstream s;
  s << "exit status " << status;
  if (signal) s << ", signal " << signal;
  if (timed_out) s << ", timed out";
  s << "\n--- stdout ---\n" << out << "\n--- stderr ---\n" << err;
  return s.str();
}

Run spawn(const std::vector<std::string>& argv_in, const fs::path& cwd,
          const std::vector<std::string>& env_in, std::chrono::milliseconds timeout) {
  if (argv_in.empty()) throw std::invalid_argument("spawn: empty argv");
  // Everything the child needs is prepared before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> argv = argv_in, env = env_in;
  std::string program = resolve(argv.front(), env);
  std::string dir = cwd.string();
  std::vector<char*> c_argv = c_strings(argv), c_env = c_strings(env);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_pipe[1], 1) < 0 ||
        dup2(err_pipe[1], 2) < 0 || chdir(dir.c_str()) != 0) {
      _exit(126);
    }
    execve(program.c_str(), c_argv.data(), c_env.data());
    const char msg[] = "spawn: execve failed\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);

  Run run;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    int n = poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[8192];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(wstatus)) run.status = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) run.signal = WTERMSIG(wstatus);
  return run;
}

std::string hpclaunch_binary() { return HPCLAUNCH_BIN; }
fs::path source_dir() { return HPC_TEST_SOURCE_DIR; }

std::string find_program(const std::string& name) {
  for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void write_file(const fs::path& path, const std::string& content) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::vector<std::string> split_nul(const std::string& data) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < data.size()) {
    size_t nul = data.find('\0', start);
    if (nul == std::string::npos) nul = data.size();
    out.push_back(data.substr(start, nul - start));
    start = nul + 1;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

Sandbox::Sandbox() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/hpclaunch-cli-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  root_ = tmpl;
  for (const char* d : {"work", "xdg/hpclaunch", "hp1", "hp2", "home"})
    fs::create_directories(root_ / d);
}

Sandbox::~Sandbox() {
  std::error_code ec;
  if (!std::getenv("HPC_TEST_KEEP_TMP")) fs::remove_all(root_, ec);
}

void Sandbox::write(const fs::path& path, const std::string& content) const {
  write_file(path.is_absolute() ? path : root_ / path, content);
}

std::vector<std::string> Sandbox::env() const {
  return {"PATH=/usr/local/bin:/usr/bin:/bin",
          "HOME=" + (root_ / "home").string(),
          "XDG_CONFIG_HOME=" + (root_ / "xdg").string(),
          "HPCLAUNCH_PATH=" + hp1().string() + ":" + hp2().string(),
          "HPCLAUNCH_DATA_DIR=" + source_dir().string(),
          "LC_ALL=C.UTF-8"};
}

Run Sandbox::hpclaunch(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {hpclaunch_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return spawn(argv, work(), env());
}

std::map<std::string, std::string> Sandbox::snapshot() const {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root_); it != fs::recursive_directory_iterator();
       ++it) {
    std::string rel = fs::relative(it->path(), root_).string();
    if (it->is_directory()) out[rel] = "dir";
    else if (it->is_regular_file()) out[rel] = "file:" + read_file(it->path());
    else out[rel] = "other";
  }
  return out;
}

}  // namespace cli_test
