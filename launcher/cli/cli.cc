#include "cli/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <regex>
#include <filesystem>
#include <fmt/core.h>
#include <iostream>

#include "atomic_file.h"
#include "spec/catalog.h"
#include "spec/doctor.h"
#include "error.h"
#include "hostlist.h"
#include "follow/jobs.h"
#include "json_file.h"
#include "render/render.h"
#include "render/shell.h"
#include "spec/spec.h"
#include "cli/version.h"
#include "subprocess.h"
#include "spec/suggest.h"
#include "campaigns/plot.h"
#include "campaigns/sweep.h"
#include "campaigns/tune.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

constexpr const char* kExamples = R"(Examples:
  hpclaunch presets list
  hpclaunch clusters show jsc
  hpclaunch render --preset 2n4g --strategy fsdp --cluster jsc --set profile.account=myproj -o job.sbatch
  hpclaunch render --preset 1n2g --strategy ddp -- --model tiny --max-steps 5
  hpclaunch validate --preset 2n4g --cluster daic
  hpclaunch run --preset 2n4g --strategy fsdp --cluster jsc --set profile.account=myproj
  hpclaunch run --preset 1n2g --local -- --model tiny --max-steps 20
  hpclaunch status 12345; hpclaunch logs -f 12345 --rank 0; hpclaunch cancel 12345; hpclaunch list
  hpclaunch hostlist expand 'node[01-03],gpu-a[1-2]'
  hpclaunch doctor --cluster jsc
  hpclaunch sweep --presets 1n1g,1n2g,2n2g --strategy ddp,fsdp --scaling strong -- --model tiny
  hpclaunch report sweeps/1n1g_1n2g_2n2g-ddp_fsdp-strong
  hpclaunch tune --cluster jsc --preset 2n4g --grid grid.json; hpclaunch clusters diff jsc jsc-tuned
Docs: docs/quickstart.md, docs/presets.md, docs/clusters.md)";

// Flags shared by render and validate: what to resolve.
struct SelectionFlags {
  std::string preset, cluster, strategy, project, template_file;
  bool no_project = false;
  std::vector<std::string> sets;

  void add_to(CLI::App* app) {
    app->add_option("--preset,-p", preset, "shape preset (hpclaunch presets list)");
    app->add_option("--strategy,-s", strategy, "ddp, fsdp, zero1 or zero2");
    app->add_option("--cluster,-c", cluster, "cluster profile (hpclaunch clusters list)");
    app->add_option("--set", sets, "override a key: --set shape.time=08:00:00 (repeatable)")
        ->take_all();
    app->add_option("--project", project, "project file (default: ./hpclaunch.json if present)");
    app->add_flag("--no-project", no_project, "ignore ./hpclaunch.json");
    app->add_option("--template", template_file, "mustache template (default: the built-in one)");
  }

  SpecRequest request(const std::optional<std::vector<std::string>>& trainer_args) const {
    SpecRequest r;
    if (!preset.empty()) r.preset = preset;
    if (!cluster.empty()) r.cluster = cluster;
    if (!strategy.empty()) r.strategy = strategy;
    r.sets = sets;
    if (!project.empty()) r.project_file = fs::path(project);
    r.read_project_file = !no_project;
    r.trainer_args = trainer_args;
    return r;
  }
};

std::string preset_summary_time(const json& c) {
  return c.contains("time") ? c["time"].get<std::string>() : "";
}

int int_or(const json& c, const char* key, int fallback) {
  return c.contains(key) && c[key].is_number_integer() ? c[key].get<int>() : fallback;
}

std::string str_or(const json& c, const char* key) {
  if (!c.contains(key)) return "";
  if (c[key].is_string()) return c[key].get<std::string>();
  return c[key].dump();
}

