// hpclaunch doctor --requeue, the part that runs: submit the job, follow it through its
// requeues with bounded time, cancel it on Ctrl-C, the timeout or an error, print the table.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <thread>

#include "follow/requeue_doctor.h"
#include "follow/stop_signals.h"
#include "shell.h"
#include "spec/slurm_time.h"
#include "text.h"

namespace hpc {
namespace {

using Clock = std::chrono::steady_clock;

// Output of a command on the login node, "" when it fails.
std::string output_of(Host& login, const std::vector<std::string>& argv) {
  CommandOptions o;
  o.timeout = std::chrono::seconds(30);
  CommandResult r = login.run(argv, o);
  return r.ok() ? r.out : "";
}

// StartTime (the login node's local time) as epoch seconds, through the login node's `date`.
double start_epoch(Host& login, const std::string& start_time) {
  if (start_time.empty() || start_time == "Unknown" || start_time == "None") return 0;
  const std::string s = trim(output_of(login, {"date", "-d", start_time, "+%s"}));
  try {
    return s.empty() ? 0 : std::stod(s);
  } catch (const std::exception&) {
    return 0;
  }
}

struct Watch {
  Backend& backend;
  Host& login;
  std::string job_id;
  std::string log;
  uint64_t log_offset = 0;
  size_t lines_shown = 0;
  std::string last_state;
};

// Reads what the log grew by; shows the doctor's and the job library's new lines on `err`.
void read_more_log(Watch& w, const std::string& path, std::ostream& err) {
  if (path.empty()) return;
  LogChunk c = w.backend.read_log(path, w.log_offset);
  if (!c.exists) return;
  w.log += c.data;
  w.log_offset = c.next_offset;
  std::istringstream in(w.log);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a partial last line: shown once it is whole
    if (n++ < w.lines_shown) continue;
    if (line.find("hpclaunch doctor: ") != std::string::npos ||
        line.find("hpclaunch: ") != std::string::npos)
      err << "  | " << comment_text(line) << "\n";
  }
  w.lines_shown = std::max(w.lines_shown, n);
}

// Ends the job for good. A plain scancel sends the tasks TERM, which the job answers as it answers
// preemption: checkpoint, marker, `scontrol requeue`, and Slurm accepts that requeue during the
// cancel (seen on 22.05: the job came back PENDING). So the job is made non-requeueable first,
// and cancelled again should it come back all the same.
void cancel_quietly(Backend& backend, Host& login, const std::string& job_id, std::ostream& err) {
  try {
    output_of(login, {"scontrol", "update", "JobId=" + job_id, "Requeue=0"});
    backend.cancel(job_id);
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      JobStatus s = backend.status(job_id);
      if (s.terminal() || !s.found) break;
      if (s.state == "PENDING") backend.cancel(job_id);
    }
    err << "hpclaunch doctor: cancelled job " << job_id << "\n";
  } catch (const std::exception& e) {
    err << "hpclaunch doctor: could not cancel job " << job_id << " (" << e.what() << "): scancel "
        << job_id << "\n";
  }
}

nlohmann::json links_json(const std::vector<RequeueLink>& links) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& l : links)
    a.push_back({{"link", l.name},
                 {"stop", l.stop},
                 {"status", l.status},
                 {"found", l.found},
                 {"fix", l.fix}});
  return a;
}

}  // namespace

