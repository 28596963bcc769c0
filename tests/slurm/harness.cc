#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "shell.h"
#include "subprocess.h"
#include "testcluster.h"

extern char** environ;

namespace fs = std::filesystem;

namespace slt {
namespace {

using Clock = std::chrono::steady_clock;
using hpc::merged_environment;
using hpc::test::c_strings;

// Everything the tests start (hpclaunch, sbatch, scontrol) talks to this build's test cluster,
// also when the tests are run by hand outside CTest.
const bool g_conf_exported = [] {
  setenv("SLURM_CONF", (hpc::test::testcluster_dir() + "/etc/slurm.conf").c_str(), 1);
  return true;
}();

const char kProbe[] = R"PROBE(#!/bin/bash
# The slurm tests' "trainer": prints what a rank sees, then ticks, sleeps and exits as told by
# PROBE_TICKS / PROBE_TICK_SECONDS / PROBE_SLEEP / PROBE_EXIT (exported to the job by sbatch).
args=""
for a in "$@"; do args+="[$a]"; done
echo "probe rank=${SLURM_PROCID:-?} local=${SLURM_LOCALID:-?} node=${SLURM_NODEID:-?} \
host=$(hostname) addr=${MASTER_ADDR:-unset} port=${MASTER_PORT:-unset} \
cuda=${CUDA_VISIBLE_DEVICES:-unset} argv=$args"
for ((i = 0; i < ${PROBE_TICKS:-0}; i++)); do
  echo "tick $i $(date +%s.%N)"
  sleep "${PROBE_TICK_SECONDS:-0.5}"
done
sleep "${PROBE_SLEEP:-0}"
exit "${PROBE_EXIT:-0}"
)PROBE";

std::atomic<int> g_workspaces{0};

std::string cluster_dir() { return hpc::test::testcluster_dir(); }

// The pid in the cluster's slurmctld pid file when that process runs (not a zombie) and is
// this cluster's slurmctld; -1 otherwise.
pid_t slurmctld_pid() {
  std::ifstream in(cluster_dir() + "/run/slurmctld.pid");
  long pid = -1;
  if (!(in >> pid) || pid <= 0) return -1;
  std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : cmdline)
    if (c == '\0') c = ' ';
  if (!contains(cmdline, slurm_conf())) return -1;
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(") ");
  if (paren == std::string::npos || stat.compare(paren + 2, 1, "Z") == 0) return -1;
  return static_cast<pid_t>(pid);
}

}  // namespace

std::string slurm_conf() { return cluster_dir() + "/etc/slurm.conf"; }

ProcessResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                  const std::vector<std::string>& env, const std::string& cwd) {
  hpc::test::ProcessOptions o;
  o.timeout = timeout;
  o.env = env;
  o.env.insert(o.env.begin(), "SLURM_CONF=" + slurm_conf());
  o.cwd = cwd;
  return hpc::test::run_process(argv, o);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

std::vector<std::string> lines_of(const std::string& text) { return hpc::test::output_lines(text); }

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

int count_nonempty_lines(const std::string& text) {
  int n = 0;
  for (const auto& l : lines_of(text))
    if (l.find_first_not_of(" \t\r") != std::string::npos) ++n;
  return n;
}

int count_lines_with(const std::string& text, const std::string& needle) {
  int n = 0;
  for (const auto& l : lines_of(text))
    if (contains(l, needle)) ++n;
  return n;
}

std::vector<ProbeLine> probe_lines(const std::string& output) {
  static const std::regex form(
      R"(^\s*(\d+): probe rank=(\S+) local=(\S+) node=(\S+) host=(\S+) addr=(\S+) )"
      R"(port=(\S+) cuda=(\S+) argv=(.*)$)");
  std::vector<ProbeLine> out;
  for (const auto& line : lines_of(output)) {
    std::smatch m;
    if (!std::regex_match(line, m, form)) continue;
    ProbeLine p;
    p.label = std::stoi(m[1]);
    auto num = [](const std::string& s) {
      bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
      return digits ? std::stoi(s) : -1;
    };
    p.rank = num(m[2]);
    p.local = num(m[3]);
    p.node = num(m[4]);
    p.host = m[5];
    p.addr = m[6];
    p.port = m[7];
    p.cuda = m[8];
    p.argv = m[9];
    out.push_back(p);
  }
  return out;
}

std::map<std::string, std::string> job_fields(const std::string& job_id) {
  std::map<std::string, std::string> fields;
  auto r = run({"scontrol", "show", "job", "--oneliner", job_id});
  if (!r.ok()) return fields;
  std::istringstream in(r.out);
  std::string token;
  while (in >> token) {
    auto eq = token.find('=');
    if (eq != std::string::npos) fields.emplace(token.substr(0, eq), token.substr(eq + 1));
  }
  return fields;
}

std::string wait_job_state(const std::string& job_id, const std::vector<std::string>& states,
                           std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string state;
  while (true) {
    state = job_fields(job_id)["JobState"];
    for (const auto& s : states)
      if (state == s) return state;
    if (Clock::now() > deadline) return state;
    std::this_thread::sleep_for(200ms);
  }
}

bool wait_file_contains(const std::string& path, const std::string& needle,
                        std::chrono::milliseconds timeout) {
  return wait_until([&] { return file_exists(path) && contains(read_file(path), needle); },
                    timeout);
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(100ms);
  }
}

