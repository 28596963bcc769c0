#include "follow/jobs.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "backends/code_sync.h"
#include "backends/host.h"
#include "backends/local_backend.h"
#include "backends/preflight.h"
#include "backends/slurm_backend.h"
#include "backends/ssh_host.h"
#include "error.h"
#include "follow/excluded_nodes.h"
#include "follow/follow.h"
#include "shell.h"
#include "subprocess.h"
#include "version.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

std::string absolute_runs_root(const std::string& runs_dir) {
  std::error_code ec;
  fs::path p = fs::absolute(runs_dir, ec);
  return p.lexically_normal().string();
}

std::string replace_job_name_pattern(const std::string& pattern, const std::string& name) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == '%') {
      out += "%%";  // a literal percent sign stays escaped
      ++i;
    } else if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'x') {
      out += name;
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// status, logs and cancel of a job the scheduler does not know (a typo, or a job so old that
// the controller forgot it and no accounting remembers): one line, the same status from each.
int report_unknown_job(const std::string& job_id, const JobStatus& s,
                       const std::string& more = "") {
  std::cerr << "hpclaunch: job " << job_id << " is not known to the scheduler ("
            << (s.detail.empty() ? "it may have ended long ago" : comment_text(s.detail))
            << "); check the id (hpclaunch list, squeue)" << more << "\n";
  return follow_exit::kLost;
}

// A job array's tasks for `status --json`: {"0": "COMPLETED", "5-9%2": "PENDING"}.
json array_tasks_json(const JobStatus& s) {
  json tasks = json::object();
  for (const auto& [task, state] : s.array_tasks) tasks[task] = state;
  return tasks;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

// job.hang_seconds: the progress files of hpctrain's ranks are in <run dir>/progress (the batch
// template's HPCTRAIN_PROGRESS_DIR); the report goes into this machine's run directory.
namespace {
void set_hang_watch(const RunRecord& record, FollowOptions& f) {
  if (record.hang_seconds <= 0 || record.run_dir.empty()) return;
  f.hang_seconds = record.hang_seconds;
  f.start_seconds = record.start_seconds;
  f.world_size = record.world_size;
  f.labels_are_nodes = record.launch == "torchrun";
  f.heartbeats = record.launch != "hpctrain";
  f.progress_dir = record.run_dir + "/progress";
  f.hang_report_dir = record.local_dir;
}
}  // namespace

long max_steps_from_args(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--max-steps" && i + 1 < args.size()) return std::atol(args[i + 1].c_str());
    if (args[i].rfind("--max-steps=", 0) == 0) return std::atol(args[i].c_str() + 12);
  }
  return 0;
}

std::unique_ptr<Backend> make_backend(const BackendChoice& choice) {
  std::string kind = choice.kind;
  if (kind.empty()) {
    if (!program_on_path("sbatch")) {
      throw UserError("--backend", "no sbatch on this machine",
                      "pass --local to run here without Slurm, or --host LOGIN to submit over SSH");
    }
    kind = "slurm";
  }
  if (kind == "slurm" || kind == "ssh") {
    BackendChoice c = choice;
    c.kind = kind;
    return std::make_unique<SlurmBackend>(make_login_host(c), kind);
  }
  if (kind == "local") return std::make_unique<LocalBackend>(absolute_runs_root(choice.runs_dir));
  throw UserError("--backend", "unknown backend \"" + kind + "\"", "use slurm, ssh or local");
}

std::unique_ptr<Host> make_login_host(const BackendChoice& choice) {
  const bool ssh = choice.kind == "ssh" || (choice.kind.empty() && !choice.host.empty());
  if (!ssh) return std::make_unique<LocalHost>();
  if (choice.host.empty()) {
    throw UserError("--backend ssh", "no login node given",
                    "pass --host LOGIN (a host or an ~/.ssh/config alias)");
  }
  SshHostOptions o;
  o.host = choice.host;
  o.jump = choice.jump;
  o.config_file = choice.ssh_config;
  o.config_from_record = choice.ssh_config_from_record;
  o.known_hosts_file = choice.known_hosts;
  o.accept_new_host_key = choice.accept_new_host_key;
  auto host = std::make_unique<SshHost>(o);
  host->connect();  // host key, login, port: fail before anything is written or submitted
  return host;
}

namespace {

// run and submit: the cheap part of the preflight, one scontrol call on the login node.
void preflight_before_submit(Backend& backend, const Spec& spec) {
  auto* slurm = dynamic_cast<SlurmBackend*>(&backend);
  if (!slurm) return;
  PreflightReport report;
  try {
    report = preflight_quick(slurm->host_ref(), spec);
  } catch (const BackendUnreachable&) {
    return;  // sbatch's own bounded retries wait for the controller and say so (exit 69)
  }
  if (report.findings.empty()) return;
  const PreflightFinding& first = report.findings.front();
  std::string more;
  if (report.findings.size() > 1)
    more = " (" + std::to_string(report.findings.size() - 1) +
           " more: hpclaunch validate --live lists them)";
  throw UserError("preflight on " + backend.host(), first.what + more,
                  first.fix + "; or skip the check with --no-preflight");
}

// --sync: the working directory uploaded once per process and login node (a sweep's points
// share it); one line says what was sent and what was left out.
SyncResult sync_once(Backend& backend, const BackendChoice& choice) {
  static std::map<std::string, SyncResult> done;
  auto* slurm = dynamic_cast<SlurmBackend*>(&backend);
  if (!slurm) throw UserError("--sync", "this backend has no login node", "use --host");
  auto it = done.find(backend.host());
  if (it != done.end()) return it->second;
  SyncOptions o;
  o.list_file = choice.sync_list;
  o.max_file_size = choice.sync_max_file_size;
  o.store = choice.sync_store;
  SyncResult r = sync_code_tree(slurm->host_ref(), o);
  for (const auto& line : r.skipped) std::cerr << "hpclaunch: sync: skipped " << line << "\n";
  std::cerr << "hpclaunch: sync: tree " << r.tree_hash.substr(0, 12) << " (" << r.files.size()
            << " files): uploaded " << r.uploaded << " file" << (r.uploaded == 1 ? "" : "s") << " ("
            << r.uploaded_bytes << " bytes)"
            << (r.tree_existed ? "; the tree was there already" : "") << "; the job runs in "
            << r.tree_dir << "\n";
  done[backend.host()] = r;
  return r;
}

}  // namespace

RunRecord submit_job(Backend& backend, const Spec& spec, const std::string& script,
                     const BackendChoice& choice, const std::vector<std::string>& command,
                     const std::string& rerun_of) {
  SubmitRequest request;
  request.script = script;
  request.job_name = spec.job.name;
  bool remote = backend.kind() == "ssh";
  request.runs_root = remote ? choice.remote_runs_dir : absolute_runs_root(choice.runs_dir);
  if (!remote) request.workdir = fs::current_path().string();
  // %x (the job name) in a log path: the name may hold '/' or spaces, so use its run-directory
  // form, which the run directory's own name uses too.
  request.output = replace_job_name_pattern(spec.job.output, run_dir_name(spec.job.name));
  request.error = replace_job_name_pattern(spec.job.error, run_dir_name(spec.job.name));
  request.files = {{"spec.json", spec.canonical_json()}};
  if (backend.kind() == "local") {
    // The tasks run here, from the job's working directory: the image must be here too.
    fs::path workdir = fs::current_path() / spec.job.chdir;
    check_container_on_this_machine(spec.container, workdir.lexically_normal().string());
  }
  check_env_from_submit(spec);  // names only below: the values stay in this environment
  request.env_from_submit = spec.job.env_from_submit;
  request.array_tasks = spec.job.array_indexes.indexes;
  std::optional<SyncResult> synced;
  if (remote && choice.sync) {
    synced = sync_once(backend, choice);
    request.workdir = synced->tree_dir;  // the job runs in the uploaded copy
  }

  // The code as it is now, before the job can start (program.diff is written below).
  const ProgramState program = read_program_state(fs::current_path().string());
  SubmitResult submitted = backend.submit(request);

  RunRecord record;
  record.job_id = submitted.job_id;
  record.name = spec.job.name;
  record.backend = backend.kind();
  record.host = backend.host();
  record.ssh_target = remote ? choice.host : "";
  record.ssh_jump = remote ? choice.jump : "";
  record.ssh_config = remote ? choice.ssh_config : "";
  record.known_hosts = remote ? choice.known_hosts : "";
  record.run_dir = submitted.run_dir;
  record.submit_command = submitted.submit_command;
  record.submitted_at = utc_now_iso8601();
  record.hpclaunch_version = kVersion;
  record.spec_hash = spec.hash();
  record.preset = spec.preset;
  record.cluster = spec.cluster;
  record.strategy = spec.strategy;
  record.launch = spec.launch;
  record.world_size = spec.world_size();
  record.max_steps = max_steps_from_args(spec.trainer.args);
  // The batch script requeues itself only when it traps the time-limit signal.
  record.max_requeues = spec.job.signal_seconds > 0 ? spec.job.max_requeues : 0;
  record.hang_seconds = spec.job.array.empty() ? spec.job.hang_seconds : 0;  // arrays: not yet
  record.start_seconds = spec.job.start_seconds;
  record.generator_command = shell_join(command);
  record.array = spec.job.array;
  if (synced) {
    record.code_tree = synced->tree_hash;
    record.code_dir = synced->tree_dir;
    record.git_revision = synced->git_revision;
  }
  if (remote) {
    // A local copy of the record, so that status/logs/cancel find the job from here.
    record.local_dir =
        (fs::path(absolute_runs_root(choice.runs_dir)) / fs::path(submitted.run_dir).filename())
            .string();
    LocalHost here;
    here.make_dirs(record.local_dir);
    here.write_file(record.local_dir + "/script.sbatch", script, 0755);
    here.write_file(record.local_dir + "/spec.json", spec.canonical_json(), 0644);
  } else {
    record.local_dir = submitted.run_dir;
  }
  try {
    record.stdout_path = backend.status(record.job_id).stdout_path;  // for logs when Slurm forgot
  } catch (const BackendError&) {}
  record.program = program;
  record.program_recorded = true;
  record.rerun_of = rerun_of;
  if (!program.diff.empty())
    LocalHost().write_file(record.local_dir + "/program.diff", program.diff, 0644);
  write_run_record(record);
  return record;
}

namespace {

// The node check's line in a job's log (job.preflight): its slow nodes are remembered for the
// run's cluster (reading the same job's log again keeps the first date).
std::function<void(const std::string&)> remember_slow_nodes(const RunRecord& record) {
  const auto file = excluded_nodes_file();
  if (!file || record.cluster.empty()) return nullptr;
  return [file = *file, cluster = record.cluster, job = record.job_id](const std::string& line) {
    auto nodes = parse_node_check_line(line);
    if (!nodes) return;
    for (auto& n : *nodes) n.job = job;
    try {
      remember_nodes(file, cluster, *nodes, utc_today());
      std::cerr << "hpclaunch: remembered slow node(s) for cluster " << cluster << " in "
                << file.string() << "; later jobs there exclude them (hpclaunch clusters show "
                << cluster << ")\n";
    } catch (const std::exception& e) {
      std::cerr << "hpclaunch: cannot remember the slow node(s): " << e.what() << "\n";
    }
  };
}

}  // namespace

int submit_and_follow(const Spec& spec, const std::string& script, const BackendChoice& choice,
                      const std::vector<std::string>& command, const RunOptions& options) {
  check_env_from_submit(spec);  // before connecting: nothing submitted, exit 2
  auto backend = make_backend(choice);
  if (options.preflight) preflight_before_submit(*backend, spec);  // bad input: exit 2
  RunRecord record = submit_job(*backend, spec, script, choice, command, options.rerun_of);
  if (!options.submitted_note.empty()) std::cerr << options.submitted_note << "\n";

  std::cerr << "hpclaunch: submitted job " << record.job_id << " (" << spec.preset << ", "
            << spec.world_size() << " ranks, "
            << (spec.launches_hpctrain() ? spec.strategy : spec.how_launched()) << ") via "
            << record.backend << " on " << record.host << "; run directory " << record.run_dir
            << "\n";
  if (!spec.job.array.empty()) {
    const auto& tasks = spec.job.array_indexes.indexes;
    std::cerr << "hpclaunch: job " << record.job_id << " is an array of " << tasks.size()
              << " task(s) (" << spec.job.array
              << "); each task's log and metrics: " << record.run_dir << "_N/ (N: " << tasks.front()
              << ".." << tasks.back() << "); one task: hpclaunch logs " << record.job_id << "_"
              << tasks.front() << "\n";
  }
  if (!options.follow) {
    std::cout << record.job_id << "\n";
    return 0;
  }
  FollowOptions f;
  f.just_submitted = true;
  f.live_status = isatty(STDERR_FILENO);
  // A local job lives on this machine like a foreground program: Ctrl-C stops it.
  f.cancel_on_interrupt = options.cancel_on_interrupt || record.backend == "local";
  f.rank = options.rank;
  f.metrics_path = record.run_dir + "/metrics.jsonl";
  f.max_steps = record.max_steps;
  f.max_requeues = record.max_requeues;
  set_hang_watch(record, f);
  f.on_log_line = remember_slow_nodes(record);
  f.final_state_dir = record.local_dir;
  return follow_job(*backend, record.job_id, f, std::cout, std::cerr);
}

OpenedRun open_run(const std::string& job, const BackendChoice& choice) {
  auto record = find_run(absolute_runs_root(choice.runs_dir), job);
  // A task of an array submitted from here (123_4): the array's record, the task's directory.
  const size_t underscore = job.find('_');
  if (!record && is_job_id(job) && underscore != std::string::npos) {
    record = find_run(absolute_runs_root(choice.runs_dir), job.substr(0, underscore));
    if (record && !record->array.empty()) {
      record->job_id = job;
      record->run_dir += job.substr(underscore);
      record->stdout_path.clear();
    } else {
      record.reset();
    }
  }
  OpenedRun opened;
  if (!record) {
    // Not submitted from here: a plain Slurm job id still works with the chosen backend.
    if (!is_job_id(job)) {
      throw UserError(job,
                      "not a job id (a number from 1 up), and no run directory of that name "
                      "under " +
                          choice.runs_dir,
                      "check the id: hpclaunch list shows the runs; pass --runs-dir if they "
                      "live elsewhere");
    }
    opened.record.job_id = job;
    opened.backend = make_backend(choice);
    return opened;
  }
  if (!is_job_id(record->job_id)) {
    throw UserError(record->local_dir + "/run.json: job_id",
                    "\"" + record->job_id + "\" is not a job id (a number from 1 up)",
                    "fix the file or remove that run directory");
  }
  BackendChoice c = choice;
  c.kind = record->backend;
  if (c.kind == "ssh") {
    if (c.host.empty()) c.host = record->ssh_target;
    if (c.jump.empty()) c.jump = record->ssh_jump;
    if (c.ssh_config.empty()) {
      c.ssh_config = record->ssh_config;
      c.ssh_config_from_record = !c.ssh_config.empty();
    }
    if (c.known_hosts.empty()) c.known_hosts = record->known_hosts;
  }
  // A local job is found through the runs root that holds its run directory.
  if (c.kind == "local" && !record->run_dir.empty())
    c.runs_dir = fs::path(record->run_dir).parent_path().string();
  opened.record = *record;
  opened.backend = make_backend(c);
  return opened;
}

std::string describe_requeues(int restarts, int max_requeues) {
  if (max_requeues < 0) return std::to_string(restarts);
  return std::to_string(restarts) + " of at most " + std::to_string(max_requeues) +
         " (job.max_requeues)";
}

namespace {

// A state that Slurm may still take back (PREEMPTED and NODE_FAIL requeue where the job or the
// site asks for it) is not kept: follow's settle time decides those (RequeueWatch).
void remember_if_final(const RunRecord& record, const JobStatus& s) {
  if (s.found && s.terminal() && s.state != "PREEMPTED" && s.state != "NODE_FAIL")
    write_final_state(record.local_dir, s.state);
}

}  // namespace

int show_status(const std::string& job, const BackendChoice& choice, bool as_json) {
  OpenedRun run = open_run(job, choice);
  JobStatus s = run.backend->status(run.record.job_id);
  remember_if_final(run.record, s);
  if (as_json) {
    std::cout << json{{"job_id", run.record.job_id},
                      {"state", s.state},
                      {"reason", s.reason},
                      {"nodes", s.nodes},
                      {"elapsed_seconds", s.elapsed_seconds},
                      {"exit_code", s.exit_code},
                      {"exit_signal", s.exit_signal},
                      {"restarts", s.restarts},
                      {"max_requeues", run.record.max_requeues},
                      {"stdout", s.stdout_path},
                      {"detail", s.detail},
                      {"found", s.found},
                      {"run_dir", run.record.run_dir},
                      {"backend", run.backend->kind()},
                      {"array_tasks", array_tasks_json(s)}}
                     .dump(2)
              << "\n";
    return s.found ? 0 : follow_exit::kLost;
  }
  if (!s.found) return report_unknown_job(run.record.job_id, s);
  std::cout << fmt::format(
      "job      {}\nstate    {}{}\nnodes    {}\nelapsed  {}\nexit     {}\nrequeues {}\n",
      run.record.job_id, comment_text(s.state),
      s.reason.empty() ? "" : " (" + comment_text(s.reason) + ")",
      s.nodes.empty() ? "-" : comment_text(s.nodes), format_duration(s.elapsed_seconds),
      s.exit_code < 0 ? "-" : std::to_string(s.exit_code) + ":" + std::to_string(s.exit_signal),
      describe_requeues(s.restarts, run.record.max_requeues));
  if (!s.detail.empty()) std::cout << "detail   " << comment_text(s.detail) << "\n";
  if (!s.array_tasks.empty()) {
    std::string tasks;
    for (const auto& [task, state] : s.array_tasks)
      tasks += (tasks.empty() ? "" : ", ") + task + " " + state;
    std::cout << "tasks    " << tasks << "\n";
  }
  if (!s.stdout_path.empty()) std::cout << "log      " << comment_text(s.stdout_path) << "\n";
  if (!run.record.run_dir.empty())
    std::cout << "run dir  " << comment_text(run.record.run_dir) << "\n";
  return 0;
}

int show_logs(const std::string& job, const BackendChoice& choice, bool follow,
              std::optional<int> rank) {
  OpenedRun run = open_run(job, choice);
  if (!run.record.array.empty() && run.record.job_id.find('_') == std::string::npos) {
    throw UserError(job,
                    "job " + run.record.job_id + " is an array (" + run.record.array +
                        "): each task has its own log",
                    "name one task: hpclaunch logs " + run.record.job_id + "_N (hpclaunch status " +
                        run.record.job_id + " lists them)");
  }
  FollowOptions f;
  f.follow = follow;
  f.rank = rank;
  f.live_status = follow && isatty(STDERR_FILENO);
  if (!run.record.run_dir.empty()) f.metrics_path = run.record.run_dir + "/metrics.jsonl";
  f.max_steps = run.record.max_steps;
  f.max_requeues = run.record.max_requeues;
  f.known_stdout_path = run.record.stdout_path;
  set_hang_watch(run.record, f);
  f.on_log_line = remember_slow_nodes(run.record);
  f.final_state_dir = run.record.local_dir;
  return follow_job(*run.backend, run.record.job_id, f, std::cout, std::cerr);
}

int cancel_job(const std::string& job, const BackendChoice& choice) {
  OpenedRun run = open_run(job, choice);
  // scancel is silent about ids it does not know: ask first, so a typo is not "cancelled".
  JobStatus s = run.backend->status(run.record.job_id);
  if (!s.found) return report_unknown_job(run.record.job_id, s, "; nothing was cancelled");
  if (s.terminal()) {
    std::cerr << "hpclaunch: job " << run.record.job_id << " already ended (" << s.state
              << "); nothing to cancel\n";
    return 0;
  }
  run.backend->cancel(run.record.job_id);
  std::cerr << "hpclaunch: cancel requested for job " << run.record.job_id << "\n";
  return 0;
}

int list_jobs(const BackendChoice& choice, bool as_json, bool with_state) {
  std::vector<std::string> problems;
  auto runs = list_runs(absolute_runs_root(choice.runs_dir), &problems);
  // A run directory whose record cannot be read is named, not silently left out.
  for (const auto& p : problems)
    std::cerr << "hpclaunch: warning: left out of the list: " << comment_text(p) << "\n";
  if (as_json) {
    json all = json::array();
    for (const auto& r : runs) {
      json j = r.to_json();
      j["local_dir"] = r.local_dir;
      const std::string final_state = read_final_state(r.local_dir);
      j["final_state"] = final_state.empty() ? json(nullptr) : json(final_state);
      all.push_back(j);
    }
    std::cout << all.dump(2) << "\n";
    return 0;
  }
  if (runs.empty()) {
    std::cout << "no runs under " << choice.runs_dir << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<10} {:<20} {:<7} {:<8} {:<8} {:>5}  {:<11} {}\n", "JOB", "SUBMITTED",
                           "BACKEND", "PRESET", "STRATEGY", "RANKS", "STATE", "RUN DIR");
  for (const auto& r : runs) {
    // The state the job ended in, where a follow or a status saw it; a local job's is asked
    // (a file of its supervisor: no scheduler, no cost), so one whose `run` was killed shows
    // RUNNING; --state asks every backend for the rest.
    std::string state = read_final_state(r.local_dir);
    if (state.empty() && (with_state || r.backend == "local")) {
      try {
        BackendChoice c = choice;
        c.kind = r.backend;
        c.host = r.ssh_target;
        c.jump = r.ssh_jump;
        if (c.ssh_config.empty()) {
          c.ssh_config = r.ssh_config;
          c.ssh_config_from_record = !c.ssh_config.empty();
        }
        c.known_hosts = r.known_hosts;
        if (c.kind == "local" && !r.run_dir.empty())
          c.runs_dir = fs::path(r.run_dir).parent_path().string();
        auto b = make_backend(c);
        JobStatus s = b->status(r.job_id);
        state = s.found ? s.state : "GONE";
        remember_if_final(r, s);
      } catch (const std::exception&) {
        state = "?";
      }
    }
    if (state.empty()) state = "-";
    // Fields of a run directory's files and its name, as printable text: an escape sequence or
    // a newline there (a damaged or shared run directory) neither reaches the terminal nor
    // breaks the table.
    const auto t = [](const std::string& v) { return comment_text(v); };
    std::cout << fmt::format("{:<10} {:<20} {:<7} {:<8} {:<8} {:>5}  {:<11} {}\n", t(r.job_id),
                             t(r.submitted_at), t(r.backend), t(r.preset),
                             t(r.strategy.empty() ? r.launch : r.strategy), r.world_size, t(state),
                             t(r.local_dir));
  }
  return 0;
}

}  // namespace hpc
