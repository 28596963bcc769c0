#include "spec/spec.h"

#include <cctype>
#include <regex>
#include <set>

#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "render/shell.h"
#include "sha256.h"
#include "spec/binding.h"
#include "spec/launch.h"
#include "spec/sbatch_long_options.h"
#include "spec/schema.h"
#include "spec/slurm_time.h"
#include "spec/suggest.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

constexpr const char* kDefaultsOrigin = "built-in defaults";

// Reads typed values out of the merged document; every error names where the value came from.
class SpecReader {
 public:
  SpecReader(const json& doc, const std::map<std::string, std::string>& sources)
      : doc_(doc), sources_(sources) {}

  // Where the value at `path` came from. For an object (a map entry, port_range) that is the
  // layer that set one of its keys, preferring any layer above the built-in defaults.
  std::string origin(const std::string& path) const {
    auto it = sources_.find(path);
    if (it != sources_.end()) return it->second;
    std::string found;
    std::string prefix = path + ".";
    for (auto p = sources_.lower_bound(prefix);
         p != sources_.end() && p->first.rfind(prefix, 0) == 0; ++p) {
      if (found.empty() || found == kDefaultsOrigin ||
          found.find("presets/defaults.json") != std::string::npos)
        found = p->second;
    }
    return found.empty() ? kDefaultsOrigin : found;
  }
  std::string where(const std::string& path) const {
    std::string from = origin(path);
    if (from == "command line") return "--" + path;  // --preset, --cluster, --strategy
    return from + ": " + path;
  }

  const json* find(const std::string& path) const {
    const json* node = &doc_;
    size_t start = 0;
    while (true) {
      size_t dot = path.find('.', start);
      std::string key = path.substr(start, dot - start);
      if (!node->is_object() || !node->contains(key)) return nullptr;
      node = &(*node)[key];
      if (dot == std::string::npos) return node;
      start = dot + 1;
    }
  }

  std::string string(const std::string& path) const {
    const json* v = find(path);
    if (!v) return "";
    if (v->is_number_integer()) return v->dump();  // 18446744073709551615 stays itself
    return v->get<std::string>();
  }

  // A string that becomes part of an #SBATCH line: one line only.
  std::string directive_string(const std::string& path) const {
    std::string s = string(path);
    if (has_control_chars(s)) {
      throw UserError(where(path),
                      "contains a newline or control character (\"" + comment_text(s) + "\")",
                      "#SBATCH directives are single lines; remove it");
    }
    return s;
  }

  int integer(const std::string& path, long long min, long long max, const std::string& fix) const {
    const json* v = find(path);
    if (!v) {
      throw UserError(path, "is not set", fix);
    }
    // Above LLONG_MAX only as an unsigned number: compared as one, shown as written.
    const bool above = v->is_number_unsigned() &&
                       v->get<unsigned long long>() > static_cast<unsigned long long>(max);
    const long long x = above ? max : v->get<long long>();
    if (above || x < min || x > max) {
      std::string range = max >= (1LL << 40)
                              ? "at least " + std::to_string(min)
                              : "between " + std::to_string(min) + " and " + std::to_string(max);
      throw UserError(where(path), v->dump() + " is out of range (" + range + ")", fix);
    }
    return static_cast<int>(x);
  }

  bool boolean(const std::string& path, bool fallback) const {
    const json* v = find(path);
    return v ? v->get<bool>() : fallback;
  }

  std::vector<std::string> strings(const std::string& path) const {
    const json* v = find(path);
    return v ? v->get<std::vector<std::string>>() : std::vector<std::string>{};
  }

 private:
  const json& doc_;
  const std::map<std::string, std::string>& sources_;
};

bool matches_charset(const std::string& s, const char* extra) {
  for (unsigned char c : s)
    if (!std::isalnum(c) && !std::strchr(extra, c)) return false;
  return true;
}

// Options the spec itself renders; setting them again through sbatch_extra would contradict it.
// Compared with the option an entry resolves to (sbatch_long_options.h), never with its text.
bool is_managed_sbatch_option(const std::string& canonical) {
  static const std::set<std::string> opts = {
      "job-name",      "nodes",         "ntasks",       "ntasks-per-node", "cpus-per-task",
      "gpus-per-node", "gres",          "time",         "partition",       "account",
      "qos",           "constraint",    "reservation",  "output",          "error",
      "signal",        "requeue",       "open-mode",    "chdir",           "mem-per-gpu",
      "gpus",          "gpus-per-task", "cpus-per-gpu", "ntasks-per-gpu",  "no-requeue"};
  return opts.count(canonical) > 0;
}

