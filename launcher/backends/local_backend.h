// The local backend: the same rendered batch script runs on this machine with no Slurm at all,
// as if Slurm had given it a one-node allocation. It is what a new user meets first
// (`hpclaunch run --preset 1n2g --local` trains a tiny model on CPU).
//
// How a job runs (everything lives in its run directory, <runs_root>/<job_name>-<id>/):
//   submit     allocates an id (<runs_root>/.local-jobs, under flock), writes script.sbatch, the
//              request's files, local-job.json (what to run) and bin/srun, bin/scontrol (symlinks
//              to the hpclaunch executable), then starts a detached supervisor:
//   supervisor `hpclaunch __local-job RUN_DIR` in its own session (it outlives the submitting
//              process and its Ctrl-C). It runs `bash script.sbatch` in a new session with the
//              SLURM_* variables of a one-node allocation, output to the job's output file(s),
//              keeps the time limit (--signal=B:USR1@N before it, TERM then KILL at it), obeys
//              cancel and `scontrol requeue`, and records the job in local-state.json.
//   srun       bin/srun (local_srun.h) spawns one process per task, each in its own process
//              group inside the job's session, so the whole job is one session id: that is what
//              cancel and the time limit signal, like Slurm signals a job's cgroup.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace hpc {

// What a batch script's #SBATCH lines ask for, as far as the local backend needs to know.
struct SbatchOptions {
  std::string job_name;          // --job-name / -J; "" when not given
  int nodes = 1;                 // --nodes / -N (the minimum of a range)
  int ntasks = 0;                // --ntasks / -n; 0 when not given
  int ntasks_per_node = 0;       // --ntasks-per-node; 0 when not given
  int cpus_per_task = 0;         // --cpus-per-task / -c; 0 when not given
  long time_limit_seconds = -1;  // --time / -t; -1: no limit
  std::string output, error;     // --output / -o, --error / -e (patterns, unexpanded)
  std::string chdir;             // --chdir / -D
  bool open_mode_append = false; // --open-mode=append
  int signal_number = 0;         // --signal=[B:]SIG[@SECONDS]; 0: none
  int signal_seconds = 0;        //   seconds before the time limit (Slurm's default: 60)
  bool signal_batch_only = false;//   B: only the batch shell gets it
  bool requeue = false;          // --requeue
  bool no_requeue = false;       // --no-requeue

  int tasks() const;  // ntasks, else ntasks_per_node x nodes, else 1
};

// The arguments of a script's #SBATCH lines, split the way sbatch splits them: a backslash
// escapes the next character, ' and " quote, unquoted whitespace separates arguments, an unquoted
// # starts a comment; parsing stops at the first line that is neither blank nor a comment.
// Each argument comes with its 1-based line number.
struct SbatchArgument {
  std::string text;
  int line = 0;
};
std::vector<SbatchArgument> sbatch_script_arguments(const std::string& script);

// Parses the options the local backend honours from a script's #SBATCH lines; others (GPUs,
// partition, account, ...) are skipped. Throws UserError "origin:LINE: ..." for a value it cannot
// read (--nodes=abc, --time=soon, --signal=FOO@5).
SbatchOptions parse_sbatch_options(const std::string& script, const std::string& origin = "script");

// Slurm's filename patterns: %j job id, %x job name, %u user, %N node, %n node index, %t task,
// %A array master id (= %j), %a array index, %s step ("batch"), %% a percent sign; a number
// after the % zero-pads numbers ("%5j"). A pattern with a backslash is taken literally (the
// backslashes removed), as sbatch does.
struct SlurmFilenameContext {
  std::string job_id, job_name, user, node = "localhost";
};
std::string expand_slurm_filename(const std::string& pattern, const SlurmFilenameContext& context);