int list_presets(const Catalog& catalog, bool as_json) {
  json all = json::array();
  for (const auto& name : catalog.names(PresetKind::Shape)) {
    LoadedPreset p = catalog.load(PresetKind::Shape, name);
    const json& c = p.content;
    int nodes = int_or(c, "nodes", 0), gpn = int_or(c, "gpus_per_node", 0);
    all.push_back({{"name", name},
                   {"nodes", nodes},
                   {"gpus_per_node", gpn},
                   {"gpus", nodes * gpn},
                   {"cpus_per_gpu", int_or(c, "cpus_per_gpu", 0)},
                   {"time", preset_summary_time(c)},
                   {"description", str_or(c, "description")},
                   {"file", p.files.back()}});
  }
  if (as_json) {
    std::cout << all.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<8} {:>5} {:>9} {:>5} {:>8} {:>11}  {}\n", "PRESET", "NODES",
                           "GPUS/NODE", "GPUS", "CPUS/GPU", "TIME", "DESCRIPTION");
  for (const auto& p : all) {
    std::cout << fmt::format("{:<8} {:>5} {:>9} {:>5} {:>8} {:>11}  {}\n",
                             p["name"].get<std::string>(), p["nodes"].get<int>(),
                             p["gpus_per_node"].get<int>(), p["gpus"].get<int>(),
                             p["cpus_per_gpu"].get<int>(), p["time"].get<std::string>(),
                             comment_text(p["description"].get<std::string>()));
  }
  std::cout << "Strategies: ddp, fsdp, zero1, zero2 (--strategy). Details: hpclaunch presets show NAME\n";
  return 0;
}

int list_clusters(const Catalog& catalog, bool as_json) {
  json all = json::array();
  for (const auto& name : catalog.names(PresetKind::Cluster)) {
    LoadedPreset p = catalog.load(PresetKind::Cluster, name);
    const json& c = p.content;
    all.push_back({{"name", name},
                   {"gpu_request", str_or(c, "gpu_request")},
                   {"max_gpus_per_node", int_or(c, "max_gpus_per_node", 0)},
                   {"ib_suffix", str_or(c, "ib_suffix")},
                   {"description", str_or(c, "description")},
                   {"file", p.files.back()}});
  }
  if (as_json) {
    std::cout << all.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<14} {:<14} {:>8} {:>9}  {}\n", "CLUSTER", "GPU REQUEST",
                           "MAX GPUS", "IB SUFFIX", "DESCRIPTION");
  for (const auto& c : all) {
    std::string req = c["gpu_request"].get<std::string>();
    std::cout << fmt::format("{:<14} {:<14} {:>8} {:>9}  {}\n", c["name"].get<std::string>(),
                             req.empty() ? "gpus-per-node" : req,
                             c["max_gpus_per_node"].get<int>(),
                             comment_text(c["ib_suffix"].get<std::string>()),
                             comment_text(c["description"].get<std::string>()));
  }
  return 0;
}

int show_preset(const Catalog& catalog, PresetKind kind, const std::string& name, bool as_json) {
  LoadedPreset p = catalog.load(kind, name);
  if (as_json) {
    std::cout << json{{"name", name}, {"content", p.content}, {"files", p.files}}.dump(2) << "\n";
    return 0;
  }
  std::cout << "# " << kind_noun(kind) << " " << name << " from";
  for (const auto& f : p.files) std::cout << " " << f;
  std::cout << "\n" << p.content.dump(2) << "\n";
  if (kind == PresetKind::Cluster && p.content.contains("tuning")) {
    std::cout << "\n";
    for (const auto& line : describe_tuning(p.content["tuning"])) std::cout << line << "\n";
  }
  return 0;
}

// Flags that choose where jobs go (run, submit) or where to find them (status, logs, ...).
struct BackendFlags {
  std::string backend, host, ssh_config, known_hosts, runs_dir = "runs",
      remote_runs_dir = "~/hpclaunch-runs";
  bool local = false, accept_new_host_key = false;

  void add_to(CLI::App* app, bool submitting) {
    if (submitting) {
      app->add_option("--backend", backend, "slurm (sbatch here), ssh (--host) or local (no Slurm)")
          ->check(CLI::IsMember({"slurm", "ssh", "local"}));
      app->add_flag("--local", local, "run on this machine without Slurm (= --backend local)");
      app->add_option("--host", host, "submit over SSH to this login node (host or ~/.ssh/config alias)");
      app->add_flag("--accept-new-host-key", accept_new_host_key,
                    "trust and record an unknown SSH host key (a changed key is always refused)");
      app->add_option("--remote-runs-dir", remote_runs_dir,
                      "ssh: run directories on the login node (default ~/hpclaunch-runs)");
    }
    app->add_option("--ssh-config", ssh_config, "SSH config file (default ~/.ssh/config)");
    app->add_option("--known-hosts", known_hosts, "known_hosts file (default ~/.ssh/known_hosts)");
    app->add_option("--runs-dir", runs_dir, "where run directories are kept (default ./runs)");
  }

