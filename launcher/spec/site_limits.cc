#include "spec/site_limits.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <regex>

#include "error.h"
#include "shell.h"
#include "spec/slurm_time.h"
#include "spec/spec.h"
#include "spec/spec_reader.h"

using nlohmann::json;

namespace hpc {
namespace {

std::string plural(long n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// A limit's duration: a Slurm time, or INFINITE. Zero is not a limit.
long read_limit_time(const SpecReader& r, const std::string& path, std::string& text) {
  text = r.string(path);
  if (text.empty()) return 0;
  std::optional<long> seconds = slurm_time_seconds(text);
  if (!seconds || *seconds == 0) {
    throw UserError(r.where(path), "\"" + comment_text(text) + "\" is not a Slurm time limit",
                    "write it as scontrol shows MaxTime, e.g. \"24:00:00\" or \"2-00:00:00\"");
  }
  return *seconds;
}

int read_count(const SpecReader& r, const std::string& path, long long max) {
  if (!r.find(path)) return 0;
  return r.integer(path, 0, max, "write a whole number (0: not known)");
}

PartitionLimits read_partition(const SpecReader& r, const std::string& name) {
  const std::string p = "profile.partitions." + name;
  PartitionLimits l;
  l.name = name;
  l.max_seconds = read_limit_time(r, p + ".max_time", l.max_time);
  l.max_nodes = read_count(r, p + ".max_nodes", 100000);
  l.gpus_per_node = read_count(r, p + ".gpus_per_node", 64);
  l.cpus_per_node = read_count(r, p + ".cpus_per_node", 100000);
  l.mem_per_node = r.string(p + ".mem_per_node");
  if (!l.mem_per_node.empty()) {
    auto mb = slurm_size_mb(l.mem_per_node);
    if (!mb || *mb == 0) {
      throw UserError(r.where(p + ".mem_per_node"),
                      "\"" + comment_text(l.mem_per_node) + "\" is not a Slurm size",
                      "write a number with an optional K, M, G or T suffix, e.g. \"512G\"");
    }
    l.mem_per_node_mb = *mb;
  }
  return l;
}

// A map's keys become sbatch values: the charset of Slurm's names.
void check_name(const SpecReader& r, const std::string& path, const std::string& name) {
  // std::regex only on a short input (its backtracking recursion grows with the input's length):
  // the length is checked first.
  static const std::regex ok("[A-Za-z0-9_.-]{1,64}");
  if (name.size() > 64 || !std::regex_match(name, ok)) {
    throw UserError(r.where(path), "\"" + comment_text(name) + "\" is not a Slurm name",
                    "use letters, digits, '_', '.' and '-'");
  }
}

std::string limit_origin(const SpecReader& r, const std::string& path) {
  return path + ", " + r.origin(path);
}

void check_partition(const SpecReader& r, const Spec& spec, const PartitionLimits& l) {
  const Shape& s = spec.shape;
  const std::string key = "profile.partitions." + l.name;
  const std::string part = "partition " + l.name;
  const long time = slurm_time_seconds(s.time).value_or(0);
  if (l.max_seconds > 0 && (time < 0 || time > l.max_seconds)) {
    throw UserError(r.where("shape.time"),
                    s.time + " is over " + part + "'s limit " + l.max_time + " (" +
                        limit_origin(r, key + ".max_time") + ")",
                    "lower it: --set shape.time=" + l.max_time + ", or choose another partition");
  }
  if (l.max_nodes > 0 && s.nodes > l.max_nodes) {
    throw UserError(r.where("shape.nodes"),
                    plural(s.nodes, "node") + ", but " + part + " allows " +
                        std::to_string(l.max_nodes) + " (" + limit_origin(r, key + ".max_nodes") +
                        ")",
                    "pick a preset with at most " + plural(l.max_nodes, "node"));
  }
  if (l.gpus_per_node > 0 && s.gpus_per_node > l.gpus_per_node) {
    throw UserError(r.where("shape.gpus_per_node"),
                    plural(s.gpus_per_node, "GPU") + " per node, but a node of " + part + " has " +
                        std::to_string(l.gpus_per_node) + " (" +
                        limit_origin(r, key + ".gpus_per_node") + ")",
                    "pick a preset with at most " + std::to_string(l.gpus_per_node) +
                        " GPUs per node, or use more nodes");
  }
  const long cpus = static_cast<long>(s.cpus_per_gpu) * s.gpus_per_node;
  if (l.cpus_per_node > 0 && cpus > l.cpus_per_node) {
    throw UserError(
        r.where("shape.cpus_per_gpu"),
        std::to_string(s.cpus_per_gpu) + " CPUs per GPU x " + std::to_string(s.gpus_per_node) +
            " GPUs = " + std::to_string(cpus) + " CPUs per node, but a node of " + part + " has " +
            std::to_string(l.cpus_per_node) + " (" + limit_origin(r, key + ".cpus_per_node") + ")",
        "--set shape.cpus_per_gpu=" +
            std::to_string(l.cpus_per_node / std::max(1, s.gpus_per_node)));
  }
  if (l.mem_per_node_mb > 0 && !s.mem_per_gpu.empty()) {
    const long per_gpu = slurm_size_mb(s.mem_per_gpu).value_or(0);
    if (per_gpu * s.gpus_per_node > l.mem_per_node_mb) {
      throw UserError(r.where("shape.mem_per_gpu"),
                      s.mem_per_gpu + " per GPU x " + std::to_string(s.gpus_per_node) +
                          " GPUs is more than a node of " + part + " has (" + l.mem_per_node +
                          ", " + limit_origin(r, key + ".mem_per_node") + ")",
                      "--set shape.mem_per_gpu=" +
                          std::to_string(l.mem_per_node_mb / std::max(1, s.gpus_per_node)) +
                          "M or less");
    }
  }
}

void check_qos(const SpecReader& r, const Spec& spec, const QosLimits& q) {
  const Shape& s = spec.shape;
  const std::string key = "profile.qos_limits." + q.name;
  const long time = slurm_time_seconds(s.time).value_or(0);
  if (q.max_seconds > 0 && (time < 0 || time > q.max_seconds)) {
    std::string fix = "lower it (--set shape.time=" + q.max_time + ")";
    for (const auto& other : spec.profile.limits.qos) {
      if (other.max_seconds < 0 || (time >= 0 && other.max_seconds >= time)) {
        fix += " or use QoS " + other.name + " (--set profile.qos=" + other.name + ")";
        break;
      }
    }
    throw UserError(r.where("shape.time"),
                    s.time + " is over QoS " + q.name + "'s limit " + q.max_time + " (" +
                        limit_origin(r, key + ".max_time") + "; profile.qos from " +
                        r.origin("profile.qos") + ")",
                    fix);
  }
  if (q.max_nodes > 0 && s.nodes > q.max_nodes) {
    throw UserError(r.where("shape.nodes"),
                    plural(s.nodes, "node") + ", but QoS " + q.name + " allows " +
                        std::to_string(q.max_nodes) + " (" + limit_origin(r, key + ".max_nodes") +
                        ")",
                    "pick a preset with at most " + plural(q.max_nodes, "node"));
  }
}

}  // namespace

const PartitionLimits* SiteLimits::partition(const std::string& name) const {
  for (const auto& p : partitions)
    if (p.name == name) return &p;
  return nullptr;
}

const QosLimits* SiteLimits::find_qos(const std::string& name) const {
  for (const auto& q : qos)
    if (q.name == name) return &q;
  return nullptr;
}

std::optional<long> slurm_size_mb(const std::string& text) {
  static const std::regex form("([0-9]{1,12})([KMGTkmgt]?)");
  std::smatch m;
  if (text.size() > 13 || !std::regex_match(text, m, form)) return std::nullopt;  // short only
  long n = std::stol(m[1].str());
  switch (std::toupper(static_cast<unsigned char>(m[2].str().empty() ? 'M' : m[2].str()[0]))) {
    case 'K':
      return (n + 1023) / 1024;
    case 'G':
      return n * 1024;
    case 'T':
      return n * 1024 * 1024;
    default:
      return n;
  }
}

void apply_site_defaults(json& doc, std::map<std::string, std::string>& sources,
                         const std::vector<std::string>& preset_files) {
  if (!doc.contains("profile") || !doc["profile"].is_object()) return;
  for (const char* key : {"cpus_per_gpu", "mem_per_gpu"}) {
    const json& profile = doc["profile"];
    if (!profile.contains(key)) continue;
    auto from = sources.find(std::string("shape.") + key);
    const bool from_preset =
        from == sources.end() ||
        std::find(preset_files.begin(), preset_files.end(), from->second) != preset_files.end();
    if (!from_preset) continue;  // hpclaunch.json or --set: the user's choice
    doc["shape"][key] = profile[key];
    auto origin = sources.find(std::string("profile.") + key);
    sources[std::string("shape.") + key] =
        origin == sources.end() ? "cluster profile" : origin->second;
  }
}

SiteLimits read_site_limits(const SpecReader& r) {
  SiteLimits limits;
  if (const json* parts = r.find("profile.partitions")) {
    for (const auto& [name, entry] : parts->items()) {
      check_name(r, "profile.partitions." + name, name);
      limits.partitions.push_back(read_partition(r, name));
    }
  }
  if (const json* qos = r.find("profile.qos_limits")) {
    for (const auto& [name, entry] : qos->items()) {
      const std::string p = "profile.qos_limits." + name;
      check_name(r, p, name);
      QosLimits q;
      q.name = name;
      q.max_seconds = read_limit_time(r, p + ".max_time", q.max_time);
      q.max_nodes = read_count(r, p + ".max_nodes", 100000);
      limits.qos.push_back(q);
    }
    // Shortest first: choose_qos and the fixes offer the smallest QoS that holds a job.
    std::stable_sort(limits.qos.begin(), limits.qos.end(), [](const auto& a, const auto& b) {
      auto key = [](long s) { return s <= 0 ? LONG_MAX : s; };
      return key(a.max_seconds) < key(b.max_seconds);
    });
  }
  limits.qos_from_time = r.boolean("profile.qos_from_time", false);
  if (limits.qos_from_time && limits.qos.empty()) {
    throw UserError(r.where("profile.qos_from_time"), "is true, but profile.qos_limits is empty",
                    "list the QoS and their max_time in profile.qos_limits");
  }
  return limits;
}

void choose_qos(const SpecReader& r, json& doc, std::map<std::string, std::string>& sources,
                Spec& spec) {
  const SiteLimits& limits = spec.profile.limits;
  if (!limits.qos_from_time || !spec.profile.qos.empty()) return;
  const long time = slurm_time_seconds(spec.shape.time).value_or(0);
  for (const auto& q : limits.qos) {
    if (q.max_seconds < 0 || (time >= 0 && q.max_seconds >= time)) {
      spec.profile.qos = q.name;
      doc["profile"]["qos"] = q.name;
      sources["profile.qos"] = "chosen from shape.time (profile.qos_limits)";
      return;
    }
  }
  const QosLimits& longest = limits.qos.back();
  throw UserError(r.where("shape.time"),
                  spec.shape.time + " is longer than every QoS cluster \"" + spec.cluster +
                      "\" lists (the longest: " + longest.name + ", " + longest.max_time + ", " +
                      limit_origin(r, "profile.qos_limits." + longest.name + ".max_time") + ")",
                  "lower it (--set shape.time=" + longest.max_time +
                      "), or name a QoS whose limit holds it: --set profile.qos=NAME "
                      "(sacctmgr show qos format=name,maxwall lists them)");
}

void check_site_limits(const SpecReader& r, const Spec& spec) {
  const SiteLimits& limits = spec.profile.limits;
  if (const PartitionLimits* p = limits.partition(spec.profile.partition))
    check_partition(r, spec, *p);
  if (const QosLimits* q = limits.find_qos(spec.profile.qos)) check_qos(r, spec, *q);
}

// profile.max_gpus_per_node and profile.max_nodes against the shape.
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

}  // namespace hpc
