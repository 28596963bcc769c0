#include "campaigns/tune.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <set>

#include <fmt/core.h>

#include "atomic_file.h"
#include "byte_size.h"
#include "campaigns/clusters_diff.h"
#include "campaigns/pool.h"
#include "version.h"
#include "error.h"
#include "follow/run_record.h"
#include "json_file.h"
#include "render/render.h"
#include "shell.h"
#include "spec/schema.h"
#include "spec/suggest.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

std::string today(const std::string& iso) { return iso.substr(0, 10); }

std::string gbps(double v) { return fmt::format("{:.3f}", v); }

std::string human_bytes(long long b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 4 && std::fmod(v, 1024) == 0) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{}{}", static_cast<long long>(v), units[u]);
}

json vars_json(const TuneCandidate& c) {
  json vars = json::object();
  for (const auto& [name, v] : c.vars) vars[name] = v ? json(*v) : json(nullptr);
  return vars;
}

std::string str_at(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

}  // namespace

BenchResult parse_bench_json(const std::string& text, const std::string& origin) {
  json j = parse_json_text(text, origin, "is it the --json output of hpctrain bench-allreduce?");
  BenchResult r;
  if (!j.is_object() || !j.contains("rows") || !j["rows"].is_array()) {
    throw UserError(origin, "no \"rows\" list",
                    "is it the --json output of hpctrain bench-allreduce?");
  }
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const json& row = j["rows"][i];
    if (!row.is_object() || !row.contains("size") || !row["size"].is_number_integer() ||
        !row.contains("busbw_gbps") || !row["busbw_gbps"].is_number()) {
      throw UserError(origin + ": rows[" + std::to_string(i) + "]",
                      "no integer \"size\" and number \"busbw_gbps\"",
                      "is it the --json output of hpctrain bench-allreduce?");
    }
    BusbwRow b;
    b.size = row["size"].get<long long>();
    b.busbw_gbps = row["busbw_gbps"].get<double>();
    if (row.contains("algbw_gbps") && row["algbw_gbps"].is_number())
      b.algbw_gbps = row["algbw_gbps"].get<double>();
    if (row.contains("time_us") && row["time_us"].is_number())
      b.time_us = row["time_us"].get<double>();
    r.rows.push_back(b);
  }
  if (j.contains("hostnames") && j["hostnames"].is_array())
    for (const auto& h : j["hostnames"])
      if (h.is_string()) r.hostnames.push_back(h.get<std::string>());
  r.backend = str_at(j, "backend");
  if (j.contains("world_size") && j["world_size"].is_number_integer())
    r.world_size = j["world_size"].get<int>();
  return r;
}

namespace {
// The rows the score averages over (see tune_score).
std::vector<BusbwRow> scored_rows(std::vector<BusbwRow> rows) {
  std::sort(rows.begin(), rows.end(),
            [](const BusbwRow& a, const BusbwRow& b) { return a.size < b.size; });
  std::vector<BusbwRow> large;
  for (const auto& r : rows)
    if (r.size >= kTuneLargeSize) large.push_back(r);
  if (!large.empty()) return large;
  size_t quarter = std::max<size_t>(1, (rows.size() + 3) / 4);
  if (rows.size() < quarter) return rows;
  return {rows.end() - static_cast<long>(quarter), rows.end()};
}
}  // namespace

std::optional<double> tune_score(const std::vector<BusbwRow>& rows) {
  if (rows.empty()) return std::nullopt;
  auto used = scored_rows(rows);
  double sum = 0;
  for (const auto& r : used) sum += r.busbw_gbps;
  return sum / static_cast<double>(used.size());
}

std::string tune_score_metric(const std::vector<BusbwRow>& rows) {
  auto used = scored_rows(rows);
  if (used.empty()) return "mean busbw (GB/s)";
  bool large = used.front().size >= kTuneLargeSize;
  return fmt::format("mean busbw (GB/s) over sizes {} {}..{} ({} size{})",
                     large ? ">= 64 MiB:" : "in the largest quarter (none reached 64 MiB):",
                     human_bytes(used.front().size), human_bytes(used.back().size), used.size(),
                     used.size() == 1 ? "" : "s");
}