// Options of the sbatch call itself: in a script they would change how sbatch answers hpclaunch
// (--wait blocks, --test-only submits nothing, --version and --help print and exit, --parsable
// and --hold are hpclaunch's own, --wrap replaces the script).
bool is_sbatch_call_option(const std::string& canonical) {
  static const std::set<std::string> opts = {"hold",      "wrap", "parsable", "wait",
                                             "test-only", "help", "usage",    "version"};
  return opts.count(canonical) > 0;
}

// One profile.sbatch_extra entry, "--option" or "--option=value", resolved as sbatch resolves
// it: an exact name, a second name or a unique prefix. Names sbatch 22.05 does not know pass
// (newer Slurm has more options; sbatch itself refuses a misspelling at submit).
void check_sbatch_extra_entry(const SpecReader& r, const std::string& opt) {
  const std::string where = r.where("profile.sbatch_extra");
  const size_t eq = opt.find('=');
  const std::string name = opt.substr(0, eq);
  if (name.size() < 3 || name.rfind("--", 0) != 0 || !matches_charset(name.substr(2), "-")) {
    throw UserError(where, "\"" + comment_text(opt) + "\" is not a long sbatch option",
                    "write it as \"--option=value\" or \"--flag\"");
  }
  if (has_control_chars(opt)) {
    throw UserError(where, "\"" + comment_text(opt) + "\" contains a control character",
                    "#SBATCH directives are single lines; remove it");
  }
  const SbatchOptionMatch m = resolve_sbatch_long_option(name.substr(2));
  if (m.kind == SbatchOptionMatch::Ambiguous) {
    std::string all;
    for (const auto& c : m.candidates) all += (all.empty() ? "--" : ", --") + c;
    throw UserError(where, name + " is ambiguous to sbatch (it could be " + all + ")",
                    "write the option's full name");
  }
  if (m.kind == SbatchOptionMatch::Unknown) return;
  const std::string& canonical = m.option->canonical;
  const std::string said =
      name == "--" + canonical ? name : name + " (sbatch reads it as --" + canonical + ")";
  if (is_managed_sbatch_option(canonical)) {
    throw UserError(where, said + " is rendered from the spec",
                    "set it through the spec's own key instead (see docs/presets.md)");
  }
  if (is_sbatch_call_option(canonical)) {
    throw UserError(where, said + " belongs to hpclaunch's own sbatch call",
                    "remove it: in a script it would change how sbatch answers hpclaunch");
  }
  if (canonical == "mem" && !r.string("shape.mem_per_gpu").empty()) {
    throw UserError(where, said + " contradicts shape.mem_per_gpu",
                    "use one of them: --set shape.mem_per_gpu=null to keep --mem");
  }
  if (m.option->argument == SbatchOptionValue::Required && eq == std::string::npos) {
    // sbatch would take the next directive's text as this option's value.
    throw UserError(where, name + " needs a value", "write it as \"" + name + "=VALUE\"");
  }
  if (m.option->argument == SbatchOptionValue::None && eq != std::string::npos) {
    throw UserError(where, name + " takes no value", "write it as \"" + name + "\" alone");
  }
}

std::vector<EnvVar> read_env_vars(const SpecReader& r, const json* block, const std::string& path,
                                  bool reason_required) {
  std::vector<EnvVar> vars;
  if (!block) return vars;
  for (const auto& [name, entry] : block->items()) {
    std::string p = path + "." + name;
    if (!is_env_name(name)) {
      throw UserError(r.where(p),
                      "\"" + comment_text(name) + "\" is not an environment variable name",
                      "use letters, digits and '_', not starting with a digit");
    }
    if (!entry.contains("value")) {
      throw UserError(r.where(p), "has no \"value\"", "add \"value\": \"...\"");
    }
    EnvVar v{name, r.string(p + ".value"), r.string(p + ".reason")};
    if (reason_required && v.reason.empty()) {
      throw UserError(
          r.where(p), "has no \"reason\"",
          "add \"reason\": why this cluster needs it (printed beside it in the script)");
    }
    vars.push_back(std::move(v));
  }
  return vars;
}

