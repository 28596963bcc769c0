// What a site's scheduler would refuse, known before anything is submitted: the limits of its
// partitions and QoS as the cluster profile records them (profile.partitions, profile.qos_limits,
// each with the site's documentation as its source), the QoS chosen from the time limit where a
// site asks for that (DAIC), and the site's defaults for CPUs and memory per GPU.
//
// What the live cluster says (scontrol, sinfo, sacctmgr, sbatch --test-only) is preflight's
// (backends/preflight.h); this file needs no cluster.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpc {

class SpecReader;
struct Spec;

// One partition's limits; 0 or "" where the profile does not say.
struct PartitionLimits {
  std::string name;
  std::string max_time;  // Slurm duration, e.g. "24:00:00"
  long max_seconds = 0;  // 0: unknown, -1: INFINITE
  int max_nodes = 0;
  int gpus_per_node = 0;
  int cpus_per_node = 0;
  std::string mem_per_node;  // Slurm size ("512G")
  long mem_per_node_mb = 0;
};

struct QosLimits {
  std::string name;
  std::string max_time;
  long max_seconds = 0;
  int max_nodes = 0;
};

struct SiteLimits {
  std::vector<PartitionLimits> partitions;
  std::vector<QosLimits> qos;  // in the profile's order
  bool qos_from_time = false;  // an empty profile.qos is chosen from shape.time

  const PartitionLimits* partition(const std::string& name) const;
  const QosLimits* find_qos(const std::string& name) const;
};

// A Slurm memory size ("64G", "512000", "1T"; no suffix: megabytes) -> MiB; nullopt if invalid.
std::optional<long> slurm_size_mb(const std::string& text);

// Before the shape is read: profile.cpus_per_gpu and profile.mem_per_gpu (the site's defaults)
// replace the shape's values where those came from a shape preset (`preset_files`) or nowhere;
// a value from hpclaunch.json or --set stays.
void apply_site_defaults(nlohmann::json& doc, std::map<std::string, std::string>& sources,
                         const std::vector<std::string>& preset_files);

// profile.partitions, profile.qos_limits, profile.qos_from_time; each value checked.
SiteLimits read_site_limits(const SpecReader& r);

// With qos_from_time and no profile.qos: the QoS with the shortest max_time that holds
// shape.time, written into spec.profile.qos and `doc` (its source: "chosen from shape.time").
// None holds it: UserError naming shape.time, the longest QoS and the fix.
void choose_qos(const SpecReader& r, nlohmann::json& doc,
                std::map<std::string, std::string>& sources, Spec& spec);

// What the site would refuse: time over the partition's or QoS's limit, more nodes than they
// allow, more GPUs, CPUs or memory than a node has. UserError with the key path and the fix.
void check_site_limits(const SpecReader& r, const Spec& spec);
// The shape against profile.max_gpus_per_node and profile.max_nodes: throws UserError.
void check_shape_fits(const SpecReader& r, const Spec& spec);

}  // namespace hpc