std::vector<size_t> rank_tune_outcomes(const std::vector<TuneOutcome>& outcomes) {
  std::vector<size_t> order(outcomes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = outcomes[a].score;
    const auto& y = outcomes[b].score;
    if (x && y) return *x > *y;
    return x.has_value() && !y.has_value();
  });
  return order;
}

json tuned_profile(const std::string& cluster, const std::string& preset, const std::string& date,
                   const std::vector<TuneOutcome>& outcomes, const std::vector<size_t>& ranking,
                   const std::string& command) {
  const TuneOutcome& win = outcomes.at(ranking.at(0));
  std::string metric = win.bench ? tune_score_metric(win.bench->rows) : "mean busbw (GB/s)";
  // The winner's hosts as the benchmark saw them (one per node), else the scheduler's node list.
  std::vector<std::string> nodes;
  if (win.bench)
    for (const auto& h : win.bench->hostnames)
      if (std::find(nodes.begin(), nodes.end(), h) == nodes.end()) nodes.push_back(h);
  std::string node_text;
  for (const auto& n : nodes) node_text += (node_text.empty() ? "" : ",") + n;
  if (node_text.empty()) node_text = win.nodes.empty() ? "?" : win.nodes;
  json p = json::object();
  p["extends"] = cluster;
  p["description"] = fmt::format("{}, NCCL tuned by hpclaunch tune on {} ({}): {}", cluster,
                                 today(date), preset, win.candidate.describe());
  for (const auto& [name, value] : win.candidate.vars) {
    const char* block = name.rfind("NCCL_", 0) == 0 ? "nccl" : "env";
    if (!value) {
      p[block][name] = nullptr;  // removes the base profile's value
      continue;
    }
    // The best other measurement with a different value of this variable.
    const TuneOutcome* other = nullptr;
    const TuneOutcome* other_failed = nullptr;
    for (size_t idx : ranking) {
      const auto& o = outcomes[idx];
      auto it = std::find_if(o.candidate.vars.begin(), o.candidate.vars.end(),
                             [&](const auto& kv) { return kv.first == name; });
      TuneValue theirs = it == o.candidate.vars.end() ? TuneValue{} : it->second;
      if (theirs == value) continue;
      if (o.score) {
        other = &o;
        break;
      }
      if (!other_failed) other_failed = &o;
    }
    std::string reason = fmt::format("tune {}: busbw {} GB/s", today(date), gbps(*win.score));
    auto value_of = [&](const TuneOutcome& o) {
      for (const auto& [n, v] : o.candidate.vars)
        if (n == name) return tune_value_text(v);
      return std::string("(unset)");
    };
    if (other) {
      reason += fmt::format(" vs {} with {}={} ({})", gbps(*other->score), name, value_of(*other),
                            other->candidate.id);
    } else if (other_failed) {
      reason += fmt::format("; {}={} ({}) gave no measurement: {}", name, value_of(*other_failed),
                            other_failed->candidate.id, other_failed->state);
    } else {
      reason += "; the only value tried";
    }
    reason +=
        fmt::format(" [{} on {}, {}; winner {}]", preset, node_text, metric, win.candidate.id);
    p[block][name] = {{"value", *value}, {"reason", reason}};
  }
  json t = json::object();
  t["date"] = date;
  t["cluster"] = cluster;
  t["preset"] = preset;
  t["nodes"] = nodes;
  t["metric"] = metric;
  t["winner"] = win.candidate.id;
  t["command"] = command;
  json list = json::array();
  for (size_t rank = 0; rank < ranking.size(); ++rank) {
    const auto& o = outcomes[ranking[rank]];
    json c = {{"id", o.candidate.id}, {"rank", rank + 1},   {"vars", vars_json(o.candidate)},
              {"state", o.state},     {"job_id", o.job_id}, {"nodes", o.nodes}};
    c["score_gbps"] = o.score ? json(*o.score) : json(nullptr);
    if (!o.message.empty()) c["message"] = o.message;
    json rows = json::array();
    if (o.bench)
      for (const auto& r : o.bench->rows)
        rows.push_back({{"size", r.size},
                        {"busbw_gbps", r.busbw_gbps},
                        {"algbw_gbps", r.algbw_gbps},
                        {"time_us", r.time_us}});
    c["busbw"] = rows;
    list.push_back(c);
  }
  t["candidates"] = list;
  p["tuning"] = t;
  return p;
}

