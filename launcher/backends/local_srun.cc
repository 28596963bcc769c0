#include "backends/local_srun.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "atomic_file.h"
#include "backends/local_backend.h"
#include "error.h"
#include "hostlist.h"
#include "posix_io.h"

extern char** environ;

namespace fs = std::filesystem;

namespace hpc {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kSrunAccepts =
    "the local srun accepts -n/--ntasks=N, -N/--nodes=1, --ntasks-per-node=N, "
    "-c/--cpus-per-task=N, -l/--label, -K/--kill-on-bad-exit[=0|1], -W/--wait=N, then the command";

struct UsageError {
  std::string message;
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return end && *end == '\0' && n >= 0 && n < 1000000 ? static_cast<int>(n) : fallback;
}

void say(const std::string& line) {
  std::string text = line + "\n";
  write_all(2, text);
}

// ---- srun's command line ----------------------------------------------------------------------

struct SrunOptions {
  int ntasks = 0;
  int ntasks_per_node = 0;
  int cpus_per_task = 0;
  bool label = false;
  std::optional<int> kill_on_bad_exit;
  int wait_seconds = 0;
  std::vector<std::string> command;
};

int count_value(const std::string& option, const std::string& value, int min) {
  bool digits =
      !value.empty() && value.size() < 8 &&
      std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); });
  int n = digits ? std::atoi(value.c_str()) : -1;
  if (n < min) {
    throw UsageError{"invalid value for " + option + ": \"" + value +
                     "\" (a whole number >= " + std::to_string(min) + ")"};
  }
  return n;
}

void check_nodes(const std::string& option, const std::string& value) {
  // "1", "1-1" and "1-N" all fit the one node the local backend has.
  std::string min = value.substr(0, value.find('-'));
  if (count_value(option, min, 1) != 1) {
    throw UsageError{option + "=" + value + ": the local backend runs one node; use -N 1"};
  }
}

SrunOptions parse_srun(const std::vector<std::string>& argv) {
  SrunOptions o;
  size_t i = 1;
  auto next_value = [&](const std::string& option) -> std::string {
    if (i + 1 >= argv.size()) throw UsageError{"option " + option + " requires a value"};
    return argv[++i];
  };
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the command; srun stops at the first one
    if (a.rfind("--", 0) == 0) {
      auto eq = a.find('=');
      std::string name = a.substr(0, eq);
      std::optional<std::string> value;
      if (eq != std::string::npos) value = a.substr(eq + 1);
      auto required = [&]() { return value ? *value : next_value(name); };
      if (name == "--ntasks")
        o.ntasks = count_value(name, required(), 1);
      else if (name == "--nodes")
        check_nodes(name, required());
      else if (name == "--ntasks-per-node")
        o.ntasks_per_node = count_value(name, required(), 1);
      else if (name == "--cpus-per-task")
        o.cpus_per_task = count_value(name, required(), 1);
      else if (name == "--wait")
        o.wait_seconds = count_value(name, required(), 0);
      else if (name == "--kill-on-bad-exit")
        o.kill_on_bad_exit = value ? count_value(name, *value, 0) != 0 : 1;
      else if (name == "--label" && !value)
        o.label = true;
      else if (name == "--export" && required() == "ALL")
        continue;  // what this srun does anyway: each task gets srun's whole environment
      else
        throw UsageError{"unrecognized option '" + a + "'"};
      continue;
    }
    // Short options, clustered as getopt allows: "-l", "-n2", "-n 2", "-lK".
    for (size_t c = 1; c < a.size(); ++c) {
      char letter = a[c];
      std::string option = std::string("-") + letter;
      std::string rest = a.substr(c + 1);
      auto value = [&]() { return rest.empty() ? next_value(option) : rest; };
      if (letter == 'l') {
        o.label = true;
        continue;
      }
      if (letter == 'K') {
        o.kill_on_bad_exit = rest.empty() ? 1 : count_value(option, rest, 0) != 0;
        break;
      }
      if (letter == 'n')
        o.ntasks = count_value(option, value(), 1);
      else if (letter == 'N')
        check_nodes(option, value());
      else if (letter == 'c')
        o.cpus_per_task = count_value(option, value(), 1);
      else if (letter == 'W')
        o.wait_seconds = count_value(option, value(), 0);
      else
        throw UsageError{"invalid option -- '" + std::string(1, letter) + "'"};
      break;
    }
  }
  o.command.assign(argv.begin() + static_cast<long>(std::min(i, argv.size())), argv.end());
  if (o.command.empty()) throw UsageError{"no command given to execute"};
  return o;
}

