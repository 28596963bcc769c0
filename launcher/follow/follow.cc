#include "follow/follow.h"

#include <signal.h>

#include <algorithm>
#include <map>
#include <ostream>

#include <fmt/core.h>
#include <re2/re2.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "follow/hang.h"
#include "follow/rollcall.h"
#include "follow/run_record.h"
#include "follow/stop_signals.h"
#include "hostlist.h"
#include "shell.h"

namespace hpc {
namespace {

// A log file read incrementally; complete lines are handed out, a partial one is kept.
struct LogTail {
  std::string path;
  uint64_t offset = 0;
  std::string partial;
};

struct Progress {
  long step = -1;
  double tokens_per_s = 0;
};

class Follower {
 public:
  Follower(Backend& backend, std::string job_id, const FollowOptions& options, std::ostream& out,
           std::ostream& err)
      : backend_(backend), id_(std::move(job_id)), o_(options), out_(out), err_(err) {}

  int run();

 private:
  void poll_state();
  bool drain_logs();
  void emit_lines(LogTail& tail, const std::string& data, std::ostream& to, bool final);
  void read_metrics();
  void say(const std::string& line);
  void draw_status();
  void clear_status();
  std::string status_text() const;
  std::string restart_text() const;
  bool may_be_requeued();
  int finish();
  // Hang detection (job.hang_seconds).
  void watch_for_hang(std::chrono::steady_clock::time_point now);
  bool hung(std::chrono::steady_clock::time_point now) const;
  int end_hung_job();
  std::vector<std::string> collect_where_lines();
  std::string python_rollcall(const std::vector<std::string>& answers,
                              const std::vector<std::string>& hosts) const;

  Backend& backend_;
  std::string id_;
  FollowOptions o_;
  std::ostream& out_;
  std::ostream& err_;

