// hpclaunch shell on the real cluster, driven through a pseudo-terminal as a user types into it:
// the rendezvous variables in the shell, srun from the shell on every node, exit ending the
// allocation with the shell's status; over SSH through the test login node; and the refusals
// (no terminal, an allocation the cluster can never grant).
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <regex>

#include "harness.h"
#include "testcluster.h"

using namespace slt;

namespace {

using Clock = std::chrono::steady_clock;

// A program on the far side of a pseudo-terminal (forkpty): what it prints is collected as it
// comes, and lines are typed into it. Killed with its session if still running when destroyed.
class PtyProcess {
 public:
  PtyProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
             const std::string& cwd) {
    struct winsize size = {};
    size.ws_row = 50;
    size.ws_col = 200;
    pid_ = forkpty(&master_, nullptr, nullptr, &size);
    if (pid_ == 0) {
      if (chdir(cwd.c_str()) != 0) _exit(126);
      for (const auto& e : env) putenv(strdup(e.c_str()));
      setenv("TERM", "dumb", 1);  // no colours or bracketed paste in what the test reads
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(-pid_, SIGHUP);
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }
  PtyProcess(const PtyProcess&) = delete;
  PtyProcess& operator=(const PtyProcess&) = delete;

  bool spawned() const { return pid_ > 0; }
  void type(const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = write(master_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }
  // The first match of `pattern` in what came after the previous match; nullopt after timeout.
  std::optional<std::smatch> wait_for(const std::string& pattern,
                                      std::chrono::milliseconds timeout) {
    std::regex re(pattern);
    auto deadline = Clock::now() + timeout;
    while (true) {
      searched_ = output_.substr(consumed_);
      std::smatch m;
      if (std::regex_search(searched_, m, re)) {
        consumed_ += static_cast<size_t>(m.position(0) + m.length(0));
        return m;
      }
      if (Clock::now() >= deadline || !read_some(deadline)) return std::nullopt;
    }
  }
  // The exit status once the program ended (reading what it still prints), or -1 on timeout.
  int wait(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (!reaped_ && Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      read_some(std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
    }
    return reaped_ ? status_ : -1;
  }
  const std::string& output() const { return output_; }

 private:
  // Reads what is there, waiting until `deadline`; false once the terminal is closed.
  bool read_some(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    struct pollfd p = {master_, POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(std::max<long>(0, std::min<long>(left.count(), 200))));
    if (ready <= 0) return ready == 0 || errno == EINTR;
    char buf[4096];
    ssize_t n = read(master_, buf, sizeof buf);
    if (n <= 0) return false;  // EIO: every process on the terminal has gone
    for (ssize_t i = 0; i < n; ++i)
      if (buf[i] != '\r') output_ += buf[i];
    return true;
  }

  pid_t pid_ = -1;
  int master_ = -1;
  bool reaped_ = false;
  int status_ = -1;
  std::string output_, searched_;
  size_t consumed_ = 0;
};

// MASTER_PORT as the batch script computes it with the default profile's range 20000-32767.
std::string master_port_of(const std::string& job) {
  return std::to_string(20000 + std::stol(job) % 12768);
}

bool job_in_queue(const std::string& job) {
  auto q = run({"squeue", "--noheader", "--jobs=" + job, "--format=%i"});
  return q.out.find(job) != std::string::npos;
}

// The job id salloc announces ("salloc: Granted job allocation N").
std::string granted_job(PtyProcess& shell) {
  auto granted = shell.wait_for("Granted job allocation ([0-9]+)", 60s);
  return granted ? (*granted)[1].str() : "";
}

}  // namespace

TEST_CASE("shell 2n2g: rendezvous variables on node01, srun on both nodes, exit ends the job",
          "[slurm][shell]") {
  Workspace ws("shell");
  const std::string pwned = ws.dir() + "/pwned";
  const std::string hostile = "$(touch " + pwned + ")`touch " + pwned + "`";
  PtyProcess shell(ws.hpclaunch_argv(ws.job_args(
                       "shell", "2n2g", {"--set", "profile.env.HPC_SHELL_PROBE.value=" + hostile})),
                   ws.env(), ws.work());
  REQUIRE(shell.spawned());
  const std::string job = granted_job(shell);
  INFO("terminal so far:\n" << shell.output());
  REQUIRE(!job.empty());
  REQUIRE(shell.wait_for("hpclaunch: job " + job + ": shell on node01, WORLD_SIZE=4", 60s));

  // Typed lines echo back; the arithmetic tells the echo from the answer.
  shell.type("echo \"@@$((6*7)) $MASTER_ADDR $MASTER_PORT $WORLD_SIZE $(hostname)\"\n");
  auto vars = shell.wait_for("@@42 (\\S+) (\\S+) (\\S+) (\\S+)\n", 30s);
  INFO("terminal:\n" << shell.output());
  REQUIRE(vars);
  // The first host, resolved as the generic profile asks (resolve_master_addr).
  auto resolved = run({"getent", "ahostsv4", "node01"});
  CHECK((*vars)[1] == resolved.out.substr(0, resolved.out.find_first_of(" \t")));
  CHECK((*vars)[2] == master_port_of(job));
  CHECK((*vars)[3] == "4");
  CHECK((*vars)[4] == "node01");

  // A plain srun in the shell: one task per GPU on each node, as the batch script's srun.
  shell.type("echo \"@@srun $(srun hostname | sort | tr '\\n' ' ')@@$((5+5))\"\n");
  auto hosts = shell.wait_for("@@srun ([a-z0-9 ]*)@@10\n", 60s);
  REQUIRE(hosts);
  CHECK((*hosts)[1] == "node01 node01 node02 node02 ");

  // A hostile value from --set reached the shell as text and ran nowhere.
  shell.type("printf '@@%s@@%s\\n' \"$((2+2))\" \"$HPC_SHELL_PROBE\"\n");
  auto probe = shell.wait_for("@@4@@([^\n]*)\n", 30s);
  REQUIRE(probe);
  CHECK((*probe)[1] == hostile);
  CHECK_FALSE(file_exists(pwned));
  CHECK(job_in_queue(job));

  shell.type("exit\n");
  CHECK(shell.wait(60s) == 0);
  CHECK(wait_job_state(job, {"COMPLETED", "FAILED", "CANCELLED"}) == "COMPLETED");
  CHECK(wait_until([&] { return !job_in_queue(job); }, 30s));
  CHECK_FALSE(file_exists(pwned));
}

TEST_CASE("shell: the shell's exit status is hpclaunch's, and the job records it",
          "[slurm][shell]") {
  Workspace ws("shell-status");
  PtyProcess shell(ws.hpclaunch_argv(ws.job_args("shell", "1n1g")), ws.env(), ws.work());
  REQUIRE(shell.spawned());
  const std::string job = granted_job(shell);
  INFO("terminal:\n" << shell.output());
  REQUIRE(!job.empty());
  REQUIRE(shell.wait_for("shell on node0[12], WORLD_SIZE=1", 60s));
  shell.type("exit 7\n");
  CHECK(shell.wait(60s) == 7);
  CHECK(wait_job_state(job, {"COMPLETED", "FAILED", "CANCELLED"}) == "FAILED");
  CHECK(job_fields(job)["ExitCode"] == "7:0");
  CHECK(wait_until([&] { return !job_in_queue(job); }, 30s));
}

TEST_CASE("shell --host: the same shell through the login node's ssh", "[slurm][shell][ssh]") {
  Workspace ws("shell-ssh");
  const std::string config = hpc::test::testcluster_dir() + "/ssh/config";
  // The script crosses the login node's shell as one quoted argument of ssh's command line.
  const std::string pwned = ws.dir() + "/pwned";
  const std::string hostile = "'$(touch " + pwned + ")'\"`touch " + pwned + "`;";
  PtyProcess shell(
      ws.hpclaunch_argv(ws.job_args("shell", "1n2g",
                                    {"--host", "testlogin", "--ssh-config", config, "--set",
                                     "profile.env.HPC_SHELL_PROBE.value=" + hostile})),
      ws.env(), ws.work());
  REQUIRE(shell.spawned());
  const std::string job = granted_job(shell);
  INFO("terminal:\n" << shell.output());
  REQUIRE(!job.empty());
  REQUIRE(shell.wait_for("shell on node0[12], WORLD_SIZE=2", 60s));
  shell.type(
      "echo \"@@$((6*7)) $MASTER_ADDR $MASTER_PORT $WORLD_SIZE $(srun hostname | wc -l)\"\n");
  auto vars = shell.wait_for("@@42 (\\S+) (\\S+) (\\S+) (\\S+)\n", 60s);
  REQUIRE(vars);
  CHECK((*vars)[1] == "127.0.0.1");  // one node: the loopback, as in the batch script
  CHECK((*vars)[2] == master_port_of(job));
  CHECK((*vars)[3] == "2");
  CHECK((*vars)[4] == "2");
  shell.type("printf '@@%s@@%s\\n' \"$((2+2))\" \"$HPC_SHELL_PROBE\"\n");
  auto probe = shell.wait_for("@@4@@([^\n]*)\n", 30s);
  REQUIRE(probe);
  CHECK((*probe)[1] == hostile);
  CHECK_FALSE(file_exists(pwned));
  shell.type("exit 3\n");
  CHECK(shell.wait(60s) == 3);
  CHECK(wait_until([&] { return !job_in_queue(job); }, 30s));
}

TEST_CASE("shell: an allocation the cluster can never grant, or no terminal: one line, exit 2",
          "[slurm][shell]") {
  Workspace ws("shell-refused");
  // Four nodes on a two-node cluster: sbatch --test-only says so before salloc is run.
  auto big = ws.hpclaunch(ws.job_args("shell", "4n4g"));
  INFO(big.summary() << "\nstderr:\n" << big.err);
  CHECK(big.exit_code == 2);
  CHECK(count_nonempty_lines(big.err) == 1);
  CHECK(contains(big.err, "cannot grant this allocation"));
  CHECK(contains(big.err, "pick a smaller preset"));
  // A shape that fits, but standard input is no terminal (the harness gives /dev/null).
  auto no_tty = ws.hpclaunch(ws.job_args("shell", "1n1g"));
  INFO(no_tty.summary() << "\nstderr:\n" << no_tty.err);
  CHECK(no_tty.exit_code == 2);
  CHECK(count_nonempty_lines(no_tty.err) == 1);
  CHECK(contains(no_tty.err, "not a terminal"));
  auto q = run({"squeue", "--noheader", "--name=" + ws.job_name(), "--format=%i"});
  CHECK(q.out.find_first_not_of(" \n") == std::string::npos);
}

TEST_CASE("shell: Ctrl-D ends the shell with its last status, and the allocation with it",
          "[slurm][shell]") {
  Workspace ws("shell-eof");
  PtyProcess shell(ws.hpclaunch_argv(ws.job_args("shell", "1n1g")), ws.env(), ws.work());
  REQUIRE(shell.spawned());
  const std::string job = granted_job(shell);
  INFO("terminal:\n" << shell.output());
  REQUIRE(!job.empty());
  REQUIRE(shell.wait_for("WORLD_SIZE=1; exit or Ctrl-D", 60s));
  // Ctrl-D reaches readline as end of input only while it waits at the prompt: wait for it.
  shell.type("PS1='@@re''ady> '\n");  // the echo of this line does not match the prompt
  REQUIRE(shell.wait_for("@@ready> ", 30s));
  shell.type("(exit 5)\n");
  REQUIRE(shell.wait_for("@@ready> ", 30s));
  shell.type("\x04");
  CHECK(shell.wait(60s) == 5);
  CHECK(wait_job_state(job, {"COMPLETED", "FAILED", "CANCELLED"}) == "FAILED");
  CHECK(job_fields(job)["ExitCode"] == "5:0");
  CHECK(wait_until([&] { return !job_in_queue(job); }, 30s));
}

TEST_CASE("shell: Ctrl-C while the allocation is pending withdraws it", "[slurm][shell]") {
  Workspace ws("shell-pending");
  // Every GPU of both nodes is taken, so the shell's allocation has to wait.
  auto blocker = run({"sbatch", "--parsable", "--job-name=" + ws.job_name(), "--nodes=2",
                      "--gres=gpu:4", "--output=/dev/null", "--wrap", "sleep 300"});
  INFO(blocker.summary() << "\n" << blocker.err);
  REQUIRE(blocker.ok());
  const std::string blocker_job = lines_of(blocker.out).at(0);
  REQUIRE(wait_job_state(blocker_job, {"RUNNING"}) == "RUNNING");
  PtyProcess shell(ws.hpclaunch_argv(ws.job_args("shell", "1n2g")), ws.env(), ws.work());
  REQUIRE(shell.spawned());
  auto pending = shell.wait_for("Pending job allocation ([0-9]+)", 60s);
  INFO("terminal:\n" << shell.output());
  REQUIRE(pending);
  const std::string job = (*pending)[1].str();
  REQUIRE(shell.wait_for("queued and waiting for resources", 30s));
  shell.type("\x03");  // Ctrl-C: the terminal sends SIGINT to salloc
  int status = shell.wait(20s);
  if (status == -1) {
    // Seen once in a loaded full-suite run (never alone): salloc 22.05 still waiting 60 s after
    // one SIGINT. A user presses Ctrl-C again; so does the test, and says so.
    WARN("salloc did not end within 20 s of one Ctrl-C; a second one sent");
    shell.type("\x03");
    status = shell.wait(60s);
  }
  CHECK(status == 1);  // salloc: "Job aborted due to signal" (docs/programs.md)
  CHECK(wait_job_state(job, {"COMPLETED", "FAILED", "CANCELLED"}) == "CANCELLED");
  CHECK(wait_until([&] { return !job_in_queue(job); }, 30s));
  CHECK(job_in_queue(blocker_job));  // only the shell's allocation was withdrawn
}