int run_requeue_doctor(Backend& backend, Host& login, const Spec& spec, const std::string& script,
                       const BackendChoice& choice, const std::vector<std::string>& command,
                       const RequeueDoctorOptions& options, std::ostream& out, std::ostream& err) {
  RequeueSiteFacts f;
  f.signal = spec.job.signal;
  f.signal_seconds = spec.job.signal_seconds;
  f.time_limit_minutes = static_cast<int>(parse_slurm_time(spec.shape.time, "shape.time") / 60);
  const std::string config = output_of(login, {"scontrol", "show", "config"});
  f.job_requeue = scontrol_config_value(config, "JobRequeue");
  f.preempt_mode = scontrol_config_value(config, "PreemptMode");
  f.cred_expire = cred_expire_of(scontrol_config_value(config, "AuthInfo"));
  f.sbatch_no_requeue = trim(output_of(login, {"printenv", "SBATCH_NO_REQUEUE"}));
  const std::string site = fmt::format(
      "JobRequeue={}, PreemptMode={}, cred_expire {}", f.job_requeue.empty() ? "?" : f.job_requeue,
      f.preempt_mode.empty() ? "?" : f.preempt_mode,
      f.cred_expire.empty() ? "120 s (default)" : f.cred_expire + " s");

  std::string job_id;
  const auto began = Clock::now();
  auto finish = [&](const ProbeLog& log) {
    const auto links = requeue_links(log, f);
    const bool ok = all_links_ok(links);
    const long took =
        std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - began).count();
    if (options.as_json) {
      out << nlohmann::json{{"job_id", job_id},
                            {"host", backend.host()},
                            {"cluster", spec.cluster},
                            {"partition", spec.profile.partition},
                            {"job_requeue", f.job_requeue},
                            {"job_requeue_flag", f.job_requeue_flag},
                            {"preempt_mode", f.preempt_mode},
                            {"cred_expire", f.cred_expire},
                            {"final_state", f.final_state},
                            {"seconds", took},
                            {"ok", ok},
                            {"links", links_json(links)}}
                 .dump()
          << "\n";
    } else {
      out << "hpclaunch doctor --requeue: "
          << (job_id.empty() ? "no job" : "job " + job_id + " via " + backend.host())
          << ", cluster " << spec.cluster
          << (spec.profile.partition.empty() ? "" : ", partition " + spec.profile.partition) << ", "
          << took << " s\n"
          << "site: " << site << "\n"
          << format_requeue_table(links);
    }
    return ok ? 0 : 1;
  };
  if (f.signal_seconds <= 0) return finish(ProbeLog{});

  RunRecord record = submit_job(backend, spec, script, choice, command);
  job_id = record.job_id;
  err << fmt::format(
      "hpclaunch doctor: submitted job {} (run directory {}): time limit {} min, {} asked {} s "
      "before it, then TERM as preemption sends it, two requeues; gives up after {} s "
      "(--timeout)\n",
      job_id, record.run_dir, f.time_limit_minutes, f.signal, f.signal_seconds,
      options.timeout_seconds);

  StopSignals stop_signals;
  Watch w{backend, login, job_id, "", 0, 0, ""};
  const auto deadline = began + std::chrono::seconds(options.timeout_seconds);
  ProbeLog log;
  try {
    f.job_requeue_flag =
        word_value(output_of(login, {"scontrol", "show", "job", "-o", job_id}), "Requeue");
    while (true) {
      JobStatus s = backend.status(job_id);
      read_more_log(w, s.stdout_path.empty() ? record.stdout_path : s.stdout_path, err);
      const std::string shown = s.state + (s.reason.empty() ? "" : " (" + s.reason + ")") +
                                ", restarts " + std::to_string(s.restarts);
      if (shown != w.last_state) {
        err << "hpclaunch doctor: job " << job_id << " " << shown << "\n";
        w.last_state = shown;
      }
      const auto restart = static_cast<size_t>(std::max(0, s.restarts));
      if (s.state == "PENDING" && restart >= 1 && !s.reason.empty() && s.reason != "None") {
        if (f.pending_reason.size() <= restart) f.pending_reason.resize(restart + 1);
        if (f.pending_reason[restart].empty()) f.pending_reason[restart] = s.reason;
      }
      if (s.state == "RUNNING" && f.job_started_at.size() <= restart) {
        const std::string line = output_of(login, {"scontrol", "show", "job", "-o", job_id});
        f.job_started_at.resize(restart + 1);
        f.job_started_at[restart] = start_epoch(login, word_value(line, "StartTime"));
      }
      log = parse_probe_log(w.log);
      if (s.terminal() || !s.found) {
        f.final_state = s.found ? s.state : "gone";
        f.final_restarts = s.restarts;
        break;
      }
      // A restart that does not know it is one would run the first stop again, and requeue
      // itself until job.max_requeues: the answer is known, the job is ended.
      bool lost_count = false;
      for (size_t i = 1; i < log.runs.size(); ++i)
        lost_count |= log.runs[i].restart_count_seen != std::to_string(i);
      if (lost_count || log.runs.size() > 3) {
        f.gave_up = "stopped: the restarted job does not see its SLURM_RESTART_COUNT";
        cancel_quietly(backend, login, job_id, err);
        break;
      }
      if (StopSignals::caught() != 0) {
        err << "hpclaunch doctor: interrupted (" << strsignal(StopSignals::caught()) << ")\n";
        cancel_quietly(backend, login, job_id, err);
        return 130;
      }
      if (Clock::now() >= deadline) {
        f.gave_up = fmt::format("gave up after {} s (--timeout), the job was {}",
                                options.timeout_seconds, shown);
        err << "hpclaunch doctor: " << f.gave_up
            << "; run it again with a larger --timeout, or where the queue is shorter\n";
        cancel_quietly(backend, login, job_id, err);
        break;
      }
      nap_unless_stopped(std::chrono::seconds(1));
    }
    // What the job wrote last (its log may be flushed after the state changed); not after the
    // doctor cancelled it, whose TERM the program answers like any stop.
    if (f.gave_up.empty()) {
      nap_unless_stopped(std::chrono::milliseconds(500));
      JobStatus s = backend.status(job_id);
      read_more_log(w, s.stdout_path.empty() ? record.stdout_path : s.stdout_path, err);
      log = parse_probe_log(w.log);
    }
  } catch (...) {
    cancel_quietly(backend, login, job_id, err);
    throw;
  }
  return finish(log);
}

}  // namespace hpc