// ---- running the tasks -----------------------------------------------------------------------

struct Stream {
  int fd = -1;      // our end of the task's pipe; -1 once closed
  int target = 1;   // 1: stdout, 2: stderr
  std::string buf;  // a partial line
};

struct Task {
  int rank = 0;
  pid_t pid = -1;
  bool exited = false;
  int status = 0;
  Stream out, err;
};

class StepRunner {
 public:
  explicit StepRunner(SrunOptions options) : o_(std::move(options)) {}

  int run() {
    const int allocation_tasks = env_int("SLURM_NTASKS", 0);
    ntasks_ = o_.ntasks > 0            ? o_.ntasks
              : o_.ntasks_per_node > 0 ? o_.ntasks_per_node
              : allocation_tasks > 0   ? allocation_tasks
                                       : 1;
    // A task cannot have more CPUs than the allocation gave one (the local backend clamps that
    // to what this machine has).
    const int allocation_cpus = env_int("SLURM_CPUS_PER_TASK", 0);
    cpus_ = o_.cpus_per_task > 0 ? o_.cpus_per_task : allocation_cpus > 0 ? allocation_cpus : 1;
    if (allocation_cpus > 0) cpus_ = std::min(cpus_, allocation_cpus);
    kill_on_bad_exit_ = o_.kill_on_bad_exit.value_or(env_int("SLURM_KILL_BAD_EXIT", 0) != 0);
    label_ = o_.label || env_int("SLURM_LABELIO", 0) != 0;
    step_ = env_or("SLURM_JOB_ID", "0") + ".0";
    width_ = 1;
    for (int n = ntasks_ - 1; n >= 10; n /= 10)
      ++width_;  // srun's label width: digits of the last rank

    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);

