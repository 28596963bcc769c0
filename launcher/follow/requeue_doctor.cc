// hpclaunch doctor --requeue, the pure part: the job's program, reading its log, the links and
// the table. requeue_doctor_run.cc submits and follows the job.
#include "follow/requeue_doctor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "text.h"

namespace hpc {

const std::string& requeue_probe_program() {
  // One task. `date +%s.%N`, not EPOCHREALTIME: compute nodes may have bash 4 (RHEL 8).
  // The loop sleeps in the background and waits for it, so that a signal's trap runs at once;
  // the trap runs between commands, so the checkpoint on disk is always the count it says.
  static const std::string program = R"PROGRAM(# hpclaunch doctor --requeue (docs/doctor.md#requeue)
sig=$1
say() { echo "hpclaunch doctor: $*"; }
ck="${HPCLAUNCH_REQUEUE_MARKER%/*}/doctor-counter"
restart=${SLURM_RESTART_COUNT:-0}
count=0 found=none stop="" stop_at=""
if [[ -f "$ck" ]]; then read -r count <"$ck"; found=$count; fi
say "run restart=${SLURM_RESTART_COUNT:-unset} at=$(date +%s.%N) counter=$found"
if ((restart >= 2)); then say "done counter=$count"; exit 0; fi
trap 'stop=$sig stop_at=$(date +%s.%N)' "$sig"
trap 'stop=TERM stop_at=$(date +%s.%N)' TERM
n=0
while [[ -z "$stop" ]]; do
  count=$((count + 1))
  printf '%s\n' "$count" >"$ck.tmp" && mv -f -- "$ck.tmp" "$ck"
  n=$((n + 1))
  if ((restart == 1 && n == 10)); then
    say "term sent at=$(date +%s.%N)"
    scancel --signal=TERM "$SLURM_JOB_ID" || say "scancel failed"
  fi
  sleep 0.2 & wait $!
done
say "stop signal=$stop at=$stop_at counter=$count"
printf 'restart=%s\n' "$restart" >"$HPCLAUNCH_REQUEUE_MARKER.tmp" &&
  mv -f -- "$HPCLAUNCH_REQUEUE_MARKER.tmp" "$HPCLAUNCH_REQUEUE_MARKER" &&
  say "marker restart=$restart"
exit 75
)PROGRAM";
  return program;
}

std::string word_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string word;
  while (in >> word)
    if (word.rfind(key + "=", 0) == 0) return word.substr(key.size() + 1);
  return "";
}

namespace {

double number_or_zero(const std::string& s) {
  if (s.empty()) return 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  return end && *end == '\0' ? v : 0;
}

std::optional<long> count_of(const std::string& s) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), ::isdigit) || s.size() > 15)
    return std::nullopt;
  return std::stol(s);
}

std::string seconds(double s) { return fmt::format(s < 10 ? "{:.2f} s" : "{:.1f} s", s); }

}  // namespace

