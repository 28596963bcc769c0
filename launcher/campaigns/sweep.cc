#include "campaigns/sweep.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <csignal>
#include <ctime>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "backends/host.h"
#include "campaigns/plot.h"
#include "campaigns/pool.h"
#include "campaigns/sweep_axes.h"
#include "campaigns/sweep_dir.h"
#include "version.h"
#include "error.h"
#include "follow/follow.h"
#include "follow/goodput_report.h"
#include "input_file.h"
#include "json_file.h"
#include "render/render.h"
#include "shell.h"
#include "sha256.h"
#include "spec/catalog.h"
#include "spec/spec.h"
#include "spec/suggest.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

// A point's run in sweep.json: its name and repeat ("1n2g-ddp#2").
std::string point_key(const std::string& name, int repeat) {
  return name + "#" + std::to_string(repeat);
}

// The series a sweep compares: their names in results.csv and the plots (hpctrain's strategies,
// or the launch mode of a user's program) and the strategy each one asks the spec for.
struct SweepSeries {
  std::vector<std::string> labels, strategies;
  bool hpctrain = true;
};

// One point and its job, as kept in sweep.json.
struct Point {
  std::string preset, strategy;
  std::string name;    // from its values: "1n2g-ddp", "1n2g-ddp-micro_batch.8"
  std::string series;  // what it is compared with in speedup: the strategy and non-shape values
  int repeat = 1;      // 1..repeats
  int nodes = 0, gpus = 0;
  PoolJob job;
  std::optional<Throughput> throughput;
  std::optional<StartPhases> startup;  // its first start's phases (results.csv)

  std::string key() const { return point_key(name, repeat); }
};

json point_json(const Point& p) {
  const PoolJob& j = p.job;
  return {
      {"point", p.name},         {"series", p.series}, {"repeat", p.repeat}, {"preset", p.preset},
      {"strategy", p.strategy},  {"nodes", p.nodes},   {"gpus", p.gpus},     {"job_id", j.job_id},
      {"run_dir", j.run_dir},    {"log", j.log},       {"state", j.state},   {"message", j.message},
      {"spec_hash", j.spec_hash}};
}

std::string str_at(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

long long_option(const std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return std::atol(args[i + 1].c_str());
    if (args[i].rfind(flag + "=", 0) == 0) return std::atol(args[i].c_str() + flag.size() + 1);
  }
  return 0;
}