    tasks_.resize(static_cast<size_t>(ntasks_));
    for (int r = 0; r < ntasks_; ++r) {
      if (!spawn(tasks_[static_cast<size_t>(r)], r)) {
        say("srun: error: cannot start task " + std::to_string(r) + ": " + std::strerror(errno));
        terminate_tasks();
        ntasks_ = r;  // only the started ones are waited for
        tasks_.resize(static_cast<size_t>(r));
        spawn_failed_ = true;
        break;
      }
    }
    loop();
    return step_status();
  }

 private:
  bool spawn(Task& t, int rank) {
    t.rank = rank;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) return false;
    if (pipe2(err, O_CLOEXEC) != 0) {
      close(out[0]);
      close(out[1]);
      return false;
    }
    std::map<std::string, std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      auto eq = kv.find('=');
      env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
    const std::string n = std::to_string(ntasks_), r = std::to_string(rank);
    std::string gtids;
    for (int k = 0; k < ntasks_; ++k) gtids += (k ? "," : "") + std::to_string(k);
    std::map<std::string, std::string> task_env = {{"SLURM_PROCID", r},
                                                   {"SLURM_LOCALID", r},
                                                   {"SLURM_NODEID", "0"},
                                                   {"SLURM_STEP_ID", "0"},
                                                   {"SLURM_STEPID", "0"},
                                                   {"SLURM_NTASKS", n},
                                                   {"SLURM_NPROCS", n},
                                                   {"SLURM_STEP_NUM_TASKS", n},
                                                   {"SLURM_STEP_NUM_NODES", "1"},
                                                   {"SLURM_STEP_NODELIST", "localhost"},
                                                   {"SLURM_STEP_TASKS_PER_NODE", n},
                                                   {"SLURM_TASKS_PER_NODE", n},
                                                   {"SLURM_CPUS_PER_TASK", std::to_string(cpus_)},
                                                   {"SLURM_GTIDS", gtids},
                                                   {"SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1"},
                                                   {"SLURM_TOPOLOGY_ADDR", "localhost"}};
    for (auto& [k, v] : task_env) env[k] = v;
    std::vector<std::string> env_list;
    for (auto& [k, v] : env) env_list.push_back(k + "=" + v);

    pid_t pid = fork();
    if (pid < 0) {
      int e = errno;
      for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
      errno = e;
      return false;
    }
    if (pid == 0) {
      // srun is single-threaded: the child may allocate before exec.
      setpgid(0, 0);  // the task's own group: srun signals a task with everything it started
      dup2(out[1], 1);
      dup2(err[1], 2);
      if (rank != 0) {  // like srun's default --input=0: only task 0 reads our stdin
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0) dup2(null_fd, 0);
      }
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      signal(SIGPIPE, SIG_DFL);
      env_list.push_back("SLURM_TASK_PID=" + std::to_string(getpid()));
      std::vector<char*> envp, argv;
      for (auto& e : env_list) envp.push_back(e.data());
      envp.push_back(nullptr);
      for (auto& a : o_.command) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvpe(argv[0], argv.data(), envp.data());
      std::string msg =
          "slurmstepd: error: execve(): " + o_.command[0] + ": " + std::strerror(errno) + "\n";
      write_all(2, msg);
      _exit(2);
    }
    setpgid(pid, pid);  // also here, so that a signal right after fork reaches the whole group
    close(out[1]);
    close(err[1]);
    t.pid = pid;
    t.out.fd = out[0];
    t.out.target = 1;
    t.err.fd = err[0];
    t.err.target = 2;
    fcntl(t.out.fd, F_SETFL, O_NONBLOCK);
    fcntl(t.err.fd, F_SETFL, O_NONBLOCK);
    return true;
  }

  std::string prefix(int rank) const {
    if (!label_) return "";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%*d: ", width_, rank);
    return buf;
  }

  // Writes the complete lines of the buffer (all of it when `flush`), each with the label.
  void emit(Stream& s, int rank, bool flush) {
    std::string text;
    size_t start = 0;
    while (true) {
      size_t nl = s.buf.find('\n', start);
      if (nl == std::string::npos) break;
      text += prefix(rank);
      text.append(s.buf, start, nl - start + 1);
      start = nl + 1;
    }
    // A very long line without a newline goes out in pieces rather than growing without bound.
    if ((flush || s.buf.size() - start > (64u << 10)) && start < s.buf.size()) {
      text += prefix(rank);
      text.append(s.buf, start, std::string::npos);
      if (label_) text += '\n';  // like srun: a labelled partial line still ends its line
      start = s.buf.size();
    }
    s.buf.erase(0, start);
    if (!text.empty()) write_all(s.target, text);
  }

  void drain(Stream& s, int rank) {
    char buf[65536];
    while (s.fd >= 0) {
      ssize_t n = read(s.fd, buf, sizeof buf);
      if (n > 0) {
        s.buf.append(buf, static_cast<size_t>(n));
        emit(s, rank, false);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      close(s.fd);  // EOF or error: flush the partial line
      s.fd = -1;
      emit(s, rank, true);
    }
  }

  void signal_tasks(int sig) {
    for (auto& t : tasks_)
      if (!t.exited && t.pid > 0) {
        if (sig == SIGTERM) killpg(t.pid, SIGCONT);
        killpg(t.pid, sig);
      }
  }

  void terminate_tasks() {
    if (terminating_) return;
    terminating_ = true;
    signal_tasks(SIGTERM);
    kill_at_ = Clock::now() + std::chrono::seconds(kLocalSrunKillWaitSeconds);
  }

  void task_ended(Task& t, int status) {
    t.exited = true;
    t.status = status;
    bool bad = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::string who = "srun: error: localhost: task " + std::to_string(t.rank) + ": ";
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      say(who + "Exited with exit code " + std::to_string(WEXITSTATUS(status)));
    } else if (WIFSIGNALED(status)) {  // also the tasks srun itself ended, as Slurm's srun says
      say(who + strsignal(WTERMSIG(status)) + (WCOREDUMP(status) ? " (core dumped)" : ""));
    }
    if (!first_exit_seen_) {
      first_exit_seen_ = true;
      if (o_.wait_seconds > 0) wait_at_ = Clock::now() + std::chrono::seconds(o_.wait_seconds);
    }
    if (bad && kill_on_bad_exit_ && !terminating_ && live_tasks() > 0) {
      say("srun: error: Terminating StepId=" + step_ + ": task " + std::to_string(t.rank) +
          " failed (--kill-on-bad-exit)");
      terminate_tasks();
    }
  }

  // srun's own exit status, as Slurm 22.05's srun decides it (measured on the test cluster): a
  // task ended by a signal wins, 128 + the signal, even over a larger exit code of another task
  // (one task `exit 200`, the other TERM: 143) and also when srun sent it (--kill-on-bad-exit);
  // otherwise the largest exit code.
  int step_status() const {
    int signal_status = 0, exit_status = 0;
    for (const auto& t : tasks_) {
      if (!t.exited) continue;
      if (WIFSIGNALED(t.status)) signal_status = std::max(signal_status, 128 + WTERMSIG(t.status));
      if (WIFEXITED(t.status)) exit_status = std::max(exit_status, WEXITSTATUS(t.status));
    }
    if (signal_status > 0) return signal_status;
    if (spawn_failed_ && exit_status == 0) return 1;
    return exit_status;
  }

  int live_tasks() const {
    int n = 0;
    for (const auto& t : tasks_) n += t.exited ? 0 : 1;
    return n;
  }

  void reap() {
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& t : tasks_)
        if (t.pid == pid && !t.exited) task_ended(t, status);
    }
  }

  void loop() {
    std::optional<Clock::time_point> drain_until;
    while (true) {
      bool pipes_open = false;
      for (auto& t : tasks_) pipes_open = pipes_open || t.out.fd >= 0 || t.err.fd >= 0;
      if (live_tasks() == 0) {
        if (!drain_until) {
          // The step is over: what a task left behind in its group goes too (slurmstepd kills
          // the step's cgroup), then the pipes get a moment to drain.
          for (auto& t : tasks_)
            if (t.pid > 0) killpg(t.pid, SIGKILL);
          drain_until = Clock::now() + std::chrono::seconds(2);
        }
        if (!pipes_open || Clock::now() >= *drain_until) break;
      }
      auto now = Clock::now();
      if (wait_at_ && now >= *wait_at_) {
        wait_at_.reset();
        if (live_tasks() > 0) {
          say("srun: error: Terminating StepId=" + step_ + ": tasks still running " +
              std::to_string(o_.wait_seconds) + " s after the first one exited (--wait)");
          terminate_tasks();
        }
      }
      if (kill_at_ && now >= *kill_at_) {
        kill_at_.reset();
        signal_tasks(SIGKILL);
      }
      int timeout_ms = poll_timeout_ms({drain_until, wait_at_, kill_at_});
      std::vector<pollfd> fds;
      std::vector<std::pair<Task*, Stream*>> owners;
      fds.push_back({signal_fd_, POLLIN, 0});
      owners.push_back({nullptr, nullptr});
      for (auto& t : tasks_)
        for (Stream* s : {&t.out, &t.err})
          if (s->fd >= 0) {
            fds.push_back({s->fd, POLLIN, 0});
            owners.push_back({&t, s});
          }
      int ready = poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0 && errno != EINTR) break;
      for (size_t k = 1; k < fds.size(); ++k)
        if (fds[k].revents) drain(*owners[k].second, owners[k].first->rank);
      if (fds[0].revents) {
        signalfd_siginfo info;
        while (read(signal_fd_, &info, sizeof info) == sizeof info) {
          int sig = static_cast<int>(info.ssi_signo);
          if (sig == SIGCHLD) continue;
          signal_tasks(sig);  // INT, TERM, USR1, USR2: to every task
          if (sig == SIGTERM && !terminating_) {
            // The step is being ended from outside (cancel, time limit): tasks dying of it are
            // no failures to report, and those that ignore it get SIGKILL after the grace time.
            terminating_ = true;
            kill_at_ = Clock::now() + std::chrono::seconds(kLocalSrunKillWaitSeconds);
          }
        }
      }
      reap();
    }
    for (auto& t : tasks_)
      for (Stream* s : {&t.out, &t.err}) {
        if (s->fd >= 0) {
          close(s->fd);
          s->fd = -1;
        }
        emit(*s, t.rank, true);
      }
  }

  SrunOptions o_;
  int ntasks_ = 1, cpus_ = 1, width_ = 1;
  bool label_ = false, kill_on_bad_exit_ = false;
  std::string step_;
  int signal_fd_ = -1;
  std::vector<Task> tasks_;
  bool terminating_ = false, first_exit_seen_ = false, spawn_failed_ = false;
  std::optional<Clock::time_point> wait_at_, kill_at_;
};