fs::path user_clusters_dir() {
  const auto dir = Catalog::user_dir();
  if (!dir) {
    throw UserError("$XDG_CONFIG_HOME", "neither XDG_CONFIG_HOME nor HOME is set",
                    "set one: tuned profiles go to $XDG_CONFIG_HOME/hpclaunch/clusters");
  }
  return *dir / "clusters";
}

std::vector<std::string> describe_tuning(const json& t) {
  std::vector<std::string> out;
  if (!t.is_object()) return out;
  std::string nodes;
  if (t.contains("nodes") && t["nodes"].is_array())
    for (const auto& n : t["nodes"])
      if (n.is_string()) nodes += (nodes.empty() ? "" : ",") + n.get<std::string>();
  out.push_back(comment_text(
      fmt::format("Tuned by hpclaunch tune on {} (cluster {}, preset {}, nodes {}); winner {}.",
                  str_at(t, "date"), str_at(t, "cluster"), str_at(t, "preset"),
                  nodes.empty() ? "?" : nodes, str_at(t, "winner"))));
  out.push_back("Score: " + comment_text(str_at(t, "metric")));
  out.push_back(fmt::format("{:>4}  {:<5} {:>12}  {:<13} {:<8}  {}", "RANK", "CAND", "SCORE GB/s",
                            "STATE", "JOB", "VARIABLES"));
  if (!t.contains("candidates") || !t["candidates"].is_array()) return out;
  for (const auto& c : t["candidates"]) {
    if (!c.is_object()) continue;
    std::string vars;
    if (c.contains("vars") && c["vars"].is_object())
      for (const auto& [k, v] : c["vars"].items())
        vars += (vars.empty() ? "" : " ") + k + "=" +
                (v.is_string() ? v.get<std::string>()
                 : v.is_null() ? "(unset)"
                               : v.dump());
    std::string score = c.contains("score_gbps") && c["score_gbps"].is_number()
                            ? gbps(c["score_gbps"].get<double>())
                            : "-";
    long rank = c.contains("rank") && c["rank"].is_number_integer() ? c["rank"].get<long>() : 0;
    std::string line = fmt::format("{:>4}  {:<5} {:>12}  {:<13} {:<8}  {}", rank, str_at(c, "id"),
                                   score, str_at(c, "state"),
                                   str_at(c, "job_id").empty() ? "-" : str_at(c, "job_id"), vars);
    if (!str_at(c, "message").empty()) line += " - " + str_at(c, "message");
    out.push_back(comment_text(line));
    if (c.contains("busbw") && c["busbw"].is_array() && !c["busbw"].empty()) {
      std::string table = "      busbw GB/s by size:";
      for (const auto& r : c["busbw"]) {
        if (!r.is_object() || !r.contains("size") || !r["size"].is_number_integer() ||
            !r.contains("busbw_gbps") || !r["busbw_gbps"].is_number())
          continue;
        table += " " + human_bytes(r["size"].get<long long>()) + "=" +
                 gbps(r["busbw_gbps"].get<double>());
      }
      out.push_back(table);
    }
  }
  return out;
}