void read_shape(const SpecReader& r, const std::string& preset, Shape& s) {
  std::string fix_file = "set it in presets/shapes/" + preset + ".json or with --set shape.";
  s.description = r.string("shape.description");
  s.nodes =
      r.integer("shape.nodes", 1, 100000, "a job needs at least one node; " + fix_file + "nodes=N");
  s.gpus_per_node = r.integer("shape.gpus_per_node", 1, 64,
                              "one task runs per GPU; " + fix_file + "gpus_per_node=N");
  s.cpus_per_gpu = r.integer("shape.cpus_per_gpu", 1, 1024, fix_file + "cpus_per_gpu=N");
  s.mem_per_gpu = r.directive_string("shape.mem_per_gpu");
  if (!s.mem_per_gpu.empty() && !std::regex_match(s.mem_per_gpu, std::regex("[0-9]+[KMGT]?"))) {
    throw UserError(r.where("shape.mem_per_gpu"), "\"" + s.mem_per_gpu + "\" is not a Slurm size",
                    "write a number with an optional K, M, G or T suffix, e.g. \"64G\"");
  }
  s.time = r.directive_string("shape.time");
  if (s.time.empty()) throw UserError("shape.time", "is not set", fix_file + "time=HH:MM:SS");
  parse_slurm_time(s.time, r.where("shape.time"));
}

void read_profile(const SpecReader& r, const json& doc, ClusterProfile& p) {
  p.description = r.string("profile.description");
  p.partition = r.directive_string("profile.partition");
  p.account = r.directive_string("profile.account");
  p.qos = r.directive_string("profile.qos");
  p.constraint = r.directive_string("profile.constraint");
  p.reservation = r.directive_string("profile.reservation");
  p.required = r.strings("profile.required");
  for (const auto& key : p.required) {
    static const std::vector<std::string> fillable = {"partition", "account", "qos", "constraint",
                                                      "reservation"};
    if (std::find(fillable.begin(), fillable.end(), key) == fillable.end()) {
      throw UserError(r.where("profile.required"),
                      "\"" + comment_text(key) + "\" cannot be required",
                      suggest_fix(key, fillable, "keys"));
    }
    if (r.string("profile." + key).empty()) {
      throw UserError("profile." + key,
                      "cluster \"" + r.string("cluster") +
                          "\" requires a value here (profile.required in " +
                          r.origin("profile.required") + ")",
                      "add {\"profile\": {\"" + key +
                          "\": \"...\"}} to hpclaunch.json or pass --set profile." + key + "=...");
    }
  }
  p.modules = r.strings("profile.modules");
  for (size_t i = 0; i < p.modules.size(); ++i) {
    if (p.modules[i].empty()) {
      throw UserError(r.where("profile.modules"), "entry " + std::to_string(i + 1) + " is empty",
                      "remove it");
    }
  }
  p.setup = r.strings("profile.setup");
  for (const auto& line : p.setup) {
    if (line.find('\n') != std::string::npos) {
      throw UserError(r.where("profile.setup"), "an entry spans several lines",
                      "write one list entry per line of shell");
    }
  }
  p.sbatch_extra = r.strings("profile.sbatch_extra");
  for (const auto& opt : p.sbatch_extra) check_sbatch_extra_entry(r, opt);
  std::string req = r.string("profile.gpu_request");
  if (req == "gpus-per-node" || req.empty())
    p.gpu_request = GpuRequest::GpusPerNode;
  else if (req == "gres")
    p.gpu_request = GpuRequest::Gres;
  else {
    throw UserError(r.where("profile.gpu_request"), "unknown value \"" + comment_text(req) + "\"",
                    "use \"gpus-per-node\" (--gpus-per-node=N) or \"gres\" (--gres=gpu:N)");
  }
  p.gpu_type = r.string("profile.gpu_type");
  if (!matches_charset(p.gpu_type, "_.-")) {
    throw UserError(r.where("profile.gpu_type"),
                    "\"" + comment_text(p.gpu_type) + "\" is not a GPU type",
                    "use the type name from the cluster's gres.conf, e.g. \"a100\"");
  }
  p.ib_suffix = r.string("profile.ib_suffix");
  if (!matches_charset(p.ib_suffix, ".-") || p.ib_suffix.size() > 63) {
    throw UserError(r.where("profile.ib_suffix"),
                    "\"" + comment_text(p.ib_suffix) + "\" cannot be part of a host name",
                    "use letters, digits, '.' and '-' (JSC: \"i\")");
  }
  p.resolve_master_addr = r.boolean("profile.resolve_master_addr", true);
  p.port_min =
      r.integer("profile.port_range.min", 1024, 65535, "use an unprivileged port (1024-65535)");
  p.port_max =
      r.integer("profile.port_range.max", 1024, 65535, "use an unprivileged port (1024-65535)");
  if (p.port_min > p.port_max) {
    throw UserError(
        r.where("profile.port_range"),
        "min " + std::to_string(p.port_min) + " is above max " + std::to_string(p.port_max),
        "swap them");
  }
  p.cpu_bind = r.string("profile.cpu_bind");
  check_cpu_bind(p.cpu_bind, r.where("profile.cpu_bind"));
  p.gpu_bind = r.string("profile.gpu_bind");
  check_gpu_bind(p.gpu_bind, r.where("profile.gpu_bind"));
  p.max_gpus_per_node = r.integer("profile.max_gpus_per_node", 0, 64, "use 0 for no limit");
  p.max_nodes = r.integer("profile.max_nodes", 0, 100000, "use 0 for no limit");
  p.nccl = read_env_vars(r, r.find("profile.nccl"), "profile.nccl", true);
  p.env = read_env_vars(r, r.find("profile.env"), "profile.env", false);
  for (const auto& v : p.nccl) {
    if (v.name == "NCCL_P2P_DISABLE" && v.value != "0" && v.value != "1" && v.value != "auto") {
      throw UserError(r.where("profile.nccl.NCCL_P2P_DISABLE.value"),
                      "\"" + comment_text(v.value) + "\" is not 0, 1 or auto",
                      "use 0, 1 or auto (auto decides at job start from nvidia-smi topo -m)");
    }
  }
  for (const auto& v : p.env) {
    static const std::vector<std::string> reserved = {"MASTER_ADDR", "MASTER_PORT"};
    for (const auto& name : reserved) {
      if (v.name == name) {
        throw UserError(r.where("profile.env." + v.name), "is computed by the script",
                        "remove it (see docs/rendezvous.md)");
      }
    }
    if (v.name.rfind("NCCL_", 0) == 0) {
      throw UserError(r.where("profile.env." + v.name), "NCCL variables belong in profile.nccl",
                      "move it there, with a reason");
    }
  }
  (void)doc;
}