struct LocalBackendOptions {
  // The hpclaunch executable: run as the supervisor and linked as bin/srun and bin/scontrol.
  // "" = this process's executable (/proc/self/exe); tests pass the built hpclaunch.
  std::string executable;
  int kill_wait_seconds = 5;  // SIGTERM .. SIGKILL on cancel and time limit (Slurm's KillWait)
  int max_restarts = 5;       // `scontrol requeue` at most this often (Slurm's MaxBatchRequeue)
  int cpus = 0;               // CPUs this machine may give a job; 0 = detect (affinity mask)
};

class LocalBackend : public Backend {
 public:
  // `runs_root` holds the run directories and the job id counter; used by status and cancel to
  // find a job's run directory, and by submit when the request names no runs_root.
  explicit LocalBackend(std::string runs_root, LocalBackendOptions options = {});

  std::string kind() const override { return "local"; }
  std::string host() const override { return "localhost"; }
  // Throws UserError for a script the local backend cannot run (more than one node, a bad
  // #SBATCH value, a missing working or output directory) with nothing submitted, and
  // BackendError when the job could not be started.
  SubmitResult submit(const SubmitRequest& request) override;
  JobStatus status(const std::string& job_id) override;
  LogChunk read_log(const std::string& path, uint64_t offset, size_t max_bytes) override;
  // SIGTERM to every process of the job, SIGKILL after kill_wait_seconds; a no-op for a
  // finished job. Throws BackendError for an id that is not a local job under runs_root.
  void cancel(const std::string& job_id) override;

  const std::string& runs_root() const { return runs_root_; }
  // The run directory of a local job under runs_root, "" when there is none.
  std::string run_dir_of(const std::string& job_id) const;

 private:
  std::string runs_root_;
  LocalBackendOptions options_;
  std::map<std::string, std::string> submitted_;  // job id -> run dir, of jobs submitted here
};

// ---- shared by the backend, the supervisor and the srun/scontrol shims --------------------

// The files of a run directory.
inline constexpr const char* kLocalJobFile = "local-job.json";      // written by submit
inline constexpr const char* kLocalStateFile = "local-state.json";  // written by the supervisor
inline constexpr const char* kLocalRequeueFile = "local-requeue";   // written by scontrol requeue

// The run directory of job `job_id` under `runs_root` ("" when absent).
std::string find_local_run_dir(const std::string& runs_root, const std::string& job_id);

// What local-state.json says about a job.
struct LocalJobState {
  std::string job_id;
  std::string state = "PENDING";  // PENDING RUNNING COMPLETING REQUEUED COMPLETED FAILED
                                  // CANCELLED TIMEOUT
  std::string detail;
  pid_t supervisor_pid = 0;
  pid_t pid = 0;   // the batch shell
  pid_t pgid = 0;  // its process group = session id: every process of the job
  double submit_time = 0, start_time = 0, end_time = 0;  // seconds since the epoch; 0: not yet
  int exit_code = -1;
  int exit_signal = 0;
  int restarts = 0;
  int max_restarts = 0;
};
std::optional<LocalJobState> read_local_state(const std::string& run_dir);
void write_local_state(const std::string& run_dir, const LocalJobState& state);
bool is_local_final_state(const std::string& state);

// Whether `pid` is the live supervisor of `run_dir` (not a recycled pid, not a zombie).
bool local_supervisor_alive(pid_t pid, const std::string& run_dir);

// The live (non-zombie) processes whose session id is `sid`.
std::vector<pid_t> processes_in_session(pid_t sid);

// The entry points of the hpclaunch binary other than its command line, for main():
//   argv[0] named srun or scontrol -> the local shims (local_srun.h);
//   hpclaunch __local-job RUN_DIR READY_FD -> the job supervisor.
// Returns the exit status, or nullopt when argv is an ordinary hpclaunch command line.
std::optional<int> run_local_entry_point(const std::vector<std::string>& argv);

// The supervisor of one local job (see the top of this file). Returns its exit status.
int run_local_job_supervisor(const std::string& run_dir, int ready_fd);

}  // namespace hpc
