// sweep, tune and report: many jobs through the job pool (campaigns/).
#include <CLI/CLI.hpp>

#include "campaigns/compare.h"
#include "campaigns/plot.h"
#include "campaigns/sweep.h"
#include "campaigns/tune.h"
#include "cli/flags.h"
#include "cli/verbs.h"
#include "error.h"
#include "follow/goodput_report.h"

namespace hpc {
namespace {

// Scaling sweeps (campaigns/sweep.h, docs/sweeps.md). The command line wins over the sweep
// file, flag by flag: each flag that may override the file keeps its CLI::Option to ask.
struct SweepFlags {
  SweepConfig given;
  std::string file, presets, strategies, metric_regex;
  BackendFlags backend;
  CLI::Option *presets_opt, *strategies_opt, *scaling, *steps, *cluster, *max_concurrent,
      *warmup_steps, *start_timeout, *out_dir, *project, *template_file, *poll, *metric_opt,
      *launch, *repeats;

  SweepConfig config(const Invocation& in) const {
    SweepConfig c;
    if (!file.empty()) c = read_sweep_file(file);
    if (presets_opt->count()) c.presets = split_comma_list(presets);
    if (strategies_opt->count()) c.strategies = split_comma_list(strategies);
    if (scaling->count()) c.scaling = given.scaling;
    if (steps->count()) {
      if (given.steps < 1)
        throw UserError("--steps", "must be at least 1 (0 would lift the step limit)",
                        "pass --steps N with N >= 1, or leave it out to keep the trainer's own "
                        "--max-steps");
      c.steps = given.steps;
    }
    if (cluster->count()) c.cluster = given.cluster;
    if (max_concurrent->count()) c.max_concurrent = given.max_concurrent;
    if (warmup_steps->count()) {
      if (given.warmup_steps < 0)
        throw UserError("--warmup-steps", std::to_string(given.warmup_steps) + " is negative",
                        "pass 0 or more steps to drop before averaging (leave it out for max(3, "
                        "20%))");
      c.warmup_steps = given.warmup_steps;
    }
    if (start_timeout->count()) c.start_timeout_s = given.start_timeout_s;
    if (out_dir->count()) c.out_dir = given.out_dir;
    c.sets.insert(c.sets.end(), given.sets.begin(), given.sets.end());
    if (project->count()) c.project = given.project;
    if (given.no_project) c.no_project = true;
    if (template_file->count()) c.template_file = given.template_file;
    if (poll->count()) c.poll_interval_s = given.poll_interval_s;
    if (launch->count()) c.launch = given.launch;
    if (repeats->count()) {
      if (given.repeats < 1)
        throw UserError("--repeats", "must be at least 1",
                        "pass --repeats 3 to run each point 3 times");
      c.repeats = given.repeats;
    }
    c.dry_run = given.dry_run;
    if (metric_opt->count()) c.metric = make_log_metric(metric_regex, "--metric-regex");
    if (in.trainer_args) {
      c.trainer_args.insert(c.trainer_args.end(), in.trainer_args->begin(), in.trainer_args->end());
    }
    return c;
  }
};

}  // namespace

VerbHandler define_sweep(CLI::App* verb) {
  auto f = std::make_shared<SweepFlags>();
  SweepConfig& g = f->given;
  verb->add_option("--file,-f", f->file, "sweep file (JSON with comments; examples/sweeps/)");
  f->presets_opt =
      verb->add_option("--presets", f->presets, "shape presets, comma-separated: 1n1g,1n2g,2n2g");
  f->strategies_opt = verb->add_option("--strategy,--strategies,-s", f->strategies,
                                       "strategies, comma-separated: ddp,fsdp");
  f->scaling = verb->add_option("--scaling", g.scaling,
                                "strong (global batch fixed) or weak (per-GPU batch fixed)");
  f->steps = verb->add_option("--steps", g.steps, "training steps per point (--max-steps)");
  f->cluster = verb->add_option("--cluster,-c", g.cluster, "cluster profile");
  f->max_concurrent = verb->add_option("--max-concurrent,-j", g.max_concurrent,
                                       "points in flight at once (default 1)");
  f->warmup_steps = verb->add_option("--warmup-steps", g.warmup_steps,
                                     "steps dropped before averaging (default max(3, 20%))");
  f->start_timeout =
      verb->add_option("--start-timeout", g.start_timeout_s,
                       "seconds a point may wait to start before it is cancelled (default 600)");
  f->out_dir = verb->add_option(
      "--out,-o", g.out_dir,
      "sweep directory (default sweeps/PRESETS-STRATEGIES-SCALING); re-running resumes it");
  verb->add_option("--set", g.sets, "override a key for every point (repeatable)")->take_all();
  f->project = verb->add_option("--project", g.project,
                                "project file (default: ./hpclaunch.json if present)");
  verb->add_flag("--no-project", g.no_project, "ignore ./hpclaunch.json");
  f->template_file = verb->add_option("--template", g.template_file,
                                      "mustache template (default: the built-in one)");
  f->poll =
      verb->add_option("--poll", g.poll_interval_s, "seconds between state checks (default 1)");
  f->launch = verb->add_option(
      "--launch", g.launch,
      "hpctrain (default), or srun / torchrun for your own program after -- (one series, no "
      "--strategy; measure it with --metric-regex)");
  f->metric_opt = verb->add_option(
      "--metric-regex", f->metric_regex,
      "measure your program's own figure: the last line of rank 0 in each job's log that this "
      "regex (RE2 syntax) matches, group 1 (e.g. 'tokens/s: ([0-9.]+)'), instead of hpctrain's "
      "metrics");
  f->repeats = verb->add_option(
      "--repeats", g.repeats,
      "run each point N times, round-robin; the summary shows the mean and its 95% interval");
  verb->add_flag("--dry-run", g.dry_run,
                 "render every point's script into OUT/scripts/NAME.sbatch; submit nothing");
  f->backend.add_to(verb, true);
  verb->footer(
      "Example: hpclaunch sweep --presets 1n1g,1n2g --strategy ddp --local --steps 20 -- "
      "--model tiny");
  return [f](const Invocation& in) {
    return run_sweep(f->config(in), f->backend.choice(), in.command);
  };
}

// NCCL tuning (campaigns/tune.h, docs/tuning.md).
VerbHandler define_tune(CLI::App* verb) {
  struct Flags {
    TuneConfig config;
    BackendFlags backend;
  };
  auto f = std::make_shared<Flags>();
  TuneConfig& c = f->config;
  verb->add_option("--cluster,-c", c.cluster, "cluster profile to tune (default: the spec's)");
  verb->add_option("--preset,-p", c.preset, "shape preset the benchmark runs on (default 2n4g)");
  verb->add_option("--grid,-g", c.grid_file,
                   "grid file (JSON with comments; docs/tuning.md); default: ALGO x PROTO x P2P");
  verb->add_option("--name", c.name, "the tuned profile's name (default CLUSTER-tuned)");
  verb->add_flag("--force", c.force, "replace an existing tuned profile of that name");
  verb->add_option("--max-candidates", c.max_candidates,
                   "refuse grids with more candidates (default 32)");
  verb->add_option("--max-concurrent,-j", c.max_concurrent,
                   "candidates in flight at once (default 1)");
  verb->add_option("--timeout", c.timeout_s,
                   "seconds one candidate may run: its time limit, a hang is reported "
                   "(default 600)");
  verb->add_option("--start-timeout", c.start_timeout_s,
                   "seconds a candidate may wait to start (default 600)");
  verb->add_option("--min", c.min_size, "smallest all-reduce size (default 1M)");
  verb->add_option("--max", c.max_size, "largest all-reduce size (default 1G)");
  verb->add_option("--iters", c.iters, "timed all-reduces per size (default 20)");
  verb->add_option("--set", c.sets, "override a key for every candidate (repeatable)")->take_all();
  verb->add_option("--project", c.project, "project file (default: ./hpclaunch.json if present)");
  verb->add_flag("--no-project", c.no_project, "ignore ./hpclaunch.json");
  verb->add_option("--template", c.template_file, "mustache template (default: the built-in one)");
  verb->add_option("--poll", c.poll_interval_s, "seconds between state checks (default 1)");
  f->backend.add_to(verb, true);
  verb->footer(
      "Example: hpclaunch tune --cluster jsc --preset 2n4g --grid grid.json "
      "--set profile.account=myproj");
  return [f](const Invocation& in) {
    TuneConfig config = f->config;
    if (in.trainer_args) config.bench_args = *in.trainer_args;
    return run_tune(config, f->backend.choice(), in.command);
  };
}

VerbHandler define_report(CLI::App* verb) {
  struct Flags {
    std::string dir, out, plot, metric_regex;
    std::vector<std::string> compare;
    bool as_json = false;
    BackendFlags backend;
  };
  auto f = std::make_shared<Flags>();
  verb->add_option("DIR", f->dir,
                   "a sweep directory to re-render, or a run (job id, run directory name or "
                   "path): its goodput across requeues");
  verb->add_option("--compare", f->compare,
                   "two sweep directories A B: side by side, with the ratio B/A per point")
      ->expected(2);
  verb->add_option("--out,-o", f->out,
                   "with --compare: where the table and plot go (default compare-A-vs-B)");
  verb->add_flag("--json", f->as_json, "a run's report as JSON");
  verb->add_option("--plot", f->plot,
                   "a run's timeline plot: PATH.png and PATH.svg (default RUN_DIR/goodput)");
  auto* metric_opt = verb->add_option(
      "--metric-regex", f->metric_regex,
      "a run of your own program: the line (RE2) it prints after a step, which dates its first "
      "step in the start-up table");
  f->backend.add_to(verb, false);
  verb->footer(
      "Examples: hpclaunch report sweeps/local-tiny\n"
      "          hpclaunch report --compare sweeps/before sweeps/after\n"
      "          hpclaunch report 4242          (a run: queue wait, requeues, goodput)");
  return [f, metric_opt](const Invocation&) {
    RunReportOptions run_options{f->as_json, f->plot, {}};
    if (metric_opt->count())
      run_options.first_step_line = log_line_matcher(make_log_metric(f->metric_regex,
                                                                     "--metric-regex"));
    if (!f->compare.empty()) {
      if (!f->dir.empty())
        throw UserError("report", "both DIR and --compare given",
                        "pass either a sweep directory or --compare DIR_A DIR_B");
      if (f->as_json || !f->plot.empty() || metric_opt->count())
        throw UserError(f->as_json ? "--json" : !f->plot.empty() ? "--plot" : "--metric-regex",
                        "only for a run's report",
                        "hpclaunch report RUN --json (a job id or run directory)");
      return report_compare(f->compare[0], f->compare[1], f->out);
    }
    if (f->dir.empty())
      throw UserError("report", "no sweep directory or run",
                      "pass the --out directory of hpclaunch sweep, a job id or run directory, "
                      "or --compare DIR_A DIR_B");
    if (names_a_run(f->dir, f->backend.choice())) {
      if (!f->out.empty())
        throw UserError("--out", "only with --compare", "use --plot PATH for a run's plot");
      return report_run(f->dir, f->backend.choice(), run_options);
    }
    if (!f->out.empty())
      throw UserError("--out", "only with --compare", "hpclaunch report DIR writes into DIR");
    if (f->as_json || !f->plot.empty() || metric_opt->count())
      throw UserError(f->as_json ? "--json" : !f->plot.empty() ? "--plot" : "--metric-regex",
                      "only for a run's report",
                      "pass a run (a job id or run directory); " + f->dir +
                          " is a sweep folder, whose report is summary.md and plots/");
    return report_sweep_dir(f->dir);
  };
}

}  // namespace hpc
