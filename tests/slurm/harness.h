// Helpers for the slurm backend's integration tests: a temp workspace per test with a probe
// "trainer", the real hpclaunch binary run in it (to the end, or live with its output read line
// by line as it comes), and small wrappers around scontrol/squeue/slurmctld of the test cluster.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "process.h"

namespace slt {

using namespace std::chrono_literals;
using hpc::test::ProcessResult;

// The test cluster's slurm.conf (also exported as SLURM_CONF to everything the tests run).
std::string slurm_conf();
// Runs a Slurm client command (or anything) with the cluster's SLURM_CONF.
ProcessResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = 60s,
                  const std::vector<std::string>& env = {}, const std::string& cwd = "");

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);
std::vector<std::string> lines_of(const std::string& text);
bool contains(const std::string& text, const std::string& needle);
// Lines of `text` that are not empty.
int count_nonempty_lines(const std::string& text);
// Lines of `text` that contain `needle`.
int count_lines_with(const std::string& text, const std::string& needle);

// A line the probe printed (srun --label puts "R: " in front):
//   R: probe rank=0 local=0 node=0 host=node01 addr=127.0.0.1 port=20001 cuda=0,1 argv=[train]...
struct ProbeLine {
  int label = -1, rank = -1, local = -1, node = -1;
  std::string host, addr, port, cuda, argv;
};
std::vector<ProbeLine> probe_lines(const std::string& output);

// `scontrol show job -o ID` as Key -> Value ({} if the controller does not know the job).
std::map<std::string, std::string> job_fields(const std::string& job_id);
// Waits until the job's JobState is one of `states`; returns the last state seen.
std::string wait_job_state(const std::string& job_id, const std::vector<std::string>& states,
                           std::chrono::milliseconds timeout = 30s);
// Waits until the file at `path` exists and contains `needle`; whether it did within `timeout`.
bool wait_file_contains(const std::string& path, const std::string& needle,
                        std::chrono::milliseconds timeout = 30s);
// Polls `condition` every 100 ms until it holds; whether it did within `timeout`. For waiting
// on what a test needs to have happened instead of sleeping for a time it usually takes.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);
// Returns once the wall clock's second has moved on (Slurm's credentials count in seconds).
void wait_for_next_second();
// `scontrol show hostnames EXPR`.
std::vector<std::string> hostnames(const std::string& nodelist);
// The job id in hpclaunch's "submitted job N" line; "" if there is none.
std::string submitted_job_id(const std::string& hpclaunch_stderr);

// One test's private directory tree, removed at the end, and its jobs, cancelled at the end:
//   DIR/work     hpclaunch's working directory (runs/ lands here)
//   DIR/xdg      XDG_CONFIG_HOME     DIR/path  HPCLAUNCH_PATH (both empty)
//   DIR/probe.sh the trainer: prints its rank variables, ticks, sleeps, exits (PROBE_* below)
// Every job of the test carries the workspace's unique job name, so that the destructor can
// scancel all of them (also those whose id the test never saw) and wait until they are gone.
class Workspace {
 public:
  explicit Workspace(const std::string& tag);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  const std::string& dir() const { return dir_; }
  std::string work() const { return dir_ + "/work"; }
  std::string probe() const { return dir_ + "/probe.sh"; }
  const std::string& job_name() const { return job_name_; }

  // VERB --no-project --preset PRESET --set trainer.program=PROBE --set shape.cpus_per_gpu=1
  // --set job.name=NAME, then `extra` (more --set, or -- and the trainer's arguments).
  std::vector<std::string> job_args(const std::string& verb, const std::string& preset,
                                    const std::vector<std::string>& extra = {}) const;
  // Environment for hpclaunch: XDG_CONFIG_HOME, HPCLAUNCH_PATH, SLURM_CONF, then `extra`
  // (sbatch exports it to the job, so PROBE_SLEEP=5 reaches the probe).
  std::vector<std::string> env(const std::vector<std::string>& extra = {}) const;
  // {the built hpclaunch, ARGS...}: for a LiveProcess, with env() and work().
  std::vector<std::string> hpclaunch_argv(const std::vector<std::string>& args) const;
  // Runs hpclaunch ARGS in work() to the end.
  ProcessResult hpclaunch(const std::vector<std::string>& args,
                          const std::vector<std::string>& extra_env = {},
                          std::chrono::milliseconds timeout = 120s) const;