ProbeLog parse_probe_log(const std::string& log) {
  ProbeLog p;
  std::istringstream in(log);
  std::string line, previous;
  bool stop_line_pending = false;
  while (std::getline(in, line)) {
    const size_t at = line.find("hpclaunch doctor: ");
    if (at != std::string::npos) {
      const std::string rest = line.substr(at + 18);
      if (rest.rfind("run ", 0) == 0) {
        ProbeRun r;
        r.restart = static_cast<int>(p.runs.size());
        r.restart_count_seen = word_value(rest, "restart");
        r.started_at = number_or_zero(word_value(rest, "at"));
        r.counter_found = count_of(word_value(rest, "counter"));
        r.signal_before_program = stop_line_pending;
        stop_line_pending = false;
        p.runs.push_back(r);
      } else if (!p.runs.empty()) {
        ProbeRun& r = p.runs.back();
        if (rest.rfind("term sent ", 0) == 0) {
          r.term_sent_at = number_or_zero(word_value(rest, "at"));
        } else if (rest.rfind("stop ", 0) == 0) {
          r.stop_signal = word_value(rest, "signal");
          r.stopped_at = number_or_zero(word_value(rest, "at"));
          r.counter_at_stop = count_of(word_value(rest, "counter")).value_or(-1);
        } else if (rest.rfind("marker ", 0) == 0) {
          r.marker_written = true;
        } else if (rest.rfind("done ", 0) == 0) {
          r.done = true;
        }
      }
    } else if (line.find("hpclaunch: ") != std::string::npos) {
      // The job library's lines (templates/job-library.sh, hpc_requeue_if_asked).
      // The first stop reached the batch shell before the program's first line: srun had not
      // started it (later stops: the TERM that the script's own requeue brings).
      if (p.runs.empty() && line.find(": asking the tasks to checkpoint") != std::string::npos)
        stop_line_pending = true;
      if (!p.runs.empty()) {
        ProbeRun& r = p.runs.back();
        if (line.find("hpclaunch: requeueing job ") != std::string::npos) r.requeue_asked = true;
        if (line.find(" failed (a --no-requeue job") != std::string::npos &&
            line.find("scontrol requeue ") != std::string::npos) {
          r.requeue_failed = true;
          if (previous.find("hpclaunch") == std::string::npos) r.scontrol_error = previous;
        }
      }
    }
    previous = line;
  }
  return p;
}

std::string scontrol_config_value(const std::string& config, const std::string& key) {
  std::istringstream in(config);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    if (trim(line.substr(0, eq)) == key) return trim(line.substr(eq + 1));
  }
  return "";
}

std::string cred_expire_of(const std::string& auth_info) {
  std::istringstream in(auth_info);
  std::string part;
  while (std::getline(in, part, ','))
    if (trim(part).rfind("cred_expire=", 0) == 0) return trim(part).substr(12);
  return "";
}

// Slurm may send the signal up to 60 s early (sbatch(1), --signal): 90 s beyond it leave the
// program at least 30 s to start (on the test cluster a margin of 30 s brought it 0.04 s after
// the start; with 90 s it came 83-87 s after the start, 93-97 s before the limit).
int requeue_probe_minutes(int signal_seconds) { return (signal_seconds + 90 + 59) / 60; }

namespace {

// How to go on where the site cannot requeue: a chain of jobs, each resuming.
const char* const kChainFix =
    "until then, chain jobs that resume: hpclaunch submit --after JOB:afterany -- --resume auto "
    "(docs/jobs.md)";

std::string requeue_refused_fix(const RequeueSiteFacts& f) {
  std::string why;
  if (f.job_requeue_flag == "0") {
    why = "the job has Requeue=0";
    if (!f.sbatch_no_requeue.empty()) {
      return why + ": SBATCH_NO_REQUEUE=" + f.sbatch_no_requeue +
             " in the login environment wins over the script's #SBATCH --requeue" +
             (f.job_requeue == "0" ? " (and JobRequeue=0 makes no-requeue this site's default)"
                                   : "") +
             " -> unset SBATCH_NO_REQUEUE where hpclaunch submits (your shell profile on the "
             "login node)";
    }
    if (f.job_requeue == "0") {
      return why +
             ": JobRequeue=0 on this cluster and the script's #SBATCH --requeue did not "
             "hold (a job_submit plugin?) -> ask the admins to let jobs ask for --requeue; " +
             std::string(kChainFix);
    }
    return why +
           " though the script asks for --requeue (a job_submit plugin?) -> ask the "
           "admins; " +
           std::string(kChainFix);
  }
  return "scontrol refused it (JobRequeue=" + (f.job_requeue.empty() ? "?" : f.job_requeue) +
         ", the job's Requeue=" + (f.job_requeue_flag.empty() ? "?" : f.job_requeue_flag) +
         ") -> ask the admins why; " + kChainFix;
}

std::string pending_note(const RequeueSiteFacts& f, size_t restart) {
  std::string reason = restart < f.pending_reason.size() ? f.pending_reason[restart] : "";
  if (reason.empty()) return "";
  // BeginTime: Slurm holds a requeued job for the credential's lifetime.
  std::string note = " (Reason=" + reason;
  if (reason == "BeginTime")
    note += ": cred_expire, " + (f.cred_expire.empty() ? "120" : f.cred_expire) + " s";
  return note + ")";
}

}  // namespace