void check_shape_fits(const SpecReader& r, const Spec& spec) {
  const auto& p = spec.profile;
  if (p.max_gpus_per_node > 0 && spec.shape.gpus_per_node > p.max_gpus_per_node) {
    throw UserError(r.where("shape.gpus_per_node"),
                    std::to_string(spec.shape.gpus_per_node) + " GPUs per node, but cluster \"" +
                        spec.cluster + "\" has at most " + std::to_string(p.max_gpus_per_node) +
                        " (profile.max_gpus_per_node, " + r.origin("profile.max_gpus_per_node") +
                        ")",
                    "pick a preset with at most " + std::to_string(p.max_gpus_per_node) +
                        " GPUs per node, or use more nodes");
  }
  if (p.max_nodes > 0 && spec.shape.nodes > p.max_nodes) {
    throw UserError(r.where("shape.nodes"),
                    std::to_string(spec.shape.nodes) + " nodes, but cluster \"" + spec.cluster +
                        "\" allows at most " + std::to_string(p.max_nodes) +
                        " (profile.max_nodes, " + r.origin("profile.max_nodes") + ")",
                    "pick a smaller preset");
  }
}

void read_job(const SpecReader& r, Spec& spec) {
  auto& j = spec.job;
  j.name = r.directive_string("job.name");
  if (j.name.empty()) throw UserError(r.where("job.name"), "is empty", "give the job a name");
  j.output = r.directive_string("job.output");
  if (j.output.empty()) throw UserError(r.where("job.output"), "is empty", "e.g. \"%x-%j.out\"");
  j.error = r.directive_string("job.error");
  j.chdir = r.directive_string("job.chdir");
  j.signal_seconds =
      r.integer("job.signal_seconds", 0, 65535,
                "use the seconds before the time limit to send job.signal (USR1), e.g. 90 "
                "(0: no signal)");
  // Absent: USR1 (so that specs written before the key existed keep their hash).
  if (r.find("job.signal")) j.signal = r.string("job.signal");
  check_warning_signal(j.signal, r.where("job.signal"));
  j.max_requeues =
      r.integer("job.max_requeues", 0, 1000, "set how often the job may requeue itself, e.g. 3");
  j.srun_wait = r.integer("job.srun_wait", 0, 86400,
                          "set the seconds srun lets the other tasks run after the first ends, "
                          "e.g. 60 (0 waits forever)");
  long limit = parse_slurm_time(spec.shape.time, r.where("shape.time"));
  if (j.signal_seconds > 0 && limit >= 0 && j.signal_seconds >= limit) {
    throw UserError(r.where("job.signal_seconds"),
                    std::to_string(j.signal_seconds) + " s is not less than the time limit " +
                        spec.shape.time + " (" + r.origin("shape.time") + ")",
                    "lower job.signal_seconds or raise shape.time");
  }
}