 private:
  std::string dir_, job_name_;
};

// Writes DIR/sbatch, which runs the real sbatch and appends "start" to LOG before and "end RC"
// after each call; returns a PATH with DIR first, for hpclaunch's environment.
std::string sbatch_counting_tries(const std::string& dir, const std::string& log);

// Probe settings (environment of hpclaunch, exported to the job by sbatch):
//   PROBE_TICKS=N        print "tick I EPOCH" N times (EPOCH: date +%s.%N), PROBE_TICK_SECONDS
//   apart PROBE_SLEEP=S        sleep S seconds before exiting PROBE_EXIT=C         exit with C

struct Line {
  std::string text;
  std::chrono::system_clock::time_point at;  // when the test read it
};

// A program running in the background whose stdout and stderr are read as they come (pipes,
// so hpclaunch sees no terminal), each line stamped with the time it was read. Killed with its
// process group if still running when destroyed.
class LiveProcess {
 public:
  LiveProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              const std::string& cwd);
  ~LiveProcess();
  LiveProcess(const LiveProcess&) = delete;
  LiveProcess& operator=(const LiveProcess&) = delete;

  enum Stream { kOut = 0, kErr = 1 };
  // The first line on `stream` containing `needle` (waiting up to `timeout` for it).
  std::optional<Line> wait_for(Stream stream, const std::string& needle,
                               std::chrono::milliseconds timeout);
  // Waits for the program to exit and both pipes to close; its exit status, or -1 when it is
  // still running after `timeout` (then it is killed) or died of a signal.
  int wait(std::chrono::milliseconds timeout);
  std::vector<Line> lines(Stream stream) const;
  std::string text(Stream stream) const;
  pid_t pid() const { return pid_; }
  bool spawned() const { return pid_ > 0; }

 private:
  void read_loop(int out_fd, int err_fd);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Line> lines_[2];
  std::string partial_[2];
  bool eof_ = false;
  std::thread reader_;
};

// The job id in hpclaunch's "submitted job N" line on stderr, waiting up to 30 s for it; "" when
// none came.
std::string wait_submitted(LiveProcess& live);

// The test cluster's slurmctld, stopped and started again by its pid file, as
// scripts/testcluster.sh starts it (`/usr/sbin/slurmctld -f CONF`, state kept, so jobs survive).
bool slurmctld_running();
void stop_slurmctld();
// Starts it if it is not running and waits until `scontrol ping` says UP and every node
// answers again (no "unk"/"*" state).
void start_slurmctld();

// Starts slurmctld again on scope exit if a test stopped it (also when the test fails).
struct ControllerRestarter {
  ~ControllerRestarter();
};

// Freezes slurmctld (SIGSTOP) until destroyed or thaw(): clients then connect (the kernel's
// listen backlog accepts them) but get no reply, as with a controller stuck on a slow disk. The
// requests wait in the socket and are carried out when it thaws.
class ControllerFreeze {
 public:
  ControllerFreeze();
  ~ControllerFreeze() { thaw(); }
  void thaw();
  bool frozen() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

// scancel of the job ids given, on scope exit (for jobs not named after the workspace).
struct JobCanceller {
  std::vector<std::string> ids;
  ~JobCanceller();
};

// A copy of the cluster's slurm.conf in `dir` with MessageTimeout=2: Slurm's clients give up on
// an unreachable controller after ~1 s instead of 9 s (18 s for scontrol). For hpclaunch in the
// fault tests only; the daemons keep the cluster's own file.
std::string impatient_slurm_conf(const std::string& dir);

}  // namespace slt