std::vector<RequeueLink> requeue_links(const ProbeLog& log, const RequeueSiteFacts& f) {
  std::vector<RequeueLink> links;
  auto add = [&](std::string name, std::string stop, std::string status, std::string found,
                 std::string fix = "") {
    links.push_back(
        {std::move(name), std::move(stop), std::move(status), std::move(found), std::move(fix)});
  };
  const std::string not_reached = f.gave_up.empty() ? "not reached" : "not reached: " + f.gave_up;

  if (f.signal_seconds <= 0) {
    add("stop asked", "", "FAIL", "job.signal_seconds = 0: no --signal, no --requeue, no marker",
        "set job.signal_seconds (90 is the default) in the profile or hpclaunch.json");
    return links;
  }
  const int limit = f.time_limit_minutes * 60;
  add("stop asked", "", "OK",
      fmt::format("#SBATCH --signal=B:{}@{} --requeue, time limit {} min", f.signal,
                  f.signal_seconds, f.time_limit_minutes));

  // The two stops: run 0 by job.signal, run 1 by TERM.
  for (size_t i = 0; i < 2; ++i) {
    const std::string stop = i == 0 ? f.signal : "TERM";
    const ProbeRun* run = i < log.runs.size() ? &log.runs[i] : nullptr;
    const ProbeRun* next = i + 1 < log.runs.size() ? &log.runs[i + 1] : nullptr;
    auto skip = [&](const std::string& name) {
      const bool failed = std::any_of(links.begin(), links.end(),
                                      [](const RequeueLink& l) { return l.status == "FAIL"; });
      add(name, stop, "-", failed ? "not reached (an earlier link failed)" : not_reached);
    };
    // 1. The stop reaches the program.
    const char* reach = "stop reaches the program";
    if (!run) {
      skip(reach);
    } else if (run->stop_signal.empty()) {
      if (run->signal_before_program) {
        add(reach, stop, "FAIL",
            stop + " reached the batch shell before srun had started the program",
            "the program takes more than 30 s to start here: run the doctor again; real jobs get "
            "the signal job.signal_seconds before a longer limit");
      } else if (!f.final_state.empty() && f.gave_up.empty()) {
        add(reach, stop, "FAIL", "no " + stop + " reached the program (job " + f.final_state + ")",
            i == 0 ? "this site does not deliver --signal=B:" + f.signal +
                         " before the time limit: ask the admins; meanwhile checkpoint "
                         "periodically (hpctrain --checkpoint-every) and chain jobs that resume"
                   : "scancel --signal=TERM did not reach the task: ask the admins how "
                     "preemption signals jobs here");
      } else {
        skip(reach);
      }
    } else if (run->stop_signal != stop) {
      add(reach, stop, "FAIL", "the program got " + run->stop_signal + ", not " + stop,
          "see the job's log");
    } else if (i == 0) {
      const double start = f.job_started_at.size() > 0 && f.job_started_at[0] > 0
                               ? f.job_started_at[0]
                               : run->started_at;
      const double after = run->stopped_at - start;
      add(reach, stop, "OK",
          fmt::format("{} after the start, {:.0f} s before the limit (asked {} s)", seconds(after),
                      limit - after, f.signal_seconds));
    } else {
      add(reach, stop, "OK",
          seconds(run->stopped_at - run->term_sent_at) +
              " after scancel --signal=TERM (as preemption sends it)");
    }
    // 2. Checkpoint and marker.
    const char* saved = "checkpoint + marker";
    if (!run || run->stop_signal.empty()) {
      skip(saved);
    } else if (!run->marker_written || run->counter_at_stop < 0) {
      add(saved, stop, "FAIL", "the program did not write its marker",
          "see the job's log (the run directory must be writable from the node)");
    } else {
      add(saved, stop, "OK",
          fmt::format("counter {} saved, marker restart={}", run->counter_at_stop, i));
    }
    // 3. scontrol requeue.
    const char* requeue = "scontrol requeue";
    if (!run || !run->marker_written) {
      skip(requeue);
    } else if (run->requeue_failed) {
      add(requeue, stop, "FAIL",
          "refused" + (run->scontrol_error.empty() ? "" : ": " + trim(run->scontrol_error)),
          requeue_refused_fix(f));
    } else if (run->requeue_asked) {
      add(requeue, stop, "OK",
          "accepted (JobRequeue=" + (f.job_requeue.empty() ? "?" : f.job_requeue) +
              ", the job's Requeue=" + (f.job_requeue_flag.empty() ? "?" : f.job_requeue_flag) +
              ")");
    } else {
      add(requeue, stop, "FAIL", "the batch script did not requeue after the marker",
          "see the job's log: the job library's requeue line is missing");
    }
    // 4. SLURM_RESTART_COUNT, 5. the wait, 6. the counter.
    if (!run || !run->requeue_asked || run->requeue_failed || !next) {
      for (const char* name : {"SLURM_RESTART_COUNT", "requeue -> restart", "counter resumed"})
        skip(name);
      continue;
    }
    const std::string want = std::to_string(i + 1);
    if (next->restart_count_seen == want) {
      add("SLURM_RESTART_COUNT", stop, "OK", want + " in the restarted job");
    } else {
      add("SLURM_RESTART_COUNT", stop, "FAIL",
          next->restart_count_seen + " in the restarted job, not " + want,
          "a program cannot tell a restart from a new start here: pass --resume auto "
          "(hpctrain) or resume whenever a checkpoint exists");
    }
    add("requeue -> restart", stop, "OK",
        seconds(next->started_at - run->stopped_at) + pending_note(f, i + 1));
    if (next->counter_found && *next->counter_found == run->counter_at_stop) {
      add("counter resumed", stop, "OK",
          fmt::format("{} -> {}, nothing lost", run->counter_at_stop, *next->counter_found));
    } else {
      add("counter resumed", stop, "FAIL",
          next->counter_found
              ? fmt::format("{} saved, {} read: {} lost", run->counter_at_stop,
                            *next->counter_found, run->counter_at_stop - *next->counter_found)
              : "no checkpoint found by the restarted job",
          "the restart does not see the run directory as it was: keep checkpoints on a file "
          "system every node shares");
    }
  }
  // The job as a whole.
  if (f.final_state == "COMPLETED" && f.final_restarts == 2 && log.runs.size() == 3 &&
      log.runs[2].done) {
    add("job ends", "", "OK", "COMPLETED, Restarts=2");
  } else if (all_links_ok(links)) {
    add("job ends", "", f.final_state.empty() ? "-" : "FAIL",
        f.final_state.empty() ? not_reached
                              : f.final_state + ", Restarts=" + std::to_string(f.final_restarts),
        f.final_state.empty() ? "" : "see the job's log");
  }
  return links;
}

bool all_links_ok(const std::vector<RequeueLink>& links) {
  return std::all_of(links.begin(), links.end(),
                     [](const RequeueLink& l) { return l.status == "OK"; });
}

std::string format_requeue_table(const std::vector<RequeueLink>& links) {
  size_t name_w = 4, stop_w = 4;
  for (const auto& l : links) {
    name_w = std::max(name_w, l.name.size());
    stop_w = std::max(stop_w, l.stop.size());
  }
  std::string out =
      fmt::format("{:<{}}  {:<{}}  {:<6}  {}\n", "LINK", name_w, "STOP", stop_w, "RESULT", "FOUND");
  for (const auto& l : links)
    out += fmt::format("{:<{}}  {:<{}}  {:<6}  {}\n", l.name, name_w, l.stop.empty() ? "-" : l.stop,
                       stop_w, l.status, l.found);
  for (const auto& l : links) {
    if (l.status != "FAIL") continue;
    out += "FAIL " + l.name + (l.stop.empty() ? "" : " (" + l.stop + ")") + ": " + l.found + "; " +
           l.fix + "\n";
  }
  return out;
}

}  // namespace hpc
