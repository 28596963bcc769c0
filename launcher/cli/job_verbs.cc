// run, submit, status, logs, cancel, list: one job through a backend (follow/jobs.h).
#include <CLI/CLI.hpp>

#include "cli/flags.h"
#include "cli/verbs.h"
#include "follow/jobs.h"

namespace hpc {
namespace {

struct SubmitFlags {
  SelectionFlags selection;
  BackendFlags backend;
  RunOptions options;
  int rank = -1;
  bool no_preflight = false;

  void add_to(CLI::App* verb) {
    selection.add_to(verb);
    backend.add_to(verb, true);
    verb->add_flag("--no-preflight", no_preflight,
                   "skip comparing the spec with `scontrol show partition` before submitting");
  }
};

int run_submit(SubmitFlags f, bool follow, const Invocation& in) {
  Rendered r = render_selection(f.selection, in.trainer_args, in.command, false, true);
  if (f.rank >= 0) f.options.rank = f.rank;
  f.options.preflight = !f.no_preflight;
  f.options.follow = follow;
  return submit_and_follow(r.spec, r.script, f.backend.choice(), in.command, f.options);
}

// status, logs, cancel: a job by id or run directory name, and where to find it.
struct JobFlags {
  BackendFlags backend;
  std::string job;
  bool as_json = false, follow = false, with_state = false;
  int rank = -1;
};

std::shared_ptr<JobFlags> add_job_flags(CLI::App* verb) {
  auto f = std::make_shared<JobFlags>();
  verb->add_option("JOB", f->job, "job id or run directory name")->required();
  return f;
}

}  // namespace

VerbHandler define_run(CLI::App* verb) {
  auto f = std::make_shared<SubmitFlags>();
  f->add_to(verb);
  verb->add_flag("--cancel-on-interrupt", f->options.cancel_on_interrupt,
                 "Ctrl-C cancels the job (default: detach and leave it running)");
  verb->add_option("--rank", f->rank, "stream only this rank's lines");
  verb->footer(
      "Example: hpclaunch run --preset 1n2g --strategy ddp --local -- --model tiny --max-steps 20");
  return [f](const Invocation& in) { return run_submit(*f, true, in); };
}

VerbHandler define_submit(CLI::App* verb) {
  auto f = std::make_shared<SubmitFlags>();
  f->add_to(verb);
  return [f](const Invocation& in) { return run_submit(*f, false, in); };
}

VerbHandler define_status(CLI::App* verb) {
  auto f = add_job_flags(verb);
  verb->add_flag("--json", f->as_json, "JSON output");
  f->backend.add_to(verb, false);
  return [f](const Invocation&) { return show_status(f->job, f->backend.choice(), f->as_json); };
}

VerbHandler define_logs(CLI::App* verb) {
  auto f = add_job_flags(verb);
  verb->add_flag("-f,--follow", f->follow, "keep streaming until the job ends");
  verb->add_option("--rank", f->rank, "only this rank's lines");
  f->backend.add_to(verb, false);
  return [f](const Invocation&) {
    return show_logs(f->job, f->backend.choice(), f->follow,
                     f->rank >= 0 ? std::optional<int>(f->rank) : std::nullopt);
  };
}

VerbHandler define_cancel(CLI::App* verb) {
  auto f = add_job_flags(verb);
  f->backend.add_to(verb, false);
  return [f](const Invocation&) { return cancel_job(f->job, f->backend.choice()); };
}

VerbHandler define_list(CLI::App* verb) {
  auto f = std::make_shared<JobFlags>();
  verb->add_flag("--json", f->as_json, "JSON output");
  verb->add_flag("--state", f->with_state, "ask the scheduler for each run's state");
  f->backend.add_to(verb, false);
  return
      [f](const Invocation&) { return list_jobs(f->backend.choice(), f->as_json, f->with_state); };
}

}  // namespace hpc
