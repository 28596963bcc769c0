#include "spec/spec.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <set>

#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "sha256.h"
#include "shell.h"
#include "spec/binding.h"
#include "spec/launch.h"
#include "spec/sbatch_long_options.h"
#include "spec/schema.h"
#include "spec/site_limits.h"
#include "spec/slurm_time.h"
#include "spec/spec_reader.h"
#include "spec/suggest.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(',', start);
    parts.push_back(text.substr(start, at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

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
      "gpus",          "gpus-per-task", "cpus-per-gpu", "ntasks-per-gpu",  "no-requeue",
      "exclusive",     "dependency",    "array",        "mail-type",       "mail-user"};
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

// A path on the cluster the script uses (a virtualenv, conda's prefix, Lmod's init): absolute,
// relative to the job's directory, or "~/..." for the home directory there. "$" would not expand
// (every value is quoted), and "~user" is not supported: both are refused with the fix.
std::string cluster_path(const SpecReader& r, const std::string& path) {
  std::string s = r.string(path);
  if (has_control_chars(s)) {
    throw UserError(r.where(path),
                    "contains a newline or control character (\"" + comment_text(s) + "\")",
                    "write the path on one line");
  }
  if (s.find_first_of("$`") != std::string::npos) {
    throw UserError(r.where(path), "\"" + comment_text(s) + "\" holds a $ or `",
                    "nothing in it is expanded; write ~/ for the home directory on the cluster, "
                    "e.g. \"~/venvs/train\"");
  }
  if (s.size() > 1 && s[0] == '~' && s[1] != '/') {
    throw UserError(r.where(path), "\"" + comment_text(s) + "\" names another user's home",
                    "write ~/ (your home on the cluster) or an absolute path");
  }
  return s;
}

void read_site_env(const SpecReader& r, ClusterProfile& p) {
  const std::string purge = r.string("profile.module_purge");
  if (purge.empty() || purge == "none")
    p.module_purge = ModulePurge::None;
  else if (purge == "purge")
    p.module_purge = ModulePurge::Purge;
  else if (purge == "force")
    p.module_purge = ModulePurge::Force;
  else {
    throw UserError(r.where("profile.module_purge"),
                    "unknown value \"" + comment_text(purge) + "\"",
                    "use \"none\", \"purge\" (module purge) or \"force\" (module --force purge, "
                    "for sticky modules)");
  }
  p.lmod_init = cluster_path(r, "profile.lmod_init");
  if (!p.lmod_init.empty() && p.lmod_init[0] != '/' && p.lmod_init[0] != '~') {
    throw UserError(r.where("profile.lmod_init"),
                    "\"" + comment_text(p.lmod_init) + "\" is not an absolute path",
                    "name the site's init script, e.g. \"/usr/share/lmod/lmod/init/bash\"");
  }
  p.python.venv = cluster_path(r, "profile.python.venv");
  p.python.conda = cluster_path(r, "profile.python.conda");
  if (!p.python.conda.empty() && p.python.conda[0] == '-') {
    // `conda activate` would read it as an option.
    throw UserError(r.where("profile.python.conda"),
                    "\"" + comment_text(p.python.conda) + "\" starts with '-'",
                    "name the environment (conda env list) or give its path");
  }
  if (!p.python.venv.empty() && !p.python.conda.empty()) {
    throw UserError(r.where("profile.python"), "sets both venv and conda",
                    "keep one: --set profile.python.conda=null or profile.python.venv=null");
  }
}

void read_env_from_submit(const SpecReader& r, const ClusterProfile& p, JobOptions& j) {
  const std::string where = r.where("job.env_from_submit");
  for (const auto& name : r.strings("job.env_from_submit")) {
    if (!is_env_name(name)) {
      throw UserError(
          where, "\"" + comment_text(name) + "\" is not an environment variable name",
          "use letters, digits and '_', not starting with a digit (e.g. WANDB_API_KEY)");
    }
    const std::string reserved = reserved_env_reason(name);
    if (!reserved.empty())
      throw UserError(where, reserved,
                      "pass only your own variables (tokens, keys), e.g. WANDB_API_KEY");
    for (const auto* vars : {&p.env, &p.nccl}) {
      for (const auto& v : *vars) {
        if (v.name == name) {
          throw UserError(where, name + " is also set by the profile (profile.env/nccl)",
                          "take it from one place: remove it from one of them");
        }
      }
    }
    if (std::find(j.env_from_submit.begin(), j.env_from_submit.end(), name) ==
        j.env_from_submit.end())
      j.env_from_submit.push_back(name);
  }
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
  // Digits and an optional unit, checked by hand (a --set value may be of any length).
  const std::string& mem = s.mem_per_gpu;
  const size_t digits = mem.find_first_not_of("0123456789");
  const bool slurm_size =
      digits != 0 &&
      (digits == std::string::npos ||
       (digits + 1 == mem.size() && std::string("KMGT").find(mem[digits]) != std::string::npos));
  if (!mem.empty() && !slurm_size) {
    throw UserError(r.where("shape.mem_per_gpu"), "\"" + s.mem_per_gpu + "\" is not a Slurm size",
                    "write a number with an optional K, M, G or T suffix, e.g. \"64G\"");
  }
  s.time = r.directive_string("shape.time");
  if (s.time.empty()) throw UserError("shape.time", "is not set", fix_file + "time=HH:MM:SS");
  parse_slurm_time(s.time, r.where("shape.time"));
}

// One entry of profile.required: the key must be non-empty once all layers are merged.
// mem_per_gpu is the shape's (a site that shares nodes needs a memory request).
void check_required_key(const SpecReader& r, const std::string& key) {
  static const std::vector<std::string> fillable = {"partition",  "account",     "qos",
                                                    "constraint", "reservation", "mem_per_gpu"};
  if (std::find(fillable.begin(), fillable.end(), key) == fillable.end()) {
    throw UserError(r.where("profile.required"), "\"" + comment_text(key) + "\" cannot be required",
                    suggest_fix(key, fillable, "keys"));
  }
  const std::string path = key == "mem_per_gpu" ? "shape." + key : "profile." + key;
  if (!r.string(path).empty()) return;
  const std::string section = path.substr(0, path.find('.'));
  std::string fix = "add {\"" + section + "\": {\"" + key +
                    "\": \"...\"}} to hpclaunch.json or pass --set " + path + "=...";
  const std::string hint = r.string("profile.hints." + key);
  if (!hint.empty()) fix += " (" + comment_text(hint) + ")";
  throw UserError(path,
                  "cluster \"" + r.string("cluster") +
                      "\" requires a value here (profile.required in " +
                      r.origin("profile.required") + ")",
                  fix);
}

void read_profile(const SpecReader& r, const json& doc, ClusterProfile& p) {
  p.description = r.string("profile.description");
  p.partition = r.directive_string("profile.partition");
  p.account = r.directive_string("profile.account");
  p.qos = r.directive_string("profile.qos");
  p.constraint = r.directive_string("profile.constraint");
  p.reservation = r.directive_string("profile.reservation");
  p.exclusive = r.boolean("profile.exclusive", false);
  p.required = r.strings("profile.required");
  for (const auto& key : p.required) check_required_key(r, key);
  p.modules = r.strings("profile.modules");
  for (size_t i = 0; i < p.modules.size(); ++i) {
    const bool empty = p.modules[i].empty();
    if (empty || p.modules[i] == "use:") {  // "use:DIR" adds DIR to the module path
      throw UserError(r.where("profile.modules"),
                      "entry " + std::to_string(i + 1) + (empty ? " is empty" : " names no DIR"),
                      empty ? "remove it" : "write use:DIR or use:$VARIABLE ($OTHERSTAGES)");
    }
  }
  read_site_env(r, p);
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
  p.limits = read_site_limits(r);
  p.nccl = read_env_vars(r, r.find("profile.nccl"), "profile.nccl", true);
  p.env = read_env_vars(r, r.find("profile.env"), "profile.env", false);
  for (const auto& v : p.nccl) {
    if (v.name == "NCCL_P2P_DISABLE" && v.value != "0" && v.value != "1" && v.value != "auto") {
      throw UserError(r.where("profile.nccl.NCCL_P2P_DISABLE.value"),
                      "\"" + comment_text(v.value) + "\" is not 0, 1 or auto",
                      "use 0, 1 or auto (auto decides at job start from nvidia-smi topo -m)");
    }
  }
  for (const auto* vars : {&p.nccl, &p.env}) {
    const std::string key = vars == &p.env ? "profile.env" : "profile.nccl";
    for (const auto& v : *vars) {
      const std::string reserved = reserved_env_reason(v.name);
      if (!reserved.empty())
        throw UserError(r.where(key + "." + v.name), reserved,
                        "remove it from " + key + " (docs/presets.md#nccl-and-env)");
    }
  }
  for (const auto& v : p.env) {
    if (v.name.rfind("NCCL_", 0) == 0) {
      throw UserError(r.where("profile.env." + v.name), "NCCL variables belong in profile.nccl",
                      "move it there, with a reason");
    }
  }
  (void)doc;
}

bool from_builtin_defaults(const std::string& origin) {
  return origin == kDefaultsOrigin || origin.find("presets/defaults.json") != std::string::npos;
}

// A log pattern every task of an array writes to alone: %a (the task index) or %j (the task's
// own job id) in it.
void check_array_log_pattern(const SpecReader& r, const std::string& key,
                             const std::string& pattern) {
  if (pattern.empty() || pattern.find("%a") != std::string::npos ||
      pattern.find("%j") != std::string::npos || pattern.find("%J") != std::string::npos)
    return;
  throw UserError(r.where(key),
                  "\"" + comment_text(pattern) + "\" is one file for every task of the array " +
                      "(job.array from " + r.origin("job.array") + ")",
                  "put %a (the task index) in it, e.g. \"%x-%A_%a.out\"");
}

// job.after, job.array, job.mail_type, job.mail_user (spec/job_features.h).
void read_job_features(const SpecReader& r, JobOptions& j) {
  for (const auto& entry : r.strings("job.after")) {
    for (const auto& one : split_commas(entry))
      j.after.push_back(parse_dependency(one, r.where("job.after")));
  }
  j.array = r.directive_string("job.array");
  if (!j.array.empty()) {
    j.array_indexes = parse_array_indexes(j.array, r.where("job.array"));
    // One log per task unless the user chose a pattern: %A the array's id, %a the task index.
    if (from_builtin_defaults(r.origin("job.output"))) j.output = "%x-%A_%a.out";
    check_array_log_pattern(r, "job.output", j.output);
    check_array_log_pattern(r, "job.error", j.error);
  }
  for (const auto& entry : r.strings("job.mail_type")) {
    for (const auto& one : split_commas(entry))
      j.mail_type.push_back(parse_mail_type(one, r.where("job.mail_type")));
  }
  j.mail_user = r.string("job.mail_user");
  if (!j.mail_user.empty()) check_mail_user(j.mail_user, r.where("job.mail_user"));
  // job.preflight: absent keys keep their defaults (so that specs written before the key
  // existed keep their hash).
  NodeCheck& c = j.node_check;
  c.enabled = r.boolean("job.preflight.enabled", false);
  if (r.find("job.preflight.margin")) {
    c.margin_percent =
        r.integer("job.preflight.margin", 1, 99,
                  "give the percent below the median that makes a node slow, e.g. 20");
  }
  if (r.find("job.preflight.timeout")) {
    c.timeout_s = r.integer("job.preflight.timeout", 10, 86400,
                            "give the seconds the node check may take, e.g. 300");
  }
  c.hpctrain = r.string("job.preflight.hpctrain");
  if (has_control_chars(c.hpctrain)) {
    throw UserError(r.where("job.preflight.hpctrain"), "contains a newline or control character",
                    "give the path of hpctrain on the cluster, e.g. ~/bin/hpctrain");
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
  // Absent: off (and the spec's hash stays what it was before the key existed).
  if (r.find("job.hang_seconds")) {
    const std::string fix =
        "give the seconds without progress after which the job is ended, e.g. 600 (0: off)";
    j.hang_seconds = r.integer("job.hang_seconds", 0, 7 * 86400, fix);
    if (j.hang_seconds > 0 && j.hang_seconds < kMinHangSeconds)
      throw UserError(r.where("job.hang_seconds"),
                      std::to_string(j.hang_seconds) +
                          " s is too short: ranks report progress "
                          "every 2 s and a step may take longer",
                      "use at least " + std::to_string(kMinHangSeconds) + " (0: off)");
  }
  if (r.find("job.start_seconds")) {  // absent: kDefaultStartSeconds, and the same hash
    const std::string fix =
        "give the seconds before any rank's first line or progress, e.g. 900, "
        "at least 10 (0: no bound on the start)";
    j.start_seconds = r.integer("job.start_seconds", 0, 7 * 86400, fix);
    if (j.start_seconds > 0 && j.start_seconds < kMinHangSeconds)
      throw UserError(r.where("job.start_seconds"),
                      std::to_string(j.start_seconds) + " s is too short a start", fix);
  }
  read_env_from_submit(r, spec.profile, j);
  read_job_features(r, j);
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

// The shape preset and cluster profile the spec names (not for a rerun's saved spec).
void load_named_presets(const Catalog& catalog, const Spec& spec, const SpecReader& name_reader,
                        LoadedPreset& shape, LoadedPreset& cluster) {
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
}

}  // namespace

std::vector<std::string> missing_env_from_submit(const Spec& spec) {
  std::vector<std::string> missing;
  for (const auto& name : spec.job.env_from_submit)
    if (!std::getenv(name.c_str())) missing.push_back(name);
  return missing;
}

void check_env_from_submit(const Spec& spec) {
  auto missing = missing_env_from_submit(spec);
  if (!missing.empty()) {
    throw UserError("job.env_from_submit",
                    missing.front() + " is not set in this shell (the job would miss it)",
                    "set it (export " + missing.front() +
                        "=...) before submitting, or remove it from job.env_from_submit / "
                        "--env-pass");
  }
  for (const auto& name : spec.job.env_from_submit) {
    if (std::string(std::getenv(name.c_str())).find('\n') != std::string::npos) {
      throw UserError("job.env_from_submit", "the value of " + name + " holds a newline",
                      "pass a one-line value (e.g. base64-encode it)");
    }
  }
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
  auto defaults = request.saved_spec
                      ? std::vector<std::pair<json, std::string>>{*request.saved_spec}
                      : catalog.defaults();
  std::string project_origin;
  json project = request.saved_spec ? json::object() : load_project_file(request, project_origin);
  json cli = json::object();
  if (request.preset) cli["preset"] = *request.preset;
  if (request.cluster) cli["cluster"] = *request.cluster;
  if (request.strategy) cli["strategy"] = *request.strategy;
  if (request.container_image) cli["container"]["image"] = *request.container_image;
  if (request.launch) cli["launch"] = *request.launch;
  std::set<std::string> default_origins;
  // A rerun's saved spec is not a default: its program and strategy were chosen.
  if (!request.saved_spec)
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
  if (!request.hpctrain_verb.empty() && !spec.launches_hpctrain()) {
    throw UserError(
        name_where("launch"),
        "hpclaunch " + request.hpctrain_verb + " runs hpctrain, and launch is " + spec.launch,
        "pass --set launch=hpctrain for it (or --no-project), see docs/programs.md");
  }
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
  if (!request.saved_spec) load_named_presets(catalog, spec, name_reader, shape, cluster);

  // 2. The whole document.
  json doc = json::object();
  for (const auto& [layer, origin] : defaults) merge_layer(doc, layer, origin, spec.sources);
  if (!request.saved_spec) {
    merge_layer(doc, json{{"shape", shape.content}}, "preset", spec.sources);
    for (const auto& [key, file] : shape.sources) spec.sources["shape." + key] = file;
    merge_layer(doc, json{{"profile", cluster.content}}, "cluster", spec.sources);
    for (const auto& [key, file] : cluster.sources) spec.sources["profile." + key] = file;
  }
  merge_layer(doc, project, project_origin, spec.sources);
  merge_layer(doc, cli, "command line", spec.sources);
  for (const auto& [layer, origin] : request.flag_layers)
    merge_layer(doc, layer, origin, spec.sources);
  for (const auto& [layer, origin] : sets) merge_layer(doc, layer, origin, spec.sources);
  // --env-pass NAME: appended to job.env_from_submit (names only; the values stay in the shell).
  if (!request.env_pass.empty()) {
    json& names = doc["job"]["env_from_submit"];
    if (!names.is_array()) names = json::array();
    for (const auto& n : request.env_pass) names.push_back(n);
    spec.sources["job.env_from_submit"] = "--env-pass";
  }
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
  auto add_layer = [&](const std::string& origin, const std::string& what) {
    spec.layers.push_back(what.empty() ? origin : origin + " (" + what + ")");
  };
  for (const auto& [layer, origin] : defaults)
    add_layer(origin, request.saved_spec ? "the run's saved spec" : "defaults");
  for (const auto& f : shape.files) add_layer(f, "preset " + spec.preset);
  for (const auto& f : cluster.files) add_layer(f, "profile " + spec.cluster);
  if (!project_origin.empty()) add_layer(project_origin, "project file");
  for (const auto& [layer, origin] : request.flag_layers) add_layer(origin, "flag");
  for (const auto& [layer, origin] : sets) add_layer(origin, "");
  for (const auto& n : request.env_pass) add_layer("--env-pass " + n, "");

  // 3. Typed values, each checked; the site's defaults first, its limits last.
  apply_site_defaults(doc, spec.sources, shape.files);
  SpecReader r(doc, spec.sources);
  read_shape(r, spec.preset, spec.shape);
  spec.shape.by_name_base = shape.by_name_base;
  read_profile(r, doc, spec.profile);
  check_shape_fits(r, spec);
  choose_qos(r, doc, spec.sources, spec);
  check_site_limits(r, spec);
  read_job(r, spec);
  read_trainer(r, spec);
  spec.container = read_container(doc, [&r](const std::string& path) { return r.where(path); });
  // An array's log pattern switched to one file per task: spec.json says so too.
  if (!spec.job.array.empty()) doc["job"]["output"] = spec.job.output;
  spec.resolved = std::move(doc);
  return spec;
}

}  // namespace hpc
