// rerun, diff: a run's record (run.json, spec.json, program.diff, record/restart-N.json) used
// again (follow/rerun.h) and compared (follow/run_diff.h). docs/records.md.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/flags.h"
#include "cli/verbs.h"
#include "error.h"
#include "follow/rerun.h"
#include "follow/run_diff.h"
#include "shell.h"

namespace fs = std::filesystem;

namespace hpc {
namespace {

struct RerunFlags {
  RerunRequest request;
  BackendFlags backend;
  bool no_follow = false, no_preflight = false, cancel_on_interrupt = false;
};

struct DiffFlags {
  std::string run_a, run_b, runs_dir = "runs";
  bool as_json = false;
};

RunSnapshot snapshot_of(const std::string& run, const std::string& runs_dir) {
  return load_run_snapshot(find_recorded_run(run, runs_dir));
}

int diff_two_runs(const DiffFlags& f) {
  RunSnapshot a = snapshot_of(f.run_a, f.runs_dir);
  RunSnapshot b = snapshot_of(f.run_b, f.runs_dir);
  std::vector<RunDifference> diffs = diff_runs(a, b);
  if (f.as_json)
    std::cout << run_differences_json(diffs, a, b)
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  else
    std::cout << format_run_differences(diffs, a, b);
  return 0;
}

}  // namespace

VerbHandler define_rerun(CLI::App* verb) {
  auto f = std::make_shared<RerunFlags>();
  verb->add_option("RUN", f->request.run, "job id, run directory name or path")->required();
  verb->add_option("--set", f->request.sets,
                   "override a key of the saved spec: --set trainer.args='[...]' (repeatable)")
      ->take_all();
  verb->add_flag(
      "--force", f->request.force,
      "rerun even though the program's code or the saved spec.json changed since (one line "
      "says what)");
  verb->add_option("--template", f->request.template_file,
                   "mustache template (default: the built-in one)");
  verb->add_flag("--no-follow", f->no_follow, "submit, print the job id and return (as submit)");
  verb->add_flag("--no-preflight", f->no_preflight,
                 "skip comparing the spec with `scontrol show partition` before submitting");
  verb->add_flag("--cancel-on-interrupt", f->cancel_on_interrupt,
                 "Ctrl-C cancels the job (default: detach and leave it running)");
  f->backend.add_to(verb, true);
  verb->footer(
      "Example: hpclaunch rerun 12345 --set trainer.args='[\"--model\",\"tiny\"]'\n"
      "Without a backend flag the job goes where the run went (slurm, ssh and its login node, "
      "local). docs/records.md");
  return [f](const Invocation& in) {
    RerunRequest r = f->request;
    r.choice = f->backend.choice();
    r.backend_given = !f->backend.backend.empty() || f->backend.local || !f->backend.host.empty();
    r.options.follow = !f->no_follow;
    r.options.preflight = !f->no_preflight;
    r.options.cancel_on_interrupt = f->cancel_on_interrupt;
    return rerun_job(r, in.command);
  };
}

VerbHandler define_diff(CLI::App* verb) {
  auto f = std::make_shared<DiffFlags>();
  verb->add_option("RUN_A", f->run_a, "job id, run directory name or path")->required();
  verb->add_option("RUN_B", f->run_b, "job id, run directory name or path")->required();
  verb->add_flag("--json", f->as_json, "JSON output");
  verb->add_option("--runs-dir", f->runs_dir, "where run directories are kept (default ./runs)");
  verb->footer("Example: hpclaunch diff 12345 12346. docs/records.md");
  return [f](const Invocation&) { return diff_two_runs(*f); };
}

}  // namespace hpc
