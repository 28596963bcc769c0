// hpclaunch doctor --requeue: one small job proves, on the real cluster, the whole requeue cycle
// a real job relies on (docs/doctor.md#requeue). The job is rendered like any `hpclaunch run`
// (launch srun, the profile's job.signal, the job library's hpc_requeue_on), and its program is
// a bash counter that checkpoints, writes the requeue marker when stopped, and resumes:
//   run 0  waits for job.signal, sent by Slurm before the time limit (--signal=B:SIG@S)
//   run 1  (SLURM_RESTART_COUNT=1) resumes the counter, then sends its job TERM as preemption
//          does (`scancel --signal=TERM JOBID`: every task, not the batch shell)
//   run 2  resumes the counter and ends: COMPLETED, Restarts=2
// The program's lines ("hpclaunch doctor: ...") and the job library's go to the job's log; the
// doctor reads them and `scontrol` and says, link by link, what this site does.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/host.h"
#include "follow/jobs.h"

namespace hpc {

// The job's program: `bash -c PROGRAM hpclaunch-doctor SIGNAL` (SIGNAL: job.signal).
const std::string& requeue_probe_program();

// What one run of the job (one start: restart 0, 1, 2) showed in the log.
struct ProbeRun {
  int restart = 0;                    // from the order of the runs
  std::string restart_count_seen;     // SLURM_RESTART_COUNT as the program saw it ("unset")
  double started_at = 0;              // the program's start (epoch seconds)
  std::optional<long> counter_found;  // the checkpoint it resumed from (none: first run)
  double term_sent_at = 0;            // run 1: when it sent its job TERM
  std::string stop_signal;            // the signal the program got ("" none)
  double stopped_at = 0;
  long counter_at_stop = -1;  // the checkpoint written when stopped
  bool marker_written = false;
  bool done = false;  // the last run ended on purpose
  // The job library's lines after this run's program ended.
  bool requeue_asked = false;          // "requeueing job N"
  bool requeue_failed = false;         // "scontrol requeue N failed"
  std::string scontrol_error;          // scontrol's own error line, when it failed
  bool signal_before_program = false;  // the batch shell got the stop before srun started
};

// Everything the job's log showed, in order of the runs.
struct ProbeLog {
  std::vector<ProbeRun> runs;
};

// Reads the doctor lines and the job library's lines of a job's whole log.
ProbeLog parse_probe_log(const std::string& log);

// KEY=VALUE among the words of `text` ("" when absent): a probe line, a `scontrol show job -o`
// line.
std::string word_value(const std::string& text, const std::string& key);

// What the cluster and the job said besides the log.
struct RequeueSiteFacts {
  std::string job_requeue;             // `scontrol show config` JobRequeue ("" unknown)
  std::string preempt_mode;            // PreemptMode
  std::string cred_expire;             // AuthInfo's cred_expire (seconds; "" = the default, 120)
  std::string job_requeue_flag;        // the job's Requeue= (1: requeueable)
  std::string sbatch_no_requeue;       // SBATCH_NO_REQUEUE in the login environment ("" unset)
  std::string signal = "USR1";         // job.signal
  int signal_seconds = 0;              // job.signal_seconds
  int time_limit_minutes = 0;          // the doctor job's time limit
  std::vector<double> job_started_at;  // StartTime of each run (epoch seconds; 0 unknown)
  std::vector<std::string> pending_reason;  // why each restart waited (Reason= while PENDING)
  std::string final_state;                  // the job's last state (COMPLETED, FAILED, ...)
  int final_restarts = 0;
  std::string gave_up;  // why the doctor stopped early ("" it did not)
};

// One row of the table: a link of the cycle, per stop ("USR1" for job.signal, "TERM").
struct RequeueLink {
  std::string name;    // "stop reaches the program", "scontrol requeue", ...
  std::string stop;    // "USR1", "TERM", or "" for the job as a whole
  std::string status;  // OK, FAIL, or "-" (not reached)
  std::string found;   // what was seen
  std::string fix;     // for FAIL: what to do
};

// The links, from the parsed log and the facts. Pure.
std::vector<RequeueLink> requeue_links(const ProbeLog& log, const RequeueSiteFacts& facts);

// The table (one row per link, a column per stop) and one line per failed link.
std::string format_requeue_table(const std::vector<RequeueLink>& links);
bool all_links_ok(const std::vector<RequeueLink>& links);

// A value of `scontrol show config` ("JobRequeue = 1"), or "" when absent.
std::string scontrol_config_value(const std::string& config, const std::string& key);
// cred_expire=N of an AuthInfo value ("socket=/x,cred_expire=30"), or "".
std::string cred_expire_of(const std::string& auth_info);

// The doctor job's time limit in minutes: the warning signal comes job.signal_seconds before
// it, and at least 30 s after the start even when Slurm sends it a minute early (so that the
// program runs when it comes).
int requeue_probe_minutes(int signal_seconds);

struct RequeueDoctorOptions {
  int timeout_seconds = 900;  // the whole doctor; the job is cancelled when it is up
  bool as_json = false;
};

// Submits the rendered job through `backend` (slurm or ssh: a SlurmBackend), follows it to its
// end or the timeout, cancels it on Ctrl-C, a timeout or an error, and prints the table (stdout)
// and progress (stderr). Returns 0 when every link works, 1 when one fails, 130 on Ctrl-C.
int run_requeue_doctor(Backend& backend, Host& login, const Spec& spec, const std::string& script,
                       const BackendChoice& choice, const std::vector<std::string>& command,
                       const RequeueDoctorOptions& options, std::ostream& out, std::ostream& err);

}  // namespace hpc