namespace {

void validate(const TuneConfig& c) {
  if (c.max_candidates < 1)
    throw UserError("--max-candidates", "must be at least 1",
                    "pass how many benchmark jobs may run");
  if (c.max_concurrent < 1)
    throw UserError("--max-concurrent", "must be at least 1",
                    "pass --max-concurrent 1 to run the candidates one by one");
  if (c.timeout_s < 1)
    throw UserError("--timeout", "must be at least 1 second",
                    "pass the seconds one benchmark job may run, e.g. 600");
  if (c.start_timeout_s < 1)
    throw UserError("--start-timeout", "must be at least 1 second",
                    "pass how long a candidate may wait to start");
  if (c.iters < 1)
    throw UserError("--iters", "must be at least 1",
                    "pass the timed all-reduces per size, e.g. 20");
  if (c.poll_interval_s <= 0)
    throw UserError("--poll", "must be positive", "pass the seconds between state checks, e.g. 1");
  // The sizes as bench-allreduce will read them: every candidate would fail on them otherwise.
  const int64_t min = parse_byte_size("--min", c.min_size);
  const int64_t max = parse_byte_size("--max", c.max_size);
  if (min > max)
    throw UserError("--min",
                    fmt::format("{} ({} bytes) is more than --max {} ({} bytes)", c.min_size, min,
                                c.max_size, max),
                    "swap them, or pass a --min no larger than --max");
}

// Slurm time limit for a bound in seconds: whole minutes, rounded up.
std::string slurm_minutes(long seconds) {
  long minutes = (seconds + 59) / 60;
  return fmt::format("{:02}:{:02}:00", minutes / 60, minutes % 60);
}

std::string set_json(const std::string& key, const json& value) { return key + "=" + value.dump(); }

// The file `hpclaunch tune` writes: a user cluster profile named `name`. Throws UserError for a
// name that would replace the profile it extends, an existing file without --force, or
// something there that is not a regular file (atomic_file.h).
fs::path tuned_profile_target(const TuneConfig& config, const std::string& cluster,
                              const std::string& name) {
  check_preset_name(PresetKind::Cluster, name, config.name.empty() ? "--cluster" : "--name");
  if (name == cluster) {
    throw UserError("--name",
                    "the tuned profile cannot replace the profile it extends (\"" + name + "\")",
                    "pick another --name, e.g. " + cluster + "-tuned");
  }
  fs::path target = user_clusters_dir() / (name + ".json");
  std::error_code ec;
  if (fs::exists(target, ec) && !config.force) {
    throw UserError(target.string(), "a tuned profile is already there",
                    "pass --force to replace it, or --name OTHER to keep both (hpclaunch "
                    "clusters diff shows it)");
  }
  output_kind(target);  // a link, FIFO or folder there: refused now, not after every candidate ran
  return target;
}

// One bench-allreduce job per candidate: its spec (the base with the candidate's variables,
// each with its reason) and script. A candidate that does not resolve stops the tune.
std::vector<PoolJob> candidate_jobs(const TuneConfig& config, const Catalog& catalog,
                                    const SpecRequest& base, const std::string& cluster,
                                    const std::string& grid_origin,
                                    const std::vector<TuneCandidate>& candidates,
                                    const std::vector<std::string>& command) {
  std::vector<std::string> bench_args = {"--min",          config.min_size,
                                         "--max",          config.max_size,
                                         "--iters",        std::to_string(config.iters),
                                         "--dist-timeout", std::to_string(config.timeout_s)};
  bench_args.insert(bench_args.end(), config.bench_args.begin(), config.bench_args.end());
  fs::path tmpl =
      config.template_file.empty() ? catalog.default_template() : fs::path(config.template_file);
  ScriptTemplate script_template = ScriptTemplate::from_file(tmpl);
  std::vector<PoolJob> jobs(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const TuneCandidate& c = candidates[i];
    SpecRequest r = base;
    r.cluster = cluster;
    r.sets = {"job.name=tune-" + cluster + "-" + c.id, "trainer.command=bench-allreduce",
              set_json("trainer.args", bench_args), "shape.time=" + slurm_minutes(config.timeout_s),
              "job.signal_seconds=0"};
    r.sets.insert(r.sets.end(), config.sets.begin(), config.sets.end());
    for (const auto& [var, value] : c.vars) {
      std::string key =
          std::string(var.rfind("NCCL_", 0) == 0 ? "profile.nccl." : "profile.env.") + var;
      if (value) {
        r.sets.push_back(
            set_json(key, {{"value", *value}, {"reason", "hpclaunch tune candidate " + c.id}}));
      } else {
        r.sets.push_back(key + "=null");
      }
    }
    try {
      jobs[i].spec = resolve_spec(catalog, r);
    } catch (const UserError& e) {
      throw UserError(grid_origin + ": candidate " + c.id + " (" + comment_text(c.describe()) + ")",
                      e.what(), "");
    }
    jobs[i].key = c.id;
    jobs[i].script = script_template.render(jobs[i].spec, RenderContext{kVersion, command});
  }
  return jobs;
}

// The ranked table on stdout: one row per candidate, best first.
void print_tune_table(const std::vector<TuneOutcome>& outcomes,
                      const std::vector<size_t>& ranking) {
  std::cout << fmt::format("{:>4}  {:<5} {:>12}  {:<13} {:<8}  {}\n", "RANK", "CAND", "SCORE GB/s",
                           "STATE", "JOB", "VARIABLES");
  for (size_t r = 0; r < ranking.size(); ++r) {
    const auto& o = outcomes[ranking[r]];
    std::string why;
    if (!o.score && !o.message.empty())
      why = " - " + o.message + (o.log.empty() ? "" : " (log " + o.log + ")");
    std::cout << comment_text(fmt::format("{:>4}  {:<5} {:>12}  {:<13} {:<8}  {}{}", r + 1,
                                          o.candidate.id, o.score ? gbps(*o.score) : "-", o.state,
                                          o.job_id.empty() ? "-" : o.job_id, o.candidate.describe(),
                                          why))
              << "\n";
  }
}

// Writes the winner's profile to `target` and shows what it changes against `cluster`.
void write_tuned_profile(const TuneConfig& config, const std::string& cluster,
                         const std::string& name, const fs::path& target,
                         const std::vector<TuneOutcome>& outcomes,
                         const std::vector<size_t>& ranking,
                         const std::vector<std::string>& command) {
  const TuneOutcome& win = outcomes[ranking.front()];
  std::string date = utc_now_iso8601();
  json profile =
      tuned_profile(cluster, config.preset, date, outcomes, ranking, comment_command_line(command));
  check_json(profile, cluster_file_schema(), target.string());
  std::string text =
      "// Written by hpclaunch tune on " + date + ": the winning NCCL variables for " + cluster +
      " on " + config.preset +
      ",\n// each with its reason; \"tuning\" holds every measurement. Use it with\n" +
      "// --cluster " + name + "; see docs/tuning.md.\n" + profile.dump(2) + "\n";
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) {
    throw UserError(target.parent_path().string(), "cannot create the directory: " + ec.message(),
                    "check the permissions");
  }
  write_file_atomically(target, text);
  std::cerr << "hpclaunch: wrote " << target.string() << " (winner " << win.candidate.id << ": "
            << comment_text(win.candidate.describe()) << fmt::format(", {} GB/s)", gbps(*win.score))
            << "\n";