void read_trainer(const SpecReader& r, Spec& spec) {
  spec.trainer.program = r.string("trainer.program");
  spec.trainer.args = r.strings("trainer.args");
  if (!spec.launches_hpctrain()) return;  // the program is the user's (spec/launch.h)
  if (spec.trainer.program.empty()) {
    throw UserError(r.where("trainer.program"), "is empty",
                    "name the trainer binary, e.g. \"hpctrain\" or an absolute path");
  }
  // Absent: train (so that specs written before the key existed keep their hash).
  if (r.find("trainer.command")) spec.trainer.command = r.string("trainer.command");
  const auto& commands = known_trainer_commands();
  if (std::find(commands.begin(), commands.end(), spec.trainer.command) == commands.end()) {
    throw UserError(r.where("trainer.command"),
                    "unknown trainer command \"" + comment_text(spec.trainer.command) + "\"",
                    suggest_fix(spec.trainer.command, commands, "commands"));
  }
}

std::string require_name(const SpecReader& r, const std::string& key, const std::string& fix) {
  std::string name = r.string(key);
  if (name.empty()) throw UserError("", "no " + key + " chosen", fix);
  return name;
}

json load_project_file(const SpecRequest& request, std::string& origin) {
  fs::path file;
  if (request.project_file) {
    file = *request.project_file;
  } else if (request.read_project_file) {
    // Only nothing at all is skipped: a folder, a FIFO or a dangling link is refused by name.
    if (!input_path_present("hpclaunch.json")) return json::object();
    file = "hpclaunch.json";
  } else {
    return json::object();
  }
  json content = read_json_file(file);
  check_json(content, spec_schema(), file.string());
  origin = file.string();
  return content;
}

}  // namespace

bool is_env_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_') return false;
  return true;
}

long parse_slurm_time(const std::string& text, const std::string& where) {
  std::optional<long> seconds = slurm_time_seconds(text);
  if (!seconds) {
    throw UserError(where, "\"" + comment_text(text) + "\" is not a Slurm time limit",
                    "write MM, HH:MM:SS or D-HH:MM:SS, e.g. \"02:00:00\"");
  }
  if (*seconds == 0) {
    throw UserError(where, "time limit \"" + text + "\" is zero", "give the job some time");
  }
  return *seconds;
}

