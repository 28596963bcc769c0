#include "hostile_cases.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>

namespace cli_test {

std::vector<Hostile> hostile_values(const std::string& root) {
  std::vector<Hostile> values = {
      {"command substitution", "$(touch CANARY)"},
      {"absolute command substitution", "$(touch {root}/CANARY_ABS)"},
      {"backticks", "`touch CANARY`"},
      {"single quote", "'"},
      {"double quote", "\""},
      {"backslash", "\\"},
      {"semicolon rm", "; rm -rf CANARY_DIR"},
      {"variable", "$HOME"},
      {"glob", "*"},
      {"hash", "#"},
      {"newline", "a\nb"},
      {"newline then substitution", "x\n$(touch CANARY)\n`touch CANARY`\n"},
      {"everything", "$(touch CANARY) `touch CANARY` ' \" \\ ; rm -rf CANARY_DIR $HOME * # x"},
      {"quote soup", "'\"'\"\\'\\\"'"},
      {"looks like an option", "--nodes=99"},
      {"spaces and a tab", " a\tb "},
      {"sbatch escapes", "\\\" # \\' --x"},
      {"braces and percent", "${HOME} %x %j {{x}} {{{y}}} <&>|!~"},
  };
  for (auto& h : values) {
    for (size_t at; (at = h.value.find("{root}")) != std::string::npos;)
      h.value.replace(at, 6, root);
  }
  return values;
}

void make_fifo(const Sandbox& sb, const std::string& rel) {
  fs::create_directories((sb.root() / rel).parent_path());
  REQUIRE(mkfifo((sb.root() / rel).c_str(), 0644) == 0);
}

void make_link(const Sandbox& sb, const std::string& rel, const std::string& target) {
  fs::create_directories((sb.root() / rel).parent_path());
  fs::create_symlink(target, sb.root() / rel);
}

void make_socket(const Sandbox& sb, const std::string& rel) {
  const std::string path = (sb.root() / rel).string();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof addr.sun_path);
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  close(fd);
  REQUIRE(rc == 0);
}

bool make_device(const Sandbox& sb, const std::string& rel, bool block) {
  // 1:3 is /dev/null's number; 7:200 a loop device number nothing uses here (never opened).
  dev_t dev = block ? makedev(7, 200) : makedev(1, 3);
  return mknod((sb.root() / rel).c_str(), (block ? S_IFBLK : S_IFCHR) | 0666, dev) == 0;
}

void check_all_prepared(const std::vector<PreparedCase>& cases) {
  for (const auto& pc : cases) {
    DYNAMIC_SECTION(pc.c.name) { check_bad_input(pc.c, pc.prepare); }
  }
}

Run hpclaunch_with_stdout(const Sandbox& sb, const std::vector<std::string>& args, int stdout_fd,
                          std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {hpclaunch_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = sb.env();
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  int err_pipe[2];
  REQUIRE(pipe2(err_pipe, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addchdir_np(&actions, sb.work().c_str());
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  close(err_pipe[1]);
  Run run;
  if (rc != 0) {
    close(err_pipe[0]);
    run.status = 127;
    run.err = std::string("spawn: ") + std::strerror(rc);
    return run;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{err_pipe[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = read(err_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    run.err.append(buf, static_cast<size_t>(n));
  }
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return run;
}

std::string results_file(const std::vector<std::string>& rows) {
  std::string text = "preset,strategy,nodes,gpus,job_id,state,tokens_per_s_mean,message,log\n";
  for (const auto& r : rows) text += r + "\n";
  return text;
}

}  // namespace cli_test