  BackendChoice choice() const {
    BackendChoice c;
    c.kind = backend;
    if (local) c.kind = "local";
    if (!host.empty() && c.kind.empty()) c.kind = "ssh";
    c.host = host;
    c.ssh_config = ssh_config;
    c.known_hosts = known_hosts;
    c.accept_new_host_key = accept_new_host_key;
    c.runs_dir = runs_dir;
    c.remote_runs_dir = remote_runs_dir;
    return c;
  }
};

// Runs a checker (bash -n, shellcheck) through the launcher's own subprocess runner; returns
// (exit status, what it printed on either stream).
std::pair<int, std::string> run_checker(const std::vector<std::string>& argv) {
  CommandResult r = run_command(argv);
  if (!r.spawn_error.empty()) return {-1, r.summary(argv.front())};
  return {r.exit_code >= 0 ? r.exit_code : 128 + r.term_signal, r.out + r.err};
}

std::string first_line(const std::string& text) {
  auto nl = text.find('\n');
  return comment_text(text.substr(0, nl));
}

// Who is to blame for a finding on a script line: a verbatim profile.setup line is the
// user's own shell; anything else comes from the template.
struct Blame {
  std::string where;  // template file, or the file that set profile.setup
  std::string fix;
};

Blame blame_for_line(const std::string& line_text, const Spec* spec, const std::string& template_origin) {
  if (spec) {
    for (const auto& setup : spec->profile.setup) {
      if (!setup.empty() && line_text == setup) {
        auto it = spec->sources.find("profile.setup");
        std::string from = it == spec->sources.end() ? "profile.setup" : it->second + ": profile.setup";
        return {from, "fix that setup line (it is copied into the script verbatim)"};
      }
    }
  }
  return {template_origin, "fix the template or the value it renders there"};
}

std::string script_line(const std::string& script, long number) {
  size_t start = 0;
  for (long i = 1; i < number && start != std::string::npos; ++i) {
    start = script.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start == std::string::npos) return "";
  return script.substr(start, script.find('\n', start) - start);
}

// bash -n and shellcheck on a script. Throws UserError on findings, naming the script's line
// and whom to blame. SC1091 (a sourced file shellcheck cannot see here, e.g. a venv on the
// cluster) is not a finding.
std::vector<std::string> check_script(const fs::path& script, const std::string& text,
                                      const Spec* spec, const std::string& template_origin) {
  std::vector<std::string> done;
  auto report = [&](const std::string& tool, const std::string& output) {
    // "FILE:LINE:COL: level: message [SCnnnn]" (gcc format) or "FILE: line N: message" (bash)
    static const std::regex gcc(R"(^[^:]*:(\d+):\d+: (.*)$)");
    static const std::regex bash_fmt(R"(^[^:]*: line (\d+): (.*)$)");
    std::string first = output.substr(0, output.find('\n'));
    std::smatch m;
    if (std::regex_match(first, m, gcc) || std::regex_match(first, m, bash_fmt)) {
      long number = std::stol(m[1]);
      std::string line_text = script_line(text, number);
      Blame b = blame_for_line(line_text, spec, template_origin);
      throw UserError(b.where, tool + " at script line " + std::to_string(number) + " (" +
                                   comment_text(line_text) + "): " + comment_text(m[2].str()),
                      b.fix);
    }
    throw UserError(template_origin, tool + ": " + comment_text(first),
                    "fix the template or the value it renders there");
  };
  auto [bash_status, bash_out] = run_checker({"bash", "-n", script.string()});
  if (bash_status != 0) report("bash -n", bash_out);
  done.push_back("bash -n");
  if (program_on_path("shellcheck")) {
    auto [sc_status, sc_out] =
        run_checker({"shellcheck", "-f", "gcc", "--exclude=SC1091", script.string()});
    if (sc_status != 0) report("shellcheck", sc_out);
    done.push_back("shellcheck");
  } else {
    done.push_back("no shellcheck (not installed)");
  }
  return done;
}