std::vector<std::string> without_option(const std::vector<std::string>& args,
                                        const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind(flag + "=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

void validate(const SweepConfig& c) {
  // Each repeat is a job of every point: past this a typo, not a study (issue 35: 10^9 ended in
  // std::bad_alloc).
  constexpr int kMaxRepeats = 100;
  if (c.repeats > kMaxRepeats) {
    throw UserError("--repeats", std::to_string(c.repeats) + " is over the limit of " +
                                     std::to_string(kMaxRepeats) + " runs of each point",
                    "pass --repeats " + std::to_string(kMaxRepeats) +
                        " or fewer (3 to 5 give an error bar)");
  }
  if (c.presets.empty()) {
    throw UserError("--presets", "no presets to sweep",
                    "pass --presets 1n1g,1n2g,... or \"presets\" in the sweep file");
  }
  std::set<std::string> seen;
  for (const auto& p : c.presets) {
    if (p.empty())
      throw UserError("--presets", "an empty name in the list",
                      "separate names with single commas: 1n1g,1n2g");
    if (!seen.insert(p).second)
      throw UserError("--presets", "\"" + comment_text(p) + "\" is listed twice",
                      "list each preset once");
  }
  seen.clear();
  for (const auto& s : c.strategies) {
    if (std::find(known_strategies().begin(), known_strategies().end(), s) ==
        known_strategies().end()) {
      throw UserError("--strategy", "unknown strategy \"" + comment_text(s) + "\"",
                      suggest_fix(s, known_strategies(), "strategies"));
    }
    if (!seen.insert(s).second)
      throw UserError("--strategy", "\"" + s + "\" is listed twice", "list each strategy once");
  }
  if (c.scaling != "strong" && c.scaling != "weak") {
    throw UserError("--scaling", "unknown scaling \"" + comment_text(c.scaling) + "\"",
                    "use strong (global batch fixed) or weak (per-GPU batch fixed)");
  }
  if (c.max_concurrent < 1)
    throw UserError("--max-concurrent", "must be at least 1",
                    "pass --max-concurrent 1 to run the points one by one");
  if (c.steps < 0)
    throw UserError("--steps", "must not be negative",
                    "pass the number of training steps per point");
  if (c.start_timeout_s < 1)
    throw UserError("--start-timeout", "must be at least 1 second",
                    "pass how long a point may wait to start");
}

// The live table: redrawn in place on a terminal, a line per change otherwise.
class SweepTable {
 public:
  explicit SweepTable(std::ostream& err) : err_(err), tty_(isatty(STDERR_FILENO)) {}

  void show(const std::vector<Point>& points) {
    if (!tty_) {
      for (const auto& p : points) {
        std::string line = describe(p);
        if (last_[p.key()] == line) continue;
        last_[p.key()] = line;
        err_ << now_hms() << " sweep: " << line << "\n";
      }
      err_.flush();
      return;
    }
    if (drawn_ > 0) err_ << "\033[" << drawn_ << "A";
    err_ << "\r\033[K"
         << fmt::format("{:<24} {:>3} {:>4}  {:<14} {:<10} {:>9} {:>12}", "POINT", "RUN", "GPUS",
                        "STATE", "JOB", "ELAPSED", "TOKENS/S")
         << "\n";
    for (const auto& p : points) {
      err_ << "\r\033[K"
           << fmt::format("{:<24} {:>3} {:>4}  {:<14} {:<10} {:>9} {:>12}", p.name, p.repeat,
                          p.gpus, p.job.state, p.job.job_id.empty() ? "-" : p.job.job_id,
                          p.job.elapsed < 0 ? "-" : format_duration(p.job.elapsed),
                          p.throughput ? fmt::format("{:.1f}", p.throughput->mean) : "-")
           << "\n";
    }
    drawn_ = static_cast<int>(points.size()) + 1;
    err_.flush();
  }

 private:
  static std::string describe(const Point& p) {
    std::string s = p.name + (p.repeat > 1 ? " repeat " + std::to_string(p.repeat) : "") + " (" +
                    std::to_string(p.gpus) + (p.gpus == 1 ? " GPU): " : " GPUs): ") + p.job.state;
    if (!p.job.job_id.empty()) s += ", job " + p.job.job_id;
    if (p.throughput) s += fmt::format(", {:.1f} tokens/s", p.throughput->mean);
    if (!p.job.message.empty()) s += " - " + comment_text(p.job.message);
    return s;
  }
  std::ostream& err_;
  bool tty_;
  int drawn_ = 0;
  std::map<std::string, std::string> last_;
};

// A user's program: the last figure rank 0 printed that the sweep's regex matches.
void measure_from_log(Backend& backend, Point& p, const LogMetric& metric) {
  std::optional<std::string> text;
  try {
    text = read_backend_file(backend, p.job.log);
  } catch (const std::exception& e) {
    p.job.message = "log unreadable: " + p.job.log + ": " + printable_first_line(e.what());
    return;
  }
  if (!text) {
    p.job.message = "no log " + p.job.log;
    return;
  }
  std::optional<double> value;
  try {
    value = last_metric_value(
        metric, *text, p.job.spec.launch == "torchrun" ? SrunLabels::kNodes : SrunLabels::kRanks);
  } catch (const std::exception& e) {
    p.job.message = "metric: " + p.job.log + ": " + e.what();
    return;
  }
  if (!value) {
    p.job.message = "no line of rank 0 in " + p.job.log + " matches the metric regex \"" +
                    comment_text(metric.pattern) + "\"";
    return;
  }
  p.throughput = Throughput{*value, 0, 1, 1, 0};
  p.job.message.clear();
}

void measure(Backend& backend, Point& p, int warmup, const std::optional<LogMetric>& metric) {
  p.throughput.reset();
  try {  // the start-up budget; a missing or broken timeline leaves its columns empty
    p.startup = read_first_start(backend, p.job.run_dir, p.job.log, p.job.spec.launch,
                                 metric ? log_line_matcher(*metric) : LinePredicate());
  } catch (const std::exception&) {}
  if (metric) {
    measure_from_log(backend, p, *metric);
    return;
  }
  std::string path = p.job.run_dir + "/metrics.jsonl";
  std::optional<std::string> text;
  try {
    text = read_backend_file(backend, path);
  } catch (const std::exception& e) {
    p.job.message = "metrics unreadable: " + path + ": " + printable_first_line(e.what());
    return;
  }
  if (!text) {
    p.job.message = "no metrics file " + path + " (did the trainer run? see the log)";
    return;
  }
  try {
    p.throughput = steady_state(tokens_per_s_from_metrics(*text), warmup);
  } catch (const std::exception& e) {
    p.job.message = "metrics unreadable: " + path + ": " + e.what();
    return;
  }
  if (!p.throughput) {
    p.job.message = "no training steps in " + path;
    return;
  }
  p.job.message.clear();
}

ResultRow row_of(const Point& p) {
  ResultRow r;
  r.preset = p.preset;
  r.strategy = p.strategy;
  r.point = p.name;
  r.series = p.series;
  r.repeat = p.repeat;
  r.nodes = p.nodes;
  r.gpus = p.gpus;
  r.job_id = p.job.job_id;
  r.state = p.job.state;
  if (p.throughput) {
    r.tokens_per_s = p.throughput->mean;
    r.tokens_per_s_std = p.throughput->std;
    r.steps_used = p.throughput->steps_used;
  }
  r.run_dir = p.job.run_dir;
  r.log = p.job.log;
  r.message = p.job.message;
  if (p.startup) {
    r.startup_queue_s = p.startup->queue_s();
    r.startup_environment_s = p.startup->environment_s();
    r.startup_rendezvous_s = p.startup->rendezvous_s();
    r.startup_first_step_s = p.startup->first_step_s();
  }
  return r;
}

// The sweep's directory: --out, else sweeps/<presets>-<series>-<scaling>.
std::string sweep_out_dir(const SweepConfig& config, const SweepSeries& series) {
  if (!config.out_dir.empty()) return config.out_dir;
  return fmt::format("sweeps/{}-{}-{}", fmt::join(config.presets, "_"),
                     fmt::join(series.labels, "_"), config.scaling);
}

// The spec request of one point. `strategy` "" for a user's program (launch srun, torchrun).
SpecRequest point_request(const SweepConfig& config, const std::string& preset,
                          const std::string& strategy, std::vector<std::string> sets) {
  SpecRequest r = make_spec_request(preset, config.cluster, strategy, std::move(sets),
                                    config.project, config.no_project);
  if (!config.launch.empty()) r.launch = config.launch;
  return r;
}

// What the sweep compares: hpctrain's strategies, or, for a user's program, one series named
// after its launch mode (the program chooses its own parallelism). The mode comes from the
// layers as for `hpclaunch run` (--launch, the project file, --set launch=...).
SweepSeries sweep_series(const SweepConfig& config, const Catalog& catalog) {
  SpecRequest r = point_request(config, config.presets.front(), "", config.sets);
  r.trainer_args = config.trainer_args;
  for (const auto& axis : config.axes.axes)
    if (axis.key == "launch") r.launch = axis.values.front();  // srun or torchrun
  const std::string mode = resolve_spec(catalog, r).launch;
  if (mode == "hpctrain") {
    if (config.strategies.empty()) {
      throw UserError("--strategy", "no strategies to sweep",
                      "pass --strategy ddp[,fsdp] or \"strategies\" in the sweep file (or sweep "
                      "your own program with --launch srun|torchrun)");
    }
    return {config.strategies, config.strategies, true};
  }
  if (!config.strategies.empty()) {
    throw UserError(
        "--strategy",
        "a strategy is hpctrain's, and this sweep launches your program (launch " + mode + ")",
        "remove --strategy (and \"strategies\" from the sweep file): the sweep's one series "
        "is named " +
            mode);
  }
  if (config.steps > 0) {
    throw UserError("--steps", "--steps sets hpctrain's --max-steps, and launch is " + mode,
                    "remove --steps and give your program its own arguments after --");
  }
  return {{mode}, {""}, false};
}

// The name of the sweep's jobs and report: its directory's.
std::string sweep_name_of(const std::string& out_dir) {
  std::string name = run_dir_name(fs::path(out_dir).lexically_normal().filename().string());
  return name.empty() || name == "." ? "sweep" : name;
}

// One point before its spec: its preset, series, axis values and name.
struct PointPlan {
  std::string preset, label, strategy;  // label: the strategy, or the launch mode of a program
  AxisValues values;
  AxisEffect effect;
  std::string name, series;
  std::string shape_key() const {  // the points of one shape share their world size
    std::string k = preset;
    for (const auto& s : effect.sets)
      if (s.rfind("shape.", 0) == 0) k += "\n" + s;
    return k;
  }
};

// Every point of the sweep, named by its values: series x axis combinations x presets.
std::vector<PointPlan> plan_points(const SweepConfig& config, const SweepSeries& series) {
  std::vector<PointPlan> plans;
  const std::vector<AxisValues> combos = expand_axes(config.axes);
  std::set<std::string> names;
  for (size_t i = 0; i < series.labels.size(); ++i) {
    for (const auto& combo : combos) {
      for (const auto& preset : config.presets) {
        PointPlan p;
        p.preset = preset;
        p.values = combo;
        p.effect = axis_effect(combo);
        p.label = p.effect.launch.empty() ? series.labels[i] : p.effect.launch;
        p.strategy = series.strategies[i];
        p.name = preset + "-" + p.label;
        p.series = p.label;
        for (const auto& [key, value] : combo) {
          std::string word = "-" + axis_short_name(key) + "." + safe_value_word(value);
          p.name += word;
          if (key.rfind("shape.", 0) != 0 && key != "launch") p.series += word;
        }
        // Within a file name's 255 bytes (NAME.sbatch, the job's run directory), still distinct.
        if (p.name.size() > 200)
          p.name = p.name.substr(0, 190) + "_" + sha256_hex(p.name).substr(0, 8);
        if (p.series.size() > 200)
          p.series = p.series.substr(0, 190) + "_" + sha256_hex(p.series).substr(0, 8);
        if (!names.insert(p.name).second)
          throw UserError("axes", "two points are both named " + p.name,
                          "give the axes keys whose last words differ");
        plans.push_back(std::move(p));
      }
    }
  }
  return plans;
}

// The spec request of a planned point, with its axis values on top of the sweep's settings.
SpecRequest plan_request(const SweepConfig& config, const PointPlan& p, const std::string& job) {
  std::vector<std::string> sets;
  if (!job.empty()) sets.push_back("job.name=" + job);
  sets.insert(sets.end(), config.sets.begin(), config.sets.end());
  sets.insert(sets.end(), p.effect.sets.begin(), p.effect.sets.end());
  SpecRequest r = point_request(config, p.preset, p.strategy, std::move(sets));
  if (!p.effect.launch.empty()) r.launch = p.effect.launch;
  r.trainer_args = with_program_args(config.trainer_args, p.effect.args);
  return r;
}

// Every point resolved and rendered: a bad one stops the sweep before anything is submitted.
// The trainer's arguments of a point depend on the smallest and largest world of the sweep.
// Points come round-robin: every point's first run, then every point's second, ...
std::vector<Point> sweep_points(const SweepConfig& config, const Catalog& catalog,
                                const SweepSeries& series, const std::string& backend_kind,
                                const std::string& sweep_name,
                                const std::vector<std::string>& command, int repeats) {
  std::vector<std::string> shapes = catalog.names(PresetKind::Shape);
  for (const auto& p : config.presets) {
    if (!catalog.has(PresetKind::Shape, p)) {
      throw UserError("--presets", "unknown preset \"" + comment_text(p) + "\"",
                      suggest_fix(p, shapes, "presets"));
    }
  }
  const std::vector<PointPlan> plans = plan_points(config, series);
  std::map<std::string, int> world_of;  // by shape_key
  int smallest = 0, largest = 0;
  for (const auto& p : plans) {
    if (world_of.count(p.shape_key())) continue;
    Spec s = resolve_spec(catalog, plan_request(config, p, ""));
    check_backend_fits(backend_kind, s, "--presets");
    int w = world_of[p.shape_key()] = s.world_size();
    smallest = smallest == 0 ? w : std::min(smallest, w);
    largest = std::max(largest, w);
  }
  fs::path tmpl =
      config.template_file.empty() ? catalog.default_template() : fs::path(config.template_file);
  ScriptTemplate script_template = ScriptTemplate::from_file(tmpl);

  std::vector<Point> points;
  for (int repeat = 1; repeat <= repeats; ++repeat) {
    for (const auto& plan : plans) {
      Point p;
      p.preset = plan.preset;
      p.strategy = plan.label;
      p.name = plan.name;
      p.series = plan.series;
      p.repeat = repeat;
      std::string job = sweep_name + "-" + plan.name;
      if (repeats > 1) job += "-r" + std::to_string(repeat);
      SpecRequest r = plan_request(config, plan, job);
      // hpctrain's --max-steps and --total-batch-tokens; a user's program gets its own words.
      if (series.hpctrain)
        r.trainer_args = point_trainer_args(*r.trainer_args, config.scaling, config.steps,
                                            world_of[plan.shape_key()], smallest, largest);
      p.job.key = p.key();
      p.job.spec = resolve_spec(catalog, r);
      p.nodes = p.job.spec.shape.nodes;
      p.gpus = p.job.spec.world_size();
      p.job.script = script_template.render(p.job.spec, RenderContext{kVersion, command});
      points.push_back(std::move(p));
    }
  }
  return points;
}

// The points of an earlier run of the sweep (sweep.json), by "NAME#REPEAT".
std::map<std::string, json> read_previous_points(const fs::path& state_file) {
  std::map<std::string, json> previous;
  if (!input_path_present(state_file)) return previous;
  json s = read_json_file(state_file);
  if (!s.is_object() || !s.contains("points") || !s["points"].is_array()) {
    throw UserError(state_file.string(), "not a sweep state file (no \"points\" list)",
                    "choose another --out, or remove the file to start the sweep afresh");
  }
  for (size_t i = 0; i < s["points"].size(); ++i) {
    const json& e = s["points"][i];
    if (!e.is_object()) continue;
    // A job id from the file reaches scontrol and scancel: never "--me" or 0 (every job).
    std::string job = str_at(e, "job_id");
    if (!job.empty() && !is_job_id(job)) {
      throw UserError(state_file.string() + ": points[" + std::to_string(i) + "].job_id",
                      "\"" + comment_text(job) + "\" is not a job id (a number from 1 up)",
                      "fix it, or remove the file to start the sweep afresh");
    }
    // Written before points had names: PRESET-STRATEGY, one repeat.
    std::string name = str_at(e, "point");
    if (name.empty()) name = str_at(e, "preset") + "-" + str_at(e, "strategy");
    int repeat =
        e.contains("repeat") && e["repeat"].is_number_integer() ? e["repeat"].get<int>() : 1;
    previous[point_key(name, repeat)] = e;
  }
  return previous;
}

// Points an earlier run finished (COMPLETED: kept) or left running (adopted: followed, not
// resubmitted), when their spec is unchanged; failed points run again.
void adopt_previous_points(std::vector<Point>& points, const std::map<std::string, json>& previous,
                           int& kept, int& adopted) {
  for (auto& p : points) {
    auto it = previous.find(p.key());
    if (it == previous.end()) continue;
    const json& e = it->second;
    std::string hash = str_at(e, "spec_hash"), state = str_at(e, "state"),
                job = str_at(e, "job_id");
    if (job.empty() || hash != p.job.spec.hash()) {
      if (!job.empty()) {
        std::cerr << "hpclaunch: sweep: " << p.key() << ": the spec changed since job " << job
                  << "; submitting it again\n";
      }
      continue;
    }
    bool finished = state == "COMPLETED";
    bool in_flight = !is_terminal_state(state) && state != "START_TIMEOUT" && state != "HUNG" &&
                     state != "NOT_SUBMITTED";
    if (!finished && !in_flight) continue;  // failed before: try again
    p.job.job_id = job;
    p.job.run_dir = str_at(e, "run_dir");
    p.job.log = str_at(e, "log");
    p.job.state = state;
    p.job.spec_hash = hash;
    p.job.message = str_at(e, "message");
    p.job.waiting_since = p.job.running_since = PoolClock::now();
    p.job.started = state != "PENDING";
    if (finished)
      ++kept;
    else
      ++adopted;
  }
}

}  // namespace

std::vector<std::string> point_trainer_args(const std::vector<std::string>& args,
                                            const std::string& scaling, long steps, int world,
                                            int smallest_world, int largest_world) {
  std::vector<std::string> out = args;
  if (steps > 0) {
    out = without_option(out, "--max-steps");
    out.push_back("--max-steps");
    out.push_back(std::to_string(steps));
  }
  long given = long_option(args, "--total-batch-tokens");
  long per_step = long_option(args, "--micro-batch") * long_option(args, "--seq-len");
  long total = 0;
  if (scaling == "strong") {
    total = given > 0 ? given : per_step * largest_world;  // 0: the trainer's default, fixed anyway
  } else {
    long base = given > 0 ? given : per_step > 0 ? per_step * smallest_world : 524288;
    total = base * world / std::max(1, smallest_world);
  }
  if (total > 0) {
    out = without_option(out, "--total-batch-tokens");
    out.push_back("--total-batch-tokens");
    out.push_back(std::to_string(total));
  }
  return out;
}

int run_sweep(const SweepConfig& config, const BackendChoice& choice,
              const std::vector<std::string>& command, Backend* given_backend) {
  validate(config);
  Catalog catalog = Catalog::from_environment();
  const SweepSeries series = sweep_series(config, catalog);
  const std::string out_dir = sweep_out_dir(config, series);
  check_sweep_dir(out_dir);
  check_sweep_size(config.axes, config.presets.size(), series.labels.size(), config.repeats);
  const std::string sweep_name = sweep_name_of(out_dir);
  const std::string backend_kind = given_backend ? given_backend->kind() : choice.kind;
  std::vector<Point> points = sweep_points(config, catalog, series, backend_kind, sweep_name,
                                           command, config.dry_run ? 1 : config.repeats);
  if (config.dry_run) {
    std::vector<std::pair<std::string, std::string>> scripts;
    for (const auto& p : points) scripts.emplace_back(p.name, p.job.script);
    write_sweep_scripts(out_dir, scripts);
    std::cout << points.size() << " point" << (points.size() == 1 ? "" : "s") << " rendered into "
              << (fs::path(out_dir) / "scripts").string() << "/ (nothing submitted)\n";
    return 0;
  }

  // The sweep directory and its state: points already finished are kept, not resubmitted.
  fs::path dir = out_dir;
  std::error_code ec;
  fs::path state_file = dir / "sweep.json";
  std::map<std::string, json> previous = read_previous_points(state_file);
  for (const auto& p : points)
    check_env_from_submit(p.job.spec);  // names set here, before any write
  std::unique_ptr<Backend> made;
  if (!given_backend)
    made = make_backend(choice);  // fails (unreachable host, no sbatch) before any write
  Backend* backend = given_backend ? given_backend : made.get();
  fs::create_directories(dir, ec);
  if (ec)
    throw UserError(out_dir, "cannot create the sweep directory: " + ec.message(),
                    "check the path and permissions");

  int kept = 0, adopted = 0;
  adopt_previous_points(points, previous, kept, adopted);

  auto save_state = [&]() {
    json s = {{"version", 1},
              {"hpclaunch_version", kVersion},
              {"scaling", config.scaling},
              {"presets", config.presets},
              {"strategies", series.labels},
              {"repeats", config.repeats},
              {"command", command},
              {"updated_at", utc_now_iso8601()},
              {"points", json::array()}};
    for (const auto& p : points) s["points"].push_back(point_json(p));
    write_file_atomically(state_file, s.dump(2) + "\n");
  };
  auto save_results = [&]() {
    std::vector<ResultRow> rows;
    for (const auto& p : points) rows.push_back(row_of(p));
    compute_scaling(rows);
    write_file_atomically(dir / "results.csv", results_csv(rows));
    return rows;
  };

  int warmup = config.warmup_steps;
  for (auto& p : points)
    if (p.job.state == "COMPLETED") measure(*backend, p, warmup, config.metric);
  save_state();
  std::cerr << fmt::format(
      "hpclaunch: sweep {}: {} point{} ({} scaling) via {}; {} finished before, {} still running, "
      "{} to submit; at most {} at once\n",
      dir.string(), points.size(), points.size() == 1 ? "" : "s", config.scaling, backend->kind(),
      kept, adopted, points.size() - kept - adopted, config.max_concurrent);

  SweepTable table(std::cerr);
  std::vector<PoolJob*> jobs;
  for (auto& p : points) jobs.push_back(&p.job);
  PoolLimits limits;
  limits.max_concurrent = config.max_concurrent;
  limits.start_timeout_s = config.start_timeout_s;
  limits.poll_interval_s = config.poll_interval_s;
  limits.requeue_settle_s = config.requeue_settle_s;
  PoolHooks hooks;
  hooks.completed = [&](PoolJob& j) {
    for (auto& p : points)
      if (&p.job == &j) measure(*backend, p, warmup, config.metric);
  };
  hooks.changed = [&]() {
    save_state();
    save_results();
  };
  hooks.show = [&]() { table.show(points); };
  bool interrupted = !run_job_pool(*backend, choice, jobs, limits, command, hooks);

  save_state();
  std::vector<ResultRow> rows = save_results();
  ReportOutcome report =
      write_report(dir, rows, "Scaling sweep " + sweep_name + " (" + config.scaling + " scaling)");
  std::cerr << "hpclaunch: sweep results in " << (dir / "results.csv").string() << ", "
            << (dir / "summary.md").string() << ", " << (dir / "plots").string() << "/\n";
  for (const auto& problem : report.problems)
    std::cerr << "hpclaunch: " << comment_text(problem) << "\n";
  int failed = 0;
  for (const auto& r : rows) {
    if (r.tokens_per_s) continue;
    ++failed;
    if (interrupted && r.state != "COMPLETED") continue;
    const std::string name = point_name_of(r);
    std::cerr << "hpclaunch: sweep point " << r.preset << "/" << r.strategy
              << (name != r.preset + "-" + r.strategy ? " (" + name + ")" : "")
              << (r.repeat > 1 ? " repeat " + std::to_string(r.repeat) : "") << ": " << r.state
              << (r.message.empty() ? "" : " - " + comment_text(r.message))
              << (r.log.empty() ? "" : " (log " + r.log + ")") << "\n";
  }
  if (interrupted) {
    std::cerr << "hpclaunch: sweep interrupted; submitted jobs go on. Run the same command again "
                 "to pick them up.\n";
    return follow_exit::kDetached;
  }
  return failed > 0 || !report.problems.empty() ? 1 : 0;
}

}  // namespace hpc