std::string Spec::canonical_json() const {
  return resolved.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string Spec::hash() const { return sha256_hex(canonical_json()); }

SpecRequest make_spec_request(const std::string& preset, const std::string& cluster,
                              const std::string& strategy, std::vector<std::string> sets,
                              const std::string& project, bool no_project) {
  SpecRequest r;
  if (!preset.empty()) r.preset = preset;
  if (!cluster.empty()) r.cluster = cluster;
  if (!strategy.empty()) r.strategy = strategy;
  r.sets = std::move(sets);
  if (!project.empty()) r.project_file = std::filesystem::path(project);
  r.read_project_file = !no_project;
  return r;
}

Spec resolve_spec(const Catalog& catalog, const SpecRequest& request) {
  // 1. Layers that may name the preset, cluster and strategy.
  auto defaults = catalog.defaults();
  std::string project_origin;
  json project = load_project_file(request, project_origin);
  json cli = json::object();
  if (request.preset) cli["preset"] = *request.preset;
  if (request.cluster) cli["cluster"] = *request.cluster;
  if (request.strategy) cli["strategy"] = *request.strategy;
  if (request.launch) cli["launch"] = *request.launch;
  std::set<std::string> default_origins;
  for (const auto& layer : defaults) default_origins.insert(layer.second);
  std::vector<std::pair<json, std::string>> sets;
  for (const auto& s : request.sets) sets.emplace_back(parse_set_assignment(s), "--set " + s);

  json names = json::object();
  std::map<std::string, std::string> name_sources;
  for (const auto& [layer, origin] : defaults) merge_layer(names, layer, origin, name_sources);
  merge_layer(names, project, project_origin, name_sources);
  merge_layer(names, cli, "command line", name_sources);
  for (const auto& [layer, origin] : sets) merge_layer(names, layer, origin, name_sources);
  SpecReader name_reader(names, name_sources);

  Spec spec;
  spec.preset =
      require_name(name_reader, "preset", "pass --preset NAME (hpclaunch presets list shows them)");
  spec.cluster =
      require_name(name_reader, "cluster", "pass --cluster NAME (hpclaunch clusters list)");
  const WhereFn name_where = [&](const std::string& p) { return name_reader.where(p); };
  spec.launch = check_launch_mode(name_reader.string("launch"), name_where("launch"));
  auto strategy_origin = name_sources.find("strategy");
  refuse_strategy_for_program(spec.launch,
                              strategy_origin == name_sources.end() ? "" : strategy_origin->second,
                              default_origins, name_where);
  if (spec.launches_hpctrain()) {
    spec.strategy = require_name(name_reader, "strategy", "pass --strategy ddp|fsdp|zero1|zero2");
  }
  check_preset_name(PresetKind::Shape, spec.preset, name_reader.where("preset"));
  check_preset_name(PresetKind::Cluster, spec.cluster, name_reader.where("cluster"));
  const auto& strategies = known_strategies();
  if (spec.launches_hpctrain() &&
      std::find(strategies.begin(), strategies.end(), spec.strategy) == strategies.end()) {
    throw UserError(name_reader.where("strategy"),
                    "unknown strategy \"" + comment_text(spec.strategy) + "\"",
                    suggest_fix(spec.strategy, strategies, "strategies"));
  }
  LoadedPreset shape, cluster;
  try {
    shape = catalog.load(PresetKind::Shape, spec.preset);
    cluster = catalog.load(PresetKind::Cluster, spec.cluster);
  } catch (const UserError& e) {
    std::string msg = e.what();
    if (msg.rfind("no ", 0) == 0) {
      bool is_shape = msg.rfind("no preset", 0) == 0;
      throw UserError(name_reader.where(is_shape ? "preset" : "cluster") + ": " + msg);
    }
    throw;
  }

  // 2. The whole document.
  json doc = json::object();
  for (const auto& [layer, origin] : defaults) merge_layer(doc, layer, origin, spec.sources);
  merge_layer(doc, json{{"shape", shape.content}}, "preset", spec.sources);
  for (const auto& [key, file] : shape.sources) spec.sources["shape." + key] = file;
  merge_layer(doc, json{{"profile", cluster.content}}, "cluster", spec.sources);
  for (const auto& [key, file] : cluster.sources) spec.sources["profile." + key] = file;
  merge_layer(doc, project, project_origin, spec.sources);
  merge_layer(doc, cli, "command line", spec.sources);
  for (const auto& [layer, origin] : sets) merge_layer(doc, layer, origin, spec.sources);
  check_json(doc, spec_schema(), "merged spec");
  const SpecReader merged(doc, spec.sources);
  const WhereFn where = [&](const std::string& p) { return merged.where(p); };
  apply_program_words(doc, spec.sources, spec.launch, default_origins, request.trainer_args, where);
  check_json(doc, spec_schema(), "merged spec");
  if (spec.launch == "torchrun")
    spec.torchrun_command = read_torchrun_command(doc, spec.sources, where);
  set_job_name_from_program(doc, spec.sources);

  for (const auto& [layer, origin] : defaults) spec.files.push_back(origin);
  for (const auto& f : shape.files) spec.files.push_back(f);
  for (const auto& f : cluster.files) spec.files.push_back(f);
  if (!project_origin.empty()) spec.files.push_back(project_origin);

  // 3. Typed values, each checked.
  SpecReader r(doc, spec.sources);
  read_shape(r, spec.preset, spec.shape);
  read_profile(r, doc, spec.profile);
  check_shape_fits(r, spec);
  read_job(r, spec);
  read_trainer(r, spec);
  spec.resolved = std::move(doc);
  return spec;
}

}  // namespace hpc