struct Rendered {
  Spec spec;
  std::string script;
  std::string template_origin;
};

Rendered render_selection(const SelectionFlags& flags,
                          const std::optional<std::vector<std::string>>& trainer_args,
                          const std::vector<std::string>& command) {
  Catalog catalog = Catalog::from_environment();
  Rendered r;
  r.spec = resolve_spec(catalog, flags.request(trainer_args));
  fs::path tmpl = flags.template_file.empty() ? catalog.default_template() : fs::path(flags.template_file);
  ScriptTemplate t = ScriptTemplate::from_file(tmpl);
  r.template_origin = t.origin();
  r.script = t.render(r.spec, RenderContext{kVersion, command});
  return r;
}

}  // namespace

int run_cli(const std::vector<std::string>& raw_args) {
  // Everything after the first bare "--" goes to hpctrain untouched.
  std::vector<std::string> args;
  std::optional<std::vector<std::string>> trainer_args;
  for (size_t i = 0; i < raw_args.size(); ++i) {
    if (i > 0 && raw_args[i] == "--" && !trainer_args) {
      trainer_args.emplace(raw_args.begin() + static_cast<long>(i) + 1, raw_args.end());
      break;
    }
    args.push_back(raw_args[i]);
  }
  // The header records how the script was made, without the build directory's path.
  std::vector<std::string> command = raw_args;
  if (!command.empty()) command[0] = "hpclaunch";

  CLI::App app{"hpclaunch: declarative presets and cluster profiles -> reviewed sbatch scripts",
               "hpclaunch"};
  app.footer(kExamples);
  app.set_version_flag("--version", std::string("hpclaunch ") + kVersion);
  app.require_subcommand(1);

  bool as_json = false;
  std::string name;

  auto* presets = app.add_subcommand("presets", "list or show shape presets (nodes x GPUs)");
  presets->require_subcommand(0, 1);
  auto* presets_list = presets->add_subcommand("list", "list presets (the default)");
  auto* presets_show = presets->add_subcommand("show", "show one preset, resolved");
  presets_show->add_option("NAME", name, "preset name")->required();
  for (auto* c : {presets, presets_list, presets_show}) c->add_flag("--json", as_json, "JSON output");

  auto* clusters = app.add_subcommand("clusters", "list or show cluster profiles");
  clusters->require_subcommand(0, 1);
  auto* clusters_list = clusters->add_subcommand("list", "list cluster profiles (the default)");
  auto* clusters_show = clusters->add_subcommand("show", "show one cluster profile, resolved");
  clusters_show->add_option("NAME", name, "cluster name")->required();
  for (auto* c : {clusters, clusters_list, clusters_show}) c->add_flag("--json", as_json, "JSON output");
  std::string diff_a, diff_b;
  auto* clusters_diff = clusters->add_subcommand("diff", "resolved values that differ between two cluster profiles");
  clusters_diff->add_option("A", diff_a, "cluster profile")->required();
  clusters_diff->add_option("B", diff_b, "cluster profile (e.g. A-tuned)")->required();

  SelectionFlags render_flags;
  std::string output, spec_out;
  auto* render = app.add_subcommand(
      "render", "print or write the batch script; arguments after -- go to hpctrain");
  render_flags.add_to(render);
  render->add_option("-o,--output", output, "write the script here (atomically) instead of stdout");
  render->add_option("--spec-out", spec_out, "also write the resolved spec (JSON) here");
  render->footer(
      "Example: hpclaunch render --preset 1n2g --strategy ddp -o job.sbatch -- --model tiny "
      "--max-steps 5");

  SelectionFlags validate_flags;
  std::string script_file;
  auto* validate = app.add_subcommand(
      "validate", "check the merged spec and the rendered script (bash -n, shellcheck)");
  validate_flags.add_to(validate);
  validate->add_option("--script", script_file, "check this script file instead of rendering one");
  validate->add_flag("--json", as_json, "print the resolved spec as JSON");

  SelectionFlags run_flags;
  BackendFlags run_backend;
  RunOptions run_options;
  int rank = -1;
  auto* run = app.add_subcommand(
      "run", "render, submit and follow a job until it ends; arguments after -- go to hpctrain");
  run_flags.add_to(run);
  run_backend.add_to(run, true);
  run->add_flag("--cancel-on-interrupt", run_options.cancel_on_interrupt,
                "Ctrl-C cancels the job (default: detach and leave it running)");
  run->add_option("--rank", rank, "stream only this rank's lines");
  run->footer("Example: hpclaunch run --preset 1n2g --strategy ddp --local -- --model tiny --max-steps 20");

  SelectionFlags submit_flags;
  BackendFlags submit_backend;
  auto* submit = app.add_subcommand("submit", "render and submit; prints the job id");
  submit_flags.add_to(submit);
  submit_backend.add_to(submit, true);

  BackendFlags job_backend;
  std::string job;
  bool follow_logs = false, with_state = false;
  auto* status = app.add_subcommand("status", "state, reason, nodes, elapsed, exit code, requeues");
  status->add_option("JOB", job, "job id or run directory name")->required();
  status->add_flag("--json", as_json, "JSON output");
  job_backend.add_to(status, false);
  auto* logs = app.add_subcommand("logs", "print a job's output; -f follows it until it ends");
  logs->add_option("JOB", job, "job id or run directory name")->required();
  logs->add_flag("-f,--follow", follow_logs, "keep streaming until the job ends");
  logs->add_option("--rank", rank, "only this rank's lines");
  job_backend.add_to(logs, false);
  auto* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("JOB", job, "job id or run directory name")->required();
  job_backend.add_to(cancel, false);
  auto* list = app.add_subcommand("list", "past runs under ./runs");
  list->add_flag("--json", as_json, "JSON output");
  list->add_flag("--state", with_state, "ask the scheduler for each run's state");
  job_backend.add_to(list, false);

  auto* hostlist = app.add_subcommand("hostlist", "expand or compress Slurm host lists");
  hostlist->require_subcommand(1);
  std::string expr;
  std::vector<std::string> hosts;
  auto* expand = hostlist->add_subcommand("expand", "one host per line, like scontrol show hostnames");
  expand->add_option("EXPR", expr, "host list, e.g. 'node[01-03,7]'")->required();
  expand->add_flag("--json", as_json, "JSON array");
  auto* compress = hostlist->add_subcommand("compress", "hosts -> compact expression");
  compress->add_option("HOST", hosts, "host names (in order)")->required();

  // Scaling sweeps (launcher/sweep.h, docs/sweeps.md).
  SweepConfig sweep_cli;
  std::string sweep_file, sweep_presets, sweep_strategies, report_dir;
  BackendFlags sweep_backend;
  auto* sweep = app.add_subcommand(
      "sweep", "submit one job per preset x strategy, measure tokens/s, write speedup plots; "
               "arguments after -- go to hpctrain");
  std::vector<CLI::Option*> sweep_opts = {
      sweep->add_option("--file,-f", sweep_file, "sweep file (JSON with comments; examples/sweeps/)"),
      sweep->add_option("--presets", sweep_presets, "shape presets, comma-separated: 1n1g,1n2g,2n2g"),
      sweep->add_option("--strategy,--strategies,-s", sweep_strategies, "strategies, comma-separated: ddp,fsdp"),
      sweep->add_option("--scaling", sweep_cli.scaling, "strong (global batch fixed) or weak (per-GPU batch fixed)"),
      sweep->add_option("--steps", sweep_cli.steps, "training steps per point (--max-steps)"),
      sweep->add_option("--cluster,-c", sweep_cli.cluster, "cluster profile"),
      sweep->add_option("--max-concurrent,-j", sweep_cli.max_concurrent, "points in flight at once (default 1)"),
      sweep->add_option("--warmup-steps", sweep_cli.warmup_steps, "steps dropped before averaging (default max(3, 20%))"),
      sweep->add_option("--start-timeout", sweep_cli.start_timeout_s, "seconds a point may wait to start before it is cancelled (default 600)"),
      sweep->add_option("--out,-o", sweep_cli.out_dir, "sweep directory (default sweeps/PRESETS-STRATEGIES-SCALING); re-running resumes it"),
      sweep->add_option("--set", sweep_cli.sets, "override a key for every point (repeatable)")->take_all(),
      sweep->add_option("--project", sweep_cli.project, "project file (default: ./hpclaunch.json if present)"),
      sweep->add_flag("--no-project", sweep_cli.no_project, "ignore ./hpclaunch.json"),
      sweep->add_option("--template", sweep_cli.template_file, "mustache template (default: the built-in one)"),
      sweep->add_option("--poll", sweep_cli.poll_interval_s, "seconds between state checks (default 1)")};
  sweep_backend.add_to(sweep, true);
  sweep->footer("Example: hpclaunch sweep --presets 1n1g,1n2g --strategy ddp --local --steps 20 -- --model tiny");
  std::string doctor_cluster;
  auto* doctor = app.add_subcommand(
      "doctor", "on a node or in a job: GPU topology, InfiniBand, interfaces, MASTER_ADDR, Slurm");
  doctor->add_option("--cluster,-c", doctor_cluster, "cluster profile whose ib_suffix and gpu_request to check");
  doctor->add_flag("--json", as_json, "one JSON document");

  // NCCL tuning (launcher/tune.h, docs/tuning.md).
  TuneConfig tune_config;
  BackendFlags tune_backend;
  auto* tune = app.add_subcommand(
      "tune", "one all-reduce benchmark job per candidate set of NCCL variables; writes the winner as "
              "a cluster profile NAME-tuned; arguments after -- go to hpctrain bench-allreduce");
  tune->add_option("--cluster,-c", tune_config.cluster, "cluster profile to tune (default: the spec's)");
  tune->add_option("--preset,-p", tune_config.preset, "shape preset the benchmark runs on (default 2n4g)");
  tune->add_option("--grid,-g", tune_config.grid_file, "grid file (JSON with comments; docs/tuning.md); default: ALGO x PROTO x P2P");
  tune->add_option("--name", tune_config.name, "the tuned profile's name (default CLUSTER-tuned)");
  tune->add_flag("--force", tune_config.force, "replace an existing tuned profile of that name");
  tune->add_option("--max-candidates", tune_config.max_candidates, "refuse grids with more candidates (default 32)");
  tune->add_option("--max-concurrent,-j", tune_config.max_concurrent, "candidates in flight at once (default 1)");
  tune->add_option("--timeout", tune_config.timeout_s, "seconds one candidate may run: its time limit, a hang is reported (default 600)");
  tune->add_option("--start-timeout", tune_config.start_timeout_s, "seconds a candidate may wait to start (default 600)");
  tune->add_option("--min", tune_config.min_size, "smallest all-reduce size (default 1M)");
  tune->add_option("--max", tune_config.max_size, "largest all-reduce size (default 1G)");
  tune->add_option("--iters", tune_config.iters, "timed all-reduces per size (default 20)");
  tune->add_option("--set", tune_config.sets, "override a key for every candidate (repeatable)")->take_all();
  tune->add_option("--project", tune_config.project, "project file (default: ./hpclaunch.json if present)");
  tune->add_flag("--no-project", tune_config.no_project, "ignore ./hpclaunch.json");
  tune->add_option("--template", tune_config.template_file, "mustache template (default: the built-in one)");
  tune->add_option("--poll", tune_config.poll_interval_s, "seconds between state checks (default 1)");
  tune_backend.add_to(tune, true);
  tune->footer("Example: hpclaunch tune --cluster jsc --preset 2n4g --grid grid.json --set profile.account=myproj");

  auto* report = app.add_subcommand("report", "re-render a sweep's summary.md and plots from its results.csv");
  report->add_option("DIR", report_dir, "the sweep directory")->required();

  // A mistyped verb: name it and suggest the closest one (CLI11 only says one is required).
  if (args.size() > 1 && !args[1].empty() && args[1][0] != '-') {
    std::vector<std::string> verbs;
    for (const auto* sub : app.get_subcommands({})) verbs.push_back(sub->get_name());
    if (std::find(verbs.begin(), verbs.end(), args[1]) == verbs.end()) {
      std::cerr << "hpclaunch: error: unknown command \"" << comment_text(args[1]) << "\"; "
                << suggest_fix(args[1], verbs, "commands") << std::endl;
      return kExitUsage;
    }
  }
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "hpclaunch: error: " << first_line(e.what())
              << "; see hpclaunch --help" << std::endl;
    return kExitUsage;
  }
  if (trainer_args && !render->parsed() && !run->parsed() && !submit->parsed() && !sweep->parsed() &&
      !tune->parsed()) {
    std::cerr << "hpclaunch: error: --: arguments after -- are for hpctrain and only go with "
                 "render, run, submit, sweep and tune; remove them or use one of those"
              << std::endl;
    return kExitUsage;
  }

  try {
    if (presets->parsed()) {
      Catalog catalog = Catalog::from_environment();
      if (presets_show->parsed()) return show_preset(catalog, PresetKind::Shape, name, as_json);
      return list_presets(catalog, as_json);
    }
    if (clusters->parsed()) {
      Catalog catalog = Catalog::from_environment();
      if (clusters_show->parsed()) return show_preset(catalog, PresetKind::Cluster, name, as_json);
      if (clusters_diff->parsed()) {
        auto lines = diff_cluster_profiles(resolved_cluster_profile(catalog, diff_a),
                                           resolved_cluster_profile(catalog, diff_b));
        std::cout << "clusters diff " << diff_a << " " << diff_b << " (resolved values, " << diff_a << " -> "
                  << diff_b << "):\n";
        if (lines.empty()) std::cout << "  no differences\n";
        for (const auto& line : lines) std::cout << "  " << line << "\n";
        return 0;
      }
      return list_clusters(catalog, as_json);
    }
    if (render->parsed()) {
      Rendered r = render_selection(render_flags, trainer_args, command);
      // Check both destinations before writing either, so a bad path leaves nothing behind.
      for (const auto& path : {output, spec_out}) {
        if (path.empty()) continue;
        fs::path parent = fs::path(path).parent_path();
        std::error_code ec;
        if (!parent.empty() && fs::exists(parent, ec) && !fs::is_directory(parent, ec)) {
          throw UserError(path, "cannot write output: " + parent.string() + " is not a directory",
                          "choose a path inside a directory");
        }
        if (!parent.empty() && !fs::is_directory(parent, ec)) {
          throw UserError(path, "cannot write output: directory " + parent.string() +
                                    " does not exist",
                          "create it first");
        }
        if (fs::is_directory(path, ec)) {
          throw UserError(path, "is a directory", "give a file name for the output");
        }
      }
      if (!output.empty()) write_file_atomically(output, r.script, 0755);
      if (!spec_out.empty()) {
        try {
          write_file_atomically(spec_out, r.spec.canonical_json());
        } catch (...) {
          if (!output.empty()) fs::remove(output);  // both or neither
          throw;
        }
      }
      if (output.empty()) {
        std::cout << r.script;
      } else {
        std::cerr << "hpclaunch: wrote " << output << " (" << r.spec.preset << " on "
                  << r.spec.cluster << ", " << r.spec.world_size() << " ranks, "
                  << r.spec.strategy << ")\n";
      }
      return 0;
    }
    if (validate->parsed()) {
      if (!script_file.empty()) {
        std::error_code ec;
        if (!fs::is_regular_file(script_file, ec)) {
          throw UserError(script_file, "no such script file", "check the path");
        }
        auto checks = check_script(script_file, read_text_file(script_file, "script"), nullptr,
                                   script_file);
        std::cout << "ok: " << script_file;
        for (const auto& c : checks) std::cout << ", " << c;
        std::cout << "\n";
        return 0;
      }
      Rendered r = render_selection(validate_flags, std::nullopt, command);
      char tmpl[] = "/tmp/hpclaunch-validate-XXXXXX";
      int fd = mkstemp(tmpl);
      if (fd < 0) throw std::runtime_error("cannot create a temp file in /tmp");
      close(fd);
      std::vector<std::string> checks;
      try {
        write_file_atomically(tmpl, r.script, 0600);
        checks = check_script(tmpl, r.script, &r.spec, r.template_origin);
      } catch (...) {
        unlink(tmpl);
        throw;
      }
      unlink(tmpl);
      if (as_json) {
        std::cout << json{{"spec", r.spec.resolved}, {"sources", r.spec.sources},
                          {"files", r.spec.files}, {"hash", r.spec.hash()}}
                         .dump(2)
                  << "\n";
        return 0;
      }
      auto plural = [](int n, const char* word) {
        return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
      };
      std::cout << fmt::format("ok: preset {} on cluster {}, strategy {}: {} x {} = {}\n",
                               r.spec.preset, r.spec.cluster, r.spec.strategy,
                               plural(r.spec.shape.nodes, "node"),
                               plural(r.spec.shape.gpus_per_node, "GPU"),
                               plural(r.spec.world_size(), "rank"));
      std::cout << "spec sha256 " << r.spec.hash() << " from:";
      for (const auto& f : r.spec.files) std::cout << " " << f;
      std::cout << "\nscript: " << r.template_origin;
      std::cout << " passes";
      for (size_t i = 0; i < checks.size(); ++i) std::cout << (i ? ", " : " ") << checks[i];
      std::cout << "\n";
      return 0;
    }
    if (run->parsed() || submit->parsed()) {
      const SelectionFlags& flags = run->parsed() ? run_flags : submit_flags;
      const BackendFlags& backend = run->parsed() ? run_backend : submit_backend;
      Rendered r = render_selection(flags, trainer_args, command);
      if (rank >= 0) run_options.rank = rank;
      run_options.follow = run->parsed();
      return submit_and_follow(r.spec, r.script, backend.choice(), command, run_options);
    }
    if (sweep->parsed()) {
      SweepConfig config;
      if (!sweep_file.empty()) config = read_sweep_file(sweep_file);
      // The command line wins over the file, flag by flag.
      SweepConfig given = sweep_cli;
      if (sweep_opts[1]->count()) config.presets = split_comma_list(sweep_presets);
      if (sweep_opts[2]->count()) config.strategies = split_comma_list(sweep_strategies);
      if (sweep_opts[3]->count()) config.scaling = given.scaling;
      if (sweep_opts[4]->count()) config.steps = given.steps;
      if (sweep_opts[5]->count()) config.cluster = given.cluster;
      if (sweep_opts[6]->count()) config.max_concurrent = given.max_concurrent;
      if (sweep_opts[7]->count()) config.warmup_steps = given.warmup_steps;
      if (sweep_opts[8]->count()) config.start_timeout_s = given.start_timeout_s;
      if (sweep_opts[9]->count()) config.out_dir = given.out_dir;
      config.sets.insert(config.sets.end(), given.sets.begin(), given.sets.end());
      if (sweep_opts[11]->count()) config.project = given.project;
      if (given.no_project) config.no_project = true;
      if (sweep_opts[13]->count()) config.template_file = given.template_file;
      if (sweep_opts[14]->count()) config.poll_interval_s = given.poll_interval_s;
      if (trainer_args) config.trainer_args.insert(config.trainer_args.end(), trainer_args->begin(), trainer_args->end());
      return run_sweep(config, sweep_backend.choice(), command);
    }
    if (tune->parsed()) {
      if (trainer_args) tune_config.bench_args = *trainer_args;
      return run_tune(tune_config, tune_backend.choice(), command);
    }
    if (report->parsed()) return report_sweep_dir(report_dir);
    if (doctor->parsed()) return run_doctor(doctor_cluster, as_json);
    if (status->parsed()) return show_status(job, job_backend.choice(), as_json);
    if (logs->parsed()) {
      return show_logs(job, job_backend.choice(), follow_logs,
                       rank >= 0 ? std::optional<int>(rank) : std::nullopt);
    }
    if (cancel->parsed()) return cancel_job(job, job_backend.choice());
    if (list->parsed()) return list_jobs(job_backend.choice(), as_json, with_state);
    if (expand->parsed()) {
      auto list = HostList::expand(expr);
      if (as_json) {
        std::cout << json(list).dump() << "\n";
      } else {
        for (const auto& h : list) std::cout << h << "\n";
      }
      return 0;
    }
    if (compress->parsed()) {
      std::cout << HostList::compress(hosts) << "\n";
      return 0;
    }
  } catch (const UserError& e) {
    // One line: a value's newline is shown as \n, never allowed to split the message.
    std::cerr << "hpclaunch: error: " << comment_text(e.what()) << std::endl;
    return kExitUsage;
  } catch (const BackendError& e) {
    // Unreachable cluster, refused submission: nothing was submitted (or it was cancelled).
    std::cerr << "hpclaunch: error: " << comment_text(e.what()) << std::endl;
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "hpclaunch: internal error: " << first_line(e.what())
              << " (please report it)" << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace hpc