  JobStatus status_;
  bool have_status_ = false;
  std::string last_state_, last_reason_;
  int last_restarts_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::string unreachable_;
  std::chrono::steady_clock::time_point unreachable_since_;
  int failed_polls_ = 0;
  LostWatch lost_watch_;           // "Invalid job id" answers, until they held for o_.lost_grace
  bool seen_found_ = false;        // the scheduler knew the job at least once in this follow
  std::string unreachable_error_;  // the last "cannot reach the scheduler", for logs without -f
  bool output_closed_ = false;
  LogTail stdout_, stderr_;
  uint64_t metrics_offset_ = 0;
  std::string metrics_partial_;
  Progress progress_;
  bool status_drawn_ = false;
  std::optional<TaskFailure> first_failure_;  // of the current run (reset on a requeue)
  RequeueWatch requeue_watch_;
  HangWatch hang_;
  bool hang_running_ = false;  // the watch's clock runs (the job is RUNNING)
  int hang_restarts_ = 0;
  std::chrono::steady_clock::time_point next_progress_read_;
  std::vector<std::string>* captured_ = nullptr;  // log lines seen while the ranks answer
};

std::string Follower::restart_text() const {
  std::string s = "restart " + std::to_string(status_.restarts);
  if (o_.max_requeues >= 0) s += " of at most " + std::to_string(o_.max_requeues);
  return s;
}

// PREEMPTED and NODE_FAIL: watched for o_.requeue_settle (RequeueWatch), said once.
bool Follower::may_be_requeued() {
  bool started = false;
  const bool watching = requeue_watch_.may_be_requeued(status_.state, o_.requeue_settle, &started);
  if (started) say("job " + id_ + " " + status_.state + "; watching whether Slurm requeues it");
  return watching;
}

std::string Follower::status_text() const {
  std::string s = "job " + id_ + " " + status_.state;
  if (!status_.reason.empty() && status_.state == "PENDING") s += " (" + status_.reason + ")";
  if (status_.elapsed_seconds >= 0 && status_.state != "PENDING")
    s += " " + format_duration(status_.elapsed_seconds);
  if (!status_.nodes.empty()) s += " on " + status_.nodes;
  if (status_.restarts > 0) s += " " + restart_text();
  if (progress_.step >= 0) {
    s += " | step " + std::to_string(progress_.step);
    if (o_.max_steps > 0) s += "/" + std::to_string(o_.max_steps);
    if (progress_.tokens_per_s > 0)
      s += fmt::format(" | {:.1f}k tok/s", progress_.tokens_per_s / 1000);
  }
  if (!unreachable_.empty()) s += " | " + unreachable_;
  return s;
}

void Follower::clear_status() {
  if (status_drawn_) {
    err_ << "\r\033[K" << std::flush;
    status_drawn_ = false;
  }
}

void Follower::draw_status() {
  if (!o_.live_status) return;
  err_ << "\r\033[K" << status_text() << std::flush;
  status_drawn_ = true;
}

void Follower::say(const std::string& line) {
  if (!o_.follow) return;  // `hpclaunch logs` without -f prints the log and nothing else
  clear_status();
  if (o_.live_status)
    err_ << "hpclaunch: " << line << "\n";
  else
    err_ << "[" << utc_now_iso8601() << "] hpclaunch: " << line << "\n";
  err_.flush();
}

void Follower::poll_state() {
  try {
    JobStatus s = backend_.status(id_);
    if (!unreachable_.empty()) {
      say("reached the scheduler again; following job " + id_);
      unreachable_.clear();
    }
    bool started = false;
    const bool was_lost = lost_watch_.watching();
    if (o_.follow && (o_.just_submitted || seen_found_) &&
        lost_watch_.may_be_transient(s.found, o_.lost_grace, &started)) {
      if (started) {
        say("job " + id_ + " is not known to the scheduler right now" +
            (s.detail.empty() ? "" : " (" + printable_first_line(s.detail) + ")") +
            "; asking again for up to " + std::to_string(o_.lost_grace.count() / 1000) +
            " s (a controller that restarts answers so for a moment)");
      }
      return;  // the last answer stands
    }
    if (was_lost && s.found) say("job " + id_ + " is known again; following it");
    seen_found_ = seen_found_ || s.found;
    status_ = s;
    have_status_ = true;
  } catch (const BackendError& e) {
    // Without -f (and without a log to show instead) the answer is now or never: a scheduler
    // that refuses, or stays unreachable for o_.unreachable_tries polls, ends the command.
    if (!o_.follow && o_.known_stdout_path.empty() &&
        (!dynamic_cast<const BackendUnreachable*>(&e) || ++failed_polls_ >= o_.unreachable_tries))
      throw;
    if (dynamic_cast<const BackendUnreachable*>(&e)) unreachable_error_ = e.what();
    // A controller restart or network blip: keep following, say so once a minute.
    auto now = std::chrono::steady_clock::now();
    if (unreachable_.empty() || now - unreachable_since_ > std::chrono::seconds(60)) {
      say(std::string(e.what()) + "; retrying");
      unreachable_since_ = now;
    }
    unreachable_ = "scheduler unreachable, retrying";
    return;
  }
  if (!status_.found) return;
  bool pending = status_.state == "PENDING";
  if (status_.state != last_state_ || status_.restarts != last_restarts_ ||
      (pending && status_.reason != last_reason_)) {
    // A requeue seen between two polls (Restarts= went up) or as it happens (REQUEUED): say
    // REQUEUED in words, whichever state Slurm shows now, and follow on under the same id.
    const bool first = last_state_.empty();
    const bool requeued =
        !first && (status_.restarts > last_restarts_ || status_.state == "REQUEUED");
    std::string line = "job " + id_ + " ";
    if (requeued) {
      line += "REQUEUED (" + restart_text() + ")";
      if (status_.state != "REQUEUED") line += ", now " + status_.state;
      first_failure_.reset();  // a new run: its own failures
    } else {
      line += status_.state;
    }
    if (!status_.reason.empty() && !status_.terminal()) line += " (" + status_.reason + ")";
    if (!status_.nodes.empty() && status_.state != "PENDING") line += " on " + status_.nodes;
    if (first && status_.restarts > 0) line += ", " + restart_text();
    if (requeued) line += "; following the same job " + id_ + " (its log continues below)";
    if (!status_.detail.empty() && status_.terminal()) line += " " + status_.detail;
    if (!(o_.live_status && last_state_.empty() && status_.state == "RUNNING")) say(line);
    last_state_ = status_.state;
    last_reason_ = status_.reason;
    last_restarts_ = status_.restarts;
  }
  if (stdout_.path.empty() && !status_.stdout_path.empty()) stdout_.path = status_.stdout_path;
  if (stderr_.path.empty() && !status_.stderr_path.empty() &&
      status_.stderr_path != status_.stdout_path)
    stderr_.path = status_.stderr_path;
}

namespace {

// srun --label's rank at the start of a log line ("  3: ..."), or -1. Scanned by hand: a line may
// be megabytes long, and std::regex's recursion overflowed the stack on 200 KB (issue 35).
int srun_label_rank(const std::string& line) {
  size_t at = line.find_first_not_of(" \t\v\f\r");
  if (at == std::string::npos) return -1;
  const size_t digits = at;
  while (at < line.size() && at - digits < 10 && line[at] >= '0' && line[at] <= '9') ++at;
  if (at == digits || at - digits > 9 || line.compare(at, 2, ": ") != 0) return -1;
  return std::stoi(line.substr(digits, at - digits));
}

}  // namespace

void Follower::emit_lines(LogTail& tail, const std::string& data, std::ostream& to, bool final) {
  tail.partial += data;
  size_t start = 0;
  bool wrote = false;
  while (true) {
    size_t nl = tail.partial.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = tail.partial.substr(start, nl - start);
    start = nl + 1;
    if (!first_failure_) first_failure_ = parse_srun_task_failure(line);
    if (o_.on_log_line) o_.on_log_line(line);  // every line, whatever --rank shows
    if (o_.hang_seconds > 0) {
      const int rank = srun_label_rank(line);
      hang_.saw_log_line(rank, line, std::chrono::steady_clock::now());
      if (captured_) {  // the answers to the where-signal: shown once, with the summary
        captured_->push_back(line);
        continue;
      }
    }
    if (o_.rank && srun_label_rank(line) != *o_.rank) continue;
    if (!wrote) clear_status();
    to << line << '\n';
    wrote = true;
  }
  tail.partial.erase(0, start);
  if (final && !tail.partial.empty()) {
    clear_status();
    to << tail.partial << '\n';
    tail.partial.clear();
    wrote = true;
  }
  if (wrote) {
    to.flush();
    if (!to) output_closed_ = true;  // a reader that went away, a full disk: run() stops
  }
}

bool Follower::drain_logs() {
  if (!o_.stream_logs) return false;
  bool got = false;
  for (auto* tail : {&stdout_, &stderr_}) {
    if (tail->path.empty()) continue;
    std::ostream& to = tail == &stdout_ ? out_ : err_;
    for (int i = 0; i < 64; ++i) {  // at most 64 MiB per pass, then let states refresh
      LogChunk chunk;
      try {
        chunk = backend_.read_log(tail->path, tail->offset);
      } catch (const BackendError&) {
        break;  // the next pass retries
      }
      if (chunk.next_offset < tail->offset) tail->partial.clear();  // truncated: start over
      tail->offset = chunk.next_offset;
      if (chunk.data.empty()) break;
      emit_lines(*tail, chunk.data, to, false);
      got = true;
    }
  }
  return got;
}

void Follower::read_metrics() {
  if (o_.metrics_path.empty()) return;
  LogChunk chunk;
  try {
    chunk = backend_.read_log(o_.metrics_path, metrics_offset_, 1 << 20);
  } catch (const BackendError&) {
    return;
  }
  if (!chunk.exists || chunk.data.empty()) return;
  metrics_offset_ = chunk.next_offset;
  metrics_partial_ += chunk.data;
  size_t last_nl = metrics_partial_.rfind('\n');
  if (last_nl == std::string::npos) return;
  size_t prev = metrics_partial_.rfind('\n', last_nl - 1);
  std::string line = metrics_partial_.substr(prev == std::string::npos ? 0 : prev + 1,
                                             last_nl - (prev == std::string::npos ? 0 : prev + 1));
  metrics_partial_.erase(0, last_nl + 1);
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  if (j.contains("step") && j["step"].is_number()) progress_.step = j["step"].get<long>();
  if (j.contains("tokens_per_s") && j["tokens_per_s"].is_number())
    progress_.tokens_per_s = j["tokens_per_s"].get<double>();
}

int Follower::finish() {
  // The last lines may land just after the state changes (NFS, slurmstepd flushing).
  for (int i = 0; i < 4; ++i) {
    drain_logs();
    nap_unless_stopped(std::chrono::milliseconds(100));
  }
  emit_lines(stdout_, "", out_, true);
  emit_lines(stderr_, "", err_, true);
  clear_status();
  int code = exit_status_for(status_);
  std::string line = "job " + id_ + " " + status_.state;
  if (status_.state == "FAILED" || status_.state == "COMPLETED")
    line += " with exit code " + std::to_string(std::max(status_.exit_code, 0));
  if (status_.exit_signal > 0) line += " (signal " + std::to_string(status_.exit_signal) + ")";
  if (status_.elapsed_seconds >= 0) line += " after " + format_duration(status_.elapsed_seconds);
  if (!status_.detail.empty()) line += " " + status_.detail;
  if (code != 0 && status_.state == "FAILED" && status_.exit_code == 75)
    line +=
        "; the trainer stopped for a requeue (exit 75) that did not happen: see the log's last "
        "lines";
  else if (code != 0 && first_failure_)
    line += "; " + describe_task_failure(*first_failure_);
  if (!stdout_.path.empty() && code != 0 && stdout_.offset > 0) line += "; log: " + stdout_.path;
  say(line);
  return code;
}

// --- hang detection --------------------------------------------------------------------------
// While the job runs: reads every rank's progress file (hpctrain's rank-N; a program's own
// heartbeat-N) now and then (a quarter of
// job.hang_seconds, between 2 and 30 s: each read is a file read on the backend's host, over
// SSH for the ssh backend), and the log as it streams.
void Follower::watch_for_hang(std::chrono::steady_clock::time_point now) {
  if (o_.hang_seconds <= 0 || !have_status_) return;
  if (status_.state != "RUNNING" || status_.restarts != hang_restarts_) {
    hang_running_ = false;  // pending again (requeued), completing: the clock stops
    hang_restarts_ = status_.restarts;
    return;
  }
  if (!hang_running_) {
    hang_running_ = true;
    hang_.reset(now);
  }
  if (now < next_progress_read_ || o_.progress_dir.empty()) return;
  const auto period =
      std::clamp<std::chrono::milliseconds>(std::chrono::milliseconds(o_.hang_seconds * 250),
                                            std::chrono::seconds(2), std::chrono::seconds(30));
  next_progress_read_ = now + period;
  for (int r = 0; r < std::max(o_.world_size, 1); ++r) {
    try {
      const std::string base = o_.progress_dir + "/" + (o_.heartbeats ? "heartbeat-" : "rank-");
      LogChunk c = backend_.read_log(base + std::to_string(r), 0, 4096);
      if (o_.heartbeats)
        hang_.saw_heartbeat(r, c.exists ? c.data : "", now);
      else
        hang_.saw_progress(r, c.exists ? c.data : "", now);
    } catch (const BackendError&) {
      return;  // unreachable now: the next read tries again (no change counts as no change)
    }
  }
}

bool Follower::hung(std::chrono::steady_clock::time_point now) const {
  if (o_.hang_seconds <= 0 || !hang_running_) return false;
  return hang_.ran_out(now, o_.hang_seconds, o_.start_seconds) != HangWatch::Bound::none;
}

// The ranks' answers to the where-signal: hpctrain's rank-N.where files, or, from a program that
// writes none, the lines the log gained meanwhile. Waits up to o_.where_wait.
std::vector<std::string> Follower::collect_where_lines() {
  std::vector<std::string> from_log;
  captured_ = &from_log;
  std::map<int, std::string> answers;
  const auto deadline = std::chrono::steady_clock::now() + o_.where_wait;
  const int world = std::max(o_.world_size, 1);
  while (std::chrono::steady_clock::now() < deadline && int(answers.size()) < world &&
         StopSignals::caught() == 0) {
    nap_unless_stopped(std::chrono::milliseconds(500));
    drain_logs();
    for (int r = 0; r < world && !o_.progress_dir.empty(); ++r) {
      if (answers.count(r)) continue;
      try {
        LogChunk c =
            backend_.read_log(o_.progress_dir + "/rank-" + std::to_string(r) + ".where", 0, 4096);
        if (c.exists && !c.data.empty() && c.data.back() == '\n')
          answers[r] = c.data.substr(0, c.data.size() - 1);
      } catch (const BackendError&) {}
    }
  }
  drain_logs();
  captured_ = nullptr;
  std::vector<std::string> lines;
  for (const auto& [rank, line] : answers) lines.push_back(line);
  if (answers.empty()) return from_log;
  for (int r = 0; r < world; ++r)
    if (!answers.count(r)) lines.push_back("rank " + std::to_string(r) + ": no answer");
  return lines;
}

// A Python program's answers are faulthandler's stacks, per srun label or, under torchrun, per
// rank from torchrun's prefix: one line of where the ranks are (follow/rollcall.h); "" when the
// answers hold no stack. `hosts`: the job's nodes, in srun's order (empty when unknown).
std::string Follower::python_rollcall(const std::vector<std::string>& answers,
                                      const std::vector<std::string>& hosts) const {
  std::map<int, int> node_of;  // torchrun's ranks: the label (node) their lines came under
  const auto stacks = parse_python_stacks(answers, &node_of);
  if (stacks.empty()) return "";
  const bool by_node = o_.labels_are_nodes && node_of.empty();
  const int world = std::max(o_.world_size, 1);
  const int per_node = hosts.empty() ? 1 : std::max(1, world / int(hosts.size()));
  auto host_of = [&](int label) {
    const auto named = node_of.find(label);
    const int node = named != node_of.end() ? named->second
                     : o_.labels_are_nodes  ? label
                                            : label / per_node;
    return node >= 0 && size_t(node) < hosts.size() ? hosts[size_t(node)] : std::string();
  };
  return rollcall_summary(stacks, world, host_of, by_node);
}

int Follower::end_hung_job() {
  clear_status();
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> hosts;
  try {
    hosts = HostList::expand(status_.nodes);
  } catch (const std::exception&) {}
  // launch torchrun: the log's labels are nodes
  const int nodes = o_.labels_are_nodes ? int(hosts.size()) : 0;
  const std::vector<std::string> summary =
      hang_.summary(o_.world_size, o_.hang_seconds, now, nodes, o_.start_seconds);
  // Which bound ran out, for the last line: the start's or the progress's.
  const std::string bound = !hang_.started() && o_.start_seconds > 0
                                ? "job.start_seconds = " + std::to_string(o_.start_seconds)
                                : "job.hang_seconds = " + std::to_string(o_.hang_seconds);
  for (const auto& line : summary) say(line);
  say(std::string("asking every rank where it is (SIG") + kWhereSignalName +
      " to the tasks of job " + id_ + "), waiting up to " +
      std::to_string(o_.where_wait.count() / 1000) + " s");
  std::vector<std::string> answers;
  try {
    backend_.signal_tasks(id_, std::to_string(kWhereSignalNumber));
    answers = collect_where_lines();
  } catch (const BackendError& e) {
    say(std::string("cannot ask the ranks: ") + e.what());
  }
  if (answers.empty()) {
    say("no rank answered (a program answers " + std::string(kWhereSignalName) +
        " only if it handles it: docs/troubleshooting.md#a-job-that-hangs)");
  }
  for (const auto& line : answers) say("  " + line);
  const std::string rollcall = python_rollcall(answers, hosts);
  if (!rollcall.empty()) say(rollcall);
  const std::string stamp = utc_now_iso8601();
  std::string report = "hpclaunch: job " + id_ + " hung; " + stamp + "\n";
  for (const auto& line : summary) report += line + "\n";
  if (!rollcall.empty()) report += rollcall + "\n";
  report += std::string("\nanswers to SIG") + kWhereSignalName + ":\n";
  for (const auto& line : answers) report += line + "\n";
  if (answers.empty()) report += "(none)\n";
  std::string saved;
  if (!o_.hang_report_dir.empty()) {
    saved = o_.hang_report_dir + "/" + hang_file_name(stamp);
    try {
      write_file_atomically(saved, report);
    } catch (const std::exception& e) {
      say(std::string("cannot save the hang report: ") + e.what());
      saved.clear();
    }
  }
  say("ending job " + id_ + " (" + bound + ")" + (saved.empty() ? "" : "; hang report: " + saved));
  try {
    backend_.cancel(id_);
  } catch (const BackendError& e) {
    say(std::string("cannot cancel: ") + e.what() + "; cancel it yourself: hpclaunch cancel " +
        id_);
  }
  return follow_exit::kHang;
}

int Follower::run() {
  StopSignals stop_signals;
  auto next_state = std::chrono::steady_clock::now();
  bool cancel_sent = false;
  while (true) {
    if (const int sig = StopSignals::caught(); sig != 0) {
      if (sig != SIGINT) {
        // Killed (`timeout`, kill) or the terminal closed: hpclaunch ends, the job does not.
        clear_status();
        err_ << "hpclaunch: stopped by " << (sig == SIGHUP ? "SIGHUP" : "SIGTERM") << "; job "
             << id_ << " goes on. Reattach: hpclaunch logs -f " << id_
             << "   cancel: hpclaunch cancel " << id_ << "\n";
        err_.flush();
        return 128 + sig;
      }
      if (o_.cancel_on_interrupt && !cancel_sent) {
        StopSignals::clear();
        cancel_sent = true;
        say("cancelling job " + id_ + " (--cancel-on-interrupt)");
        try {
          backend_.cancel(id_);
        } catch (const BackendError& e) {
          say(std::string("cannot cancel: ") + e.what());
          return 1;
        }
        next_state = std::chrono::steady_clock::now();
      } else {
        say("detached; job " + id_ + " goes on. Reattach: hpclaunch logs -f " + id_ +
            "   cancel: hpclaunch cancel " + id_);
        return follow_exit::kDetached;
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= next_state) {
      poll_state();
      read_metrics();
      watch_for_hang(now);
      if (o_.follow && hung(now)) return end_hung_job();
      // Poll briskly while a fresh job starts, then settle (scontrol costs CPU on both ends).
      bool starting = now - started_ < std::chrono::seconds(10);
      next_state = now + (starting ? std::min(o_.state_interval, std::chrono::milliseconds(500))
                                   : o_.state_interval);
      if (have_status_ && !status_.found && !o_.known_stdout_path.empty() && stdout_.path.empty()) {
        stdout_.path = o_.known_stdout_path;  // print what the log holds, then report
        drain_logs();
        emit_lines(stdout_, "", out_, true);
      }
      if (have_status_ && !status_.found) {
        // Without -f, a log we still have is the answer; otherwise say why there is none.
        if (!o_.follow && !o_.known_stdout_path.empty()) return 0;
        std::string line =
            "job " + id_ + " is not known to the scheduler (" +
            (status_.detail.empty() ? "it may have ended long ago" : status_.detail) +
            "); no accounting (sacct) to ask";
        if (o_.follow)
          say(line);
        else
          err_ << "hpclaunch: " << line << "\n";
        return follow_exit::kLost;
      }
    }
    if (o_.follow && have_status_ && status_.state == "PENDING" &&
        status_.reason == "DependencyNeverSatisfied") {
      // Slurm keeps such a job pending for ever (unless the site kills it): stop waiting.
      clear_status();
      say("job " + id_ +
          " will never start: a job it depends on ended in a way its dependency excludes "
          "(Reason=DependencyNeverSatisfied); it stays pending. Remove it: hpclaunch cancel " +
          id_);
      return follow_exit::kDependencyNeverSatisfied;
    }
    if (!o_.follow && !have_status_ && !o_.known_stdout_path.empty()) {
      stdout_.path = o_.known_stdout_path;  // scheduler unreachable: the log is still here
      drain_logs();
      emit_lines(stdout_, "", out_, true);
      if (unreachable_error_.empty()) return 0;
      // The log is shown, but the job's state is not known: an unreachable cluster is 69.
      err_ << "hpclaunch: error: " << printable_first_line(unreachable_error_)
           << " (the log above is what the run directory holds)\n";
      return kExitUnreachable;
    }
    drain_logs();
    if (output_closed_) {
      // Nobody reads the log any more: stop watching, as Ctrl-C would, and say so.
      clear_status();
      err_ << "hpclaunch: error: standard output: cannot write (closed or full); job " << id_
           << " goes on. Reattach: hpclaunch logs -f " << id_ << "\n";
      return follow_exit::kOutputClosed;
    }
    // Every poll: a PREEMPTED/NODE_FAIL watch ends when any other state shows.
    const bool settling = o_.follow && have_status_ && may_be_requeued();
    if (o_.follow && have_status_ && status_.terminal() && !settling) {
      write_final_state(o_.final_state_dir, status_.state);
      return finish();
    }
    if (!o_.follow && have_status_) {
      emit_lines(stdout_, "", out_, true);
      emit_lines(stderr_, "", err_, true);
      return 0;
    }
    draw_status();
    nap_unless_stopped(o_.log_interval);
  }
}

}  // namespace

std::string format_duration(long seconds) {
  if (seconds < 0) return "?";
  long d = seconds / 86400, h = seconds / 3600 % 24, m = seconds / 60 % 60, s = seconds % 60;
  if (d > 0) return fmt::format("{}-{:02}:{:02}:{:02}", d, h, m, s);
  return fmt::format("{:02}:{:02}:{:02}", h, m, s);
}

std::optional<TaskFailure> parse_srun_task_failure(const std::string& line) {
  // srun's own lines carry no --label prefix. RE2: linear in the line's length (a log line).
  static const RE2 form(R"(srun: error: ([^:\s]+): (tasks?) ([0-9][0-9,\-]*): (.+))", RE2::Latin1);
  std::string kind;
  TaskFailure f;
  if (!RE2::FullMatch(line, form, &f.node, &kind, &f.ranks, &f.reason)) return std::nullopt;
  f.several = kind == "tasks";
  // The tasks that stopped for a requeue ended as asked: not a failure.
  if (f.reason == "Exited with exit code 75") return std::nullopt;
  return f;
}

std::string describe_task_failure(const TaskFailure& f) {
  return (f.several ? "ranks " : "rank ") + f.ranks + " on " + f.node + " failed first (" +
         f.reason + ")";
}

int follow_job(Backend& backend, const std::string& job_id, const FollowOptions& options,
               std::ostream& out, std::ostream& err) {
  Follower f(backend, job_id, options, out, err);
  return f.run();
}

}  // namespace hpc