void wait_for_next_second() {
  const std::time_t now = std::time(nullptr);
  while (std::time(nullptr) <= now) std::this_thread::sleep_for(20ms);
}

std::vector<std::string> hostnames(const std::string& nodelist) {
  auto r = run({"scontrol", "show", "hostnames", nodelist});
  return r.ok() ? lines_of(r.out) : std::vector<std::string>{};
}

std::string submitted_job_id(const std::string& err) {
  static const std::regex form(R"(submitted job (\d+))");
  std::smatch m;
  return std::regex_search(err, m, form) ? m[1].str() : "";
}

// ------------------------------------------------------------------------------- Workspace

Workspace::Workspace(const std::string& tag) {
  char tmpl[] = "/tmp/hpcslt-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = tmpl;
  for (const char* sub : {"work", "xdg", "path"}) fs::create_directories(dir_ + "/" + sub);
  { std::ofstream(probe()) << kProbe; }
  fs::permissions(probe(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  job_name_ = "slt-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(++g_workspaces);
}

Workspace::~Workspace() {
  // Cancel whatever this test submitted, then wait until Slurm has let go of the nodes, so
  // that the next test finds an idle cluster. Never throws.
  try {
    if (slurmctld_running()) {
      run({"scancel", "--name=" + job_name_}, 30s);
      auto deadline = Clock::now() + 30s;
      while (Clock::now() < deadline) {
        auto q = run({"squeue", "--noheader", "--name=" + job_name_, "--format=%i"}, 30s);
        if (q.ok() && q.out.find_first_not_of(" \n") == std::string::npos) break;
        std::this_thread::sleep_for(200ms);
      }
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  } catch (...) {}
}

std::vector<std::string> Workspace::job_args(const std::string& verb, const std::string& preset,
                                             const std::vector<std::string>& extra) const {
  std::vector<std::string> a = {verb,       "--no-project",
                                "--preset", preset,
                                "--set",    "trainer.program=" + probe(),
                                "--set",    "shape.cpus_per_gpu=1",
                                "--set",    "job.name=" + job_name_};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::vector<std::string> Workspace::env(const std::vector<std::string>& extra) const {
  std::vector<std::string> e = {"XDG_CONFIG_HOME=" + dir_ + "/xdg",
                                "HPCLAUNCH_PATH=" + dir_ + "/path", "SLURM_CONF=" + slurm_conf()};
  e.insert(e.end(), extra.begin(), extra.end());
  return e;
}

std::vector<std::string> Workspace::hpclaunch_argv(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {HPCLAUNCH_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

ProcessResult Workspace::hpclaunch(const std::vector<std::string>& args,
                                   const std::vector<std::string>& extra_env,
                                   std::chrono::milliseconds timeout) const {
  hpc::test::ProcessOptions o;
  o.timeout = timeout;
  o.env = env(extra_env);
  o.cwd = work();
  return hpc::test::run_process(hpclaunch_argv(args), o);
}

std::string sbatch_counting_tries(const std::string& dir, const std::string& log) {
  const char* path = std::getenv("PATH");
  const std::string real = hpc::find_in_path("sbatch", path ? path : "");
  if (real.empty()) throw std::runtime_error("no sbatch on PATH");
  fs::create_directories(dir);
  const std::string q_log = hpc::shell_quote(log);
  std::ofstream(dir + "/sbatch") << "#!/bin/bash\necho start >>" << q_log << "\n"
                                 << hpc::shell_quote(real) << " \"$@\"\nrc=$?\n"
                                 << "echo \"end $rc\" >>" << q_log << "\nexit $rc\n";
  fs::permissions(dir + "/sbatch", fs::perms::owner_all | fs::perms::group_read |
                                       fs::perms::group_exec | fs::perms::others_read |
                                       fs::perms::others_exec);
  return dir + ":" + (path ? path : "");
}

std::string wait_submitted(LiveProcess& live) {
  auto line = live.wait_for(LiveProcess::kErr, "submitted job", 30s);
  return line ? submitted_job_id(line->text) : "";
}

// ------------------------------------------------------------------------------- LiveProcess

LiveProcess::LiveProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const std::string& cwd) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    throw std::runtime_error("pipe2 failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> args = argv;
  std::vector<std::string> envs = merged_environment(env);
  auto c_args = c_strings(args);
  auto c_env = c_strings(envs);
  int rc = posix_spawnp(&pid_, c_args[0], &actions, &attr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    pid_ = -1;
    close(out[0]);
    close(err[0]);
    eof_ = true;
    return;
  }
  reader_ = std::thread([this, o = out[0], e = err[0]] { read_loop(o, e); });
}

void LiveProcess::read_loop(int out_fd, int err_fd) {
  int fds[2] = {out_fd, err_fd};
  char buf[65536];
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2];
    int n = 0, which[2];
    for (int i = 0; i < 2; ++i)
      if (fds[i] >= 0) {
        p[n] = {fds[i], POLLIN, 0};
        which[n++] = i;
      }
    if (poll(p, static_cast<nfds_t>(n), 1000) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < n; ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int i = which[k];
      ssize_t got = ::read(fds[i], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      auto now = std::chrono::system_clock::now();
      std::lock_guard<std::mutex> lock(mu_);
      if (got <= 0) {
        close(fds[i]);
        fds[i] = -1;
        if (!partial_[i].empty()) lines_[i].push_back({partial_[i], now});
        partial_[i].clear();
      } else {
        partial_[i].append(buf, static_cast<size_t>(got));
        size_t start = 0, nl;
        while ((nl = partial_[i].find('\n', start)) != std::string::npos) {
          lines_[i].push_back({partial_[i].substr(start, nl - start), now});
          start = nl + 1;
        }
        partial_[i].erase(0, start);
      }
      cv_.notify_all();
    }
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

std::optional<Line> LiveProcess::wait_for(Stream stream, const std::string& needle,
                                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  size_t checked = 0;
  auto deadline = Clock::now() + timeout;
  while (true) {
    const auto& ls = lines_[stream];
    for (; checked < ls.size(); ++checked)
      if (contains(ls[checked].text, needle)) return ls[checked];
    if (eof_ || Clock::now() >= deadline) return std::nullopt;
    cv_.wait_until(lock, deadline);
  }
}

int LiveProcess::wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  auto deadline = Clock::now() + timeout;
  while (!reaped_) {
    pid_t r = waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      break;
    }
    if (Clock::now() >= deadline) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
      reaped_ = true;
      if (reader_.joinable()) reader_.join();
      return -1;
    }
    std::this_thread::sleep_for(20ms);
  }
  // Its output may still be in the pipes: read to the end.
  if (reader_.joinable()) reader_.join();
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
}

LiveProcess::~LiveProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    reaped_ = true;
  }
  if (reader_.joinable()) reader_.join();
}

std::vector<Line> LiveProcess::lines(Stream stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_[stream];
}

std::string LiveProcess::text(Stream stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string s;
  for (const auto& l : lines_[stream]) s += l.text + "\n";
  return s + partial_[stream];
}

// ------------------------------------------------------------------------------- slurmctld

bool slurmctld_running() { return slurmctld_pid() > 0; }

namespace {

// slurmctld runs as root. An ordinary user running the tests brought the cluster up through
// passwordless sudo (scripts/testcluster.sh) and signals and starts it the same way.
std::vector<std::string> as_root(std::vector<std::string> argv) {
  if (geteuid() != 0) argv.insert(argv.begin(), {"sudo", "-n", "--"});
  return argv;
}

void signal_slurmctld(pid_t pid, int sig) {
  if (geteuid() == 0) {
    kill(pid, sig);
    return;
  }
  // Not thrown: ~ControllerFreeze() signals too. A failure shows as a controller that did not stop.
  auto r = run(as_root({"kill", "-" + std::to_string(sig), std::to_string(pid)}), 30s);
  if (!r.ok())
    std::fprintf(stderr, "could not signal slurmctld (sudo -n kill): %s\n", r.err.c_str());
}

}  // namespace

void stop_slurmctld() {
  pid_t pid = slurmctld_pid();
  if (pid <= 0) return;
  signal_slurmctld(pid, SIGTERM);
  auto deadline = Clock::now() + 20s;
  while (slurmctld_pid() == pid) {
    if (Clock::now() > deadline) {
      signal_slurmctld(pid, SIGKILL);
      deadline = Clock::now() + 10s;
    }
    std::this_thread::sleep_for(50ms);
  }
}

void start_slurmctld() {
  if (!slurmctld_running()) {
    // As scripts/testcluster.sh starts it, minus wiping the state: the jobs survive. It
    // daemonizes; its output must not hold our pipes open.
    run(as_root({"bash", "-c", "exec /usr/sbin/slurmctld -f \"$1\" </dev/null >/dev/null 2>&1",
                 "bash", slurm_conf()}),
        30s);
  }
  auto deadline = Clock::now() + 30s;
  while (Clock::now() < deadline) {
    auto r = run({"scontrol", "ping"}, 15s);
    if (contains(r.out, "is UP")) break;
    std::this_thread::sleep_for(100ms);
  }
  // The nodes register again a few seconds later; until then their state is "unknown".
  while (Clock::now() < deadline) {
    auto r = run({"sinfo", "--noheader", "--Node", "--format=%N %T"}, 15s);
    if (r.ok() && !r.out.empty() && !contains(r.out, "unk") && !contains(r.out, "*")) break;
    std::this_thread::sleep_for(200ms);
  }
}

ControllerRestarter::~ControllerRestarter() {
  try {
    if (!slurmctld_running()) start_slurmctld();
  } catch (...) {}
}

ControllerFreeze::ControllerFreeze() {
  pid_ = slurmctld_pid();
  if (pid_ > 0) signal_slurmctld(pid_, SIGSTOP);
}

void ControllerFreeze::thaw() {
  if (pid_ > 0) signal_slurmctld(pid_, SIGCONT);
  pid_ = -1;
}

JobCanceller::~JobCanceller() {
  try {
    for (const auto& id : ids)
      if (!id.empty()) run({"scancel", id}, 30s);
  } catch (...) {}
}

std::string impatient_slurm_conf(const std::string& dir) {
  const std::string path = dir + "/slurm-impatient.conf";
  std::ofstream out(path);
  out << read_file(slurm_conf())
      << "\n# Clients give up on a dead controller after ~1 s.\nMessageTimeout=2\n";
  return path;
}

}  // namespace slt