  // What it changes, as `hpclaunch clusters diff` shows it; and which file the name finds.
  Catalog after = Catalog::from_environment();
  LoadedPreset loaded = after.load(PresetKind::Cluster, name);
  if (fs::path(loaded.files.back()) != target) {
    std::cerr << "hpclaunch: warning: --cluster " << name << " finds " << loaded.files.back()
              << " first (HPCLAUNCH_PATH), not the file just written\n";
  }
  std::cout << "Changes against " << cluster << " (hpclaunch clusters diff " << cluster << " "
            << name << "):\n";
  for (const auto& line : diff_cluster_profiles(resolved_cluster_profile(after, cluster),
                                                resolved_cluster_profile(after, name)))
    std::cout << "  " << line << "\n";
  std::cout << "Use it: hpclaunch run --cluster " << name << " --preset " << config.preset
            << " ...\n";
}

}  // namespace

int run_tune(const TuneConfig& config, const BackendChoice& choice,
             const std::vector<std::string>& command, Backend* given_backend) {
  validate(config);
  Catalog catalog = Catalog::from_environment();

  // The base spec: which cluster, and its profile (the default grid reads it).
  SpecRequest base = make_spec_request(config.preset, config.cluster, "", config.sets,
                                       config.project, config.no_project);
  base.preset = config.preset;  // even "": resolve_spec names it as unknown
  base.hpctrain_verb = "tune";
  Spec base_spec = resolve_spec(catalog, base);
  const std::string cluster = base_spec.cluster;
  const std::string backend_kind = given_backend ? given_backend->kind() : choice.kind;
  check_backend_fits(backend_kind, base_spec, "--preset");

  TuneGrid grid = config.grid_file.empty() ? default_tune_grid(base_spec.profile)
                                           : read_tune_grid(config.grid_file);
  std::vector<TuneCandidate> candidates = expand_tune_grid(grid, config.max_candidates);

  // Where the result goes, and every candidate's script: checked before any job is submitted.
  const std::string name = config.name.empty() ? cluster + "-tuned" : config.name;
  const fs::path target = tuned_profile_target(config, cluster, name);
  std::vector<PoolJob> jobs =
      candidate_jobs(config, catalog, base, cluster, grid.origin, candidates, command);

  for (const auto& j : jobs) check_env_from_submit(j.spec);  // names set here, before any write
  std::unique_ptr<Backend> made;
  if (!given_backend) made = make_backend(choice);
  Backend* backend = given_backend ? given_backend : made.get();

  std::vector<TuneOutcome> outcomes(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) outcomes[i].candidate = candidates[i];
  std::cerr << fmt::format(
      "hpclaunch: tune {} on {} ({} ranks): {} candidate{} from {}, via {}; at most {} at once, "
      "{} s each once running\n",
      cluster, config.preset, base_spec.world_size(), candidates.size(),
      candidates.size() == 1 ? "" : "s",
      grid.origin == "default grid" ? "the default grid" : grid.origin, backend->kind(),
      config.max_concurrent, config.timeout_s);

  auto sync = [&](size_t i) {
    TuneOutcome& o = outcomes[i];
    const PoolJob& j = jobs[i];
    o.state = j.state;
    o.job_id = j.job_id;
    o.run_dir = j.run_dir;
    o.log = j.log;
    o.nodes = j.nodes;
    if (!j.message.empty() || !o.bench) o.message = j.message;
    if (o.state == "TIMEOUT") {
      o.message = fmt::format(
          "ended at its time limit ({}, --timeout {} s in whole minutes): hung, or --max too "
          "large? "
          "see the log",
          j.spec.shape.time, config.timeout_s);
    }
  };
  std::map<std::string, std::string> last_line;
  PoolHooks hooks;
  hooks.completed = [&](PoolJob& j) {
    size_t i = static_cast<size_t>(&j - jobs.data());
    TuneOutcome& o = outcomes[i];
    std::string path = j.run_dir + "/allreduce.json";
    try {
      auto text = read_backend_file(*backend, path);
      if (!text) {
        j.message = "no " + path + " (did bench-allreduce run? see the log)";
        return;
      }
      o.bench = parse_bench_json(*text, path);
      o.score = tune_score(o.bench->rows);
      if (!o.score) j.message = "no rows in " + path;
    } catch (const std::exception& e) {
      o.bench.reset();
      j.message = "unreadable: " + printable_first_line(e.what());
    }
  };
  hooks.show = [&]() {
    for (size_t i = 0; i < jobs.size(); ++i) {
      sync(i);
      const auto& o = outcomes[i];
      std::string line = o.candidate.id + " (" + o.candidate.describe() + "): " + o.state;
      if (!o.job_id.empty()) line += ", job " + o.job_id;
      if (o.score) line += fmt::format(", busbw {} GB/s", gbps(*o.score));
      if (!o.message.empty()) line += " - " + o.message;
      if (last_line[o.candidate.id] == line) continue;
      last_line[o.candidate.id] = line;
      std::cerr << now_hms() << " tune: " << comment_text(line) << "\n";
    }
    std::cerr.flush();
  };
  std::vector<PoolJob*> pointers;
  for (auto& j : jobs) pointers.push_back(&j);
  PoolLimits limits;
  limits.max_concurrent = config.max_concurrent;
  limits.start_timeout_s = config.start_timeout_s;
  // Slurm ends the job at its time limit; this bound catches a job the scheduler does not end.
  limits.run_timeout_s = config.timeout_s + config.hang_grace_s;
  limits.poll_interval_s = config.poll_interval_s;
  bool finished = run_job_pool(*backend, choice, pointers, limits, command, hooks);
  for (size_t i = 0; i < jobs.size(); ++i) sync(i);
  if (!finished) {
    int cancelled = 0;
    for (auto& j : jobs) {
      if (!j.active()) continue;
      try {
        backend->cancel(j.job_id);
        ++cancelled;
      } catch (const BackendError&) {}
    }
    std::cerr << "hpclaunch: tune interrupted; cancelled " << cancelled
              << " job(s); nothing written\n";
    return 130;
  }

  std::vector<size_t> ranking = rank_tune_outcomes(outcomes);
  print_tune_table(outcomes, ranking);
  const TuneOutcome& win = outcomes[ranking.front()];
  if (!win.score) {
    std::cerr << "hpclaunch: tune: no candidate gave a measurement; nothing written (see the rows "
                 "above and their logs)\n";
    return 1;
  }
  write_tuned_profile(config, cluster, name, target, outcomes, ranking, command);
  return 0;
}

}  // namespace hpc