// ---- scontrol ---------------------------------------------------------------------------------

int scontrol_usage(const std::string& what) {
  say("scontrol: error: " + what +
      " (hpclaunch's local scontrol knows `show hostnames [LIST]`, `show hostlist LIST` and "
      "`requeue JOBID`)");
  return kExitUsage;
}

int scontrol_requeue(const std::string& ids) {
  std::string runs_root = env_or("HPCLAUNCH_LOCAL_RUNS_ROOT", "");
  if (runs_root.empty()) {
    say("scontrol: error: requeue: not inside a local job (HPCLAUNCH_LOCAL_RUNS_ROOT is not set)");
    return 1;
  }
  std::stringstream list(ids);
  std::string id;
  int rc = 0;
  while (std::getline(list, id, ',')) {
    std::string run_dir = find_local_run_dir(runs_root, id);
    if (run_dir.empty()) {
      say("scontrol: error: Invalid job id specified for job " + id);
      rc = 1;
      continue;
    }
    auto state = read_local_state(run_dir);
    if (state && is_local_final_state(state->state)) {
      say("scontrol: error: Job " + id + " has finished; only a running job can be requeued");
      rc = 1;
      continue;
    }
    auto job = read_local_job(run_dir);
    if (job && !job->requeue_allowed) {
      say("scontrol: error: Requested operation is disabled for job " + id + " (--no-requeue)");
      rc = 1;
      continue;
    }
    if (state && state->restarts >= state->max_restarts) {
      say("scontrol: error: job " + id + " was requeued " + std::to_string(state->restarts) +
          " times already, the local backend's limit (like Slurm's MaxBatchRequeue)");
      rc = 1;
      continue;
    }
    try {
      // The supervisor runs the script again once the batch shell has exited.
      write_file_atomically(run_dir + "/" + kLocalRequeueFile, "requeue requested by scontrol\n");
    } catch (const UserError& e) {
      say(std::string("scontrol: error: ") + e.what());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

int run_local_srun(const std::vector<std::string>& argv) {
  SrunOptions options;
  try {
    options = parse_srun(argv);
  } catch (const UsageError& e) {
    say("srun: error: " + e.message + "; " + kSrunAccepts);
    return kExitUsage;
  }
  StepRunner runner(std::move(options));
  return runner.run();
}

int run_local_scontrol(const std::vector<std::string>& argv) {
  std::vector<std::string> args(argv.begin() + (argv.empty() ? 0 : 1), argv.end());
  if (args.empty()) return scontrol_usage("no command given");
  const std::string& command = args[0];
  if (command == "show" && args.size() >= 2 && (args[1] == "hostnames" || args[1] == "hostname")) {
    if (args.size() > 3) return scontrol_usage("show hostnames takes one host list");
    std::string list = args.size() == 3 ? args[2] : env_or("SLURM_JOB_NODELIST", "");
    if (list.empty())
      return scontrol_usage("show hostnames: no host list given and SLURM_JOB_NODELIST is not set");
    try {
      std::string out;
      for (const auto& host : HostList::expand(list)) out += host + "\n";
      write_all(1, out);
      return 0;
    } catch (const UserError& e) {
      say(std::string("scontrol: error: ") + e.what());
      return kExitUsage;
    }
  }
  if (command == "show" && args.size() == 3 && args[1] == "hostlist") {
    std::vector<std::string> hosts;
    std::stringstream in(args[2]);
    std::string host;
    while (std::getline(in, host, ',')) hosts.push_back(host);
    std::string out = HostList::compress(hosts) + "\n";
    write_all(1, out);
    return 0;
  }
  if (command == "requeue") {
    if (args.size() != 2) return scontrol_usage("requeue takes one job id");
    return scontrol_requeue(args[1]);
  }
  std::string words;
  for (const auto& a : args) words += (words.empty() ? "" : " ") + a;
  return scontrol_usage("`" + words + "` is not supported here");
}

}  // namespace hpc
