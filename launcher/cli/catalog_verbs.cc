// presets list/show, clusters list/show/diff.
#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <iostream>

#include "campaigns/clusters_diff.h"
#include "campaigns/tune.h"
#include "cli/verbs.h"
#include "follow/excluded_nodes.h"
#include "shell.h"
#include "spec/catalog.h"

using nlohmann::json;

namespace hpc {
namespace {

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

// The names to list; a file in a preset folder that cannot be one is named on stderr, once.
std::vector<std::string> listed_names(const Catalog& catalog, PresetKind kind) {
  std::vector<std::string> skipped;
  auto names = catalog.names(kind, &skipped);
  for (const auto& line : skipped) std::cerr << "hpclaunch: warning: " << line << "\n";
  return names;
}

int list_presets(const Catalog& catalog, bool as_json) {
  json all = json::array();
  for (const auto& name : listed_names(catalog, PresetKind::Shape)) {
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
  std::cout
      << "Strategies: ddp, fsdp, zero1, zero2 (--strategy). Details: hpclaunch presets show NAME\n";
  return 0;
}

int list_clusters(const Catalog& catalog, bool as_json) {
  json all = json::array();
  for (const auto& name : listed_names(catalog, PresetKind::Cluster)) {
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
  std::cout << fmt::format("{:<14} {:<14} {:>8} {:>9}  {}\n", "CLUSTER", "GPU REQUEST", "MAX GPUS",
                           "IB SUFFIX", "DESCRIPTION");
  for (const auto& c : all) {
    std::string req = c["gpu_request"].get<std::string>();
    const int max_gpus = c["max_gpus_per_node"].get<int>();  // 0: no limit in the profile
    std::cout << fmt::format("{:<14} {:<14} {:>8} {:>9}  {}\n", c["name"].get<std::string>(),
                             req.empty() ? "gpus-per-node" : req,
                             max_gpus > 0 ? std::to_string(max_gpus) : "-",
                             comment_text(c["ib_suffix"].get<std::string>()),
                             comment_text(c["description"].get<std::string>()));
  }
  return 0;
}

// The slow nodes a node check named on this cluster (follow/excluded_nodes.h).
std::vector<ExcludedNode> remembered_for(const std::string& cluster) {
  const auto file = excluded_nodes_file();
  return file ? remembered_nodes(*file, cluster) : std::vector<ExcludedNode>{};
}

json excluded_nodes_json(const std::vector<ExcludedNode>& nodes, const std::string& today) {
  json list = json::array();
  for (const auto& n : nodes) {
    const bool active = !excluded_now({n}, today).empty();
    list.push_back({{"node", n.node},
                    {"date", n.date},
                    {"job", n.job},
                    {"figures", n.figures},
                    {"excluded", active}});
  }
  return list;
}

void print_excluded_nodes(const std::string& cluster, const std::vector<ExcludedNode>& nodes,
                          const std::string& today) {
  if (nodes.empty()) return;
  std::cout << "\n# slow nodes from node checks (job.preflight), excluded for " << kExcludedNodeDays
            << " days; forget them: hpclaunch clusters forget-nodes " << cluster << "\n";
  for (const auto& n : nodes) {
    const bool active = !excluded_now({n}, today).empty();
    std::cout << "#   " << n.node << "  " << n.date << "  job " << n.job << "  "
              << (active ? "excluded" : "expired") << "  " << n.figures << "\n";
  }
}

int show_preset(const Catalog& catalog, PresetKind kind, const std::string& name, bool as_json) {
  LoadedPreset p =
      catalog.load(kind, name, kind == PresetKind::Shape ? "presets show" : "clusters show");
  const auto excluded =
      kind == PresetKind::Cluster ? remembered_for(name) : std::vector<ExcludedNode>{};
  const std::string today = utc_today();
  if (as_json) {
    json out{{"name", name}, {"content", p.content}, {"files", p.files}};
    if (kind == PresetKind::Cluster) out["excluded_nodes"] = excluded_nodes_json(excluded, today);
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "# " << kind_noun(kind) << " " << name << " from";
  for (const auto& f : p.files) std::cout << " " << f;
  std::cout << "\n" << p.content.dump(2) << "\n";
  if (kind == PresetKind::Cluster && p.content.contains("tuning")) {
    std::cout << "\n";
    for (const auto& line : describe_tuning(p.content["tuning"])) std::cout << line << "\n";
  }
  print_excluded_nodes(name, excluded, today);
  return 0;
}

}  // namespace

VerbHandler define_presets(CLI::App* verb) {
  struct Flags {
    std::string name;
    bool as_json = false;
    CLI::App* show = nullptr;
  };
  auto f = std::make_shared<Flags>();
  verb->require_subcommand(0, 1);
  auto* list = verb->add_subcommand("list", "list presets (the default)");
  f->show = verb->add_subcommand("show", "show one preset, resolved");
  f->show->add_option("NAME", f->name, "preset name")->required();
  for (auto* c : {verb, list, f->show}) c->add_flag("--json", f->as_json, "JSON output");
  return [f](const Invocation&) {
    Catalog catalog = Catalog::from_environment();
    if (f->show->parsed()) return show_preset(catalog, PresetKind::Shape, f->name, f->as_json);
    return list_presets(catalog, f->as_json);
  };
}

VerbHandler define_clusters(CLI::App* verb) {
  struct Flags {
    std::string name, diff_a, diff_b;
    bool as_json = false;
    CLI::App *show = nullptr, *diff = nullptr, *forget = nullptr;
  };
  auto f = std::make_shared<Flags>();
  verb->require_subcommand(0, 1);
  auto* list = verb->add_subcommand("list", "list cluster profiles (the default)");
  f->show = verb->add_subcommand("show", "show one cluster profile, resolved");
  f->show->add_option("NAME", f->name, "cluster name")->required();
  for (auto* c : {verb, list, f->show}) c->add_flag("--json", f->as_json, "JSON output");
  f->diff =
      verb->add_subcommand("diff", "resolved values that differ between two cluster profiles");
  f->diff->add_option("A", f->diff_a, "cluster profile")->required();
  f->diff->add_option("B", f->diff_b, "cluster profile (e.g. A-tuned)")->required();
  f->forget = verb->add_subcommand(
      "forget-nodes", "forget the slow nodes node checks named on a cluster (job.preflight)");
  f->forget->add_option("NAME", f->name, "cluster name")->required();
  return [f](const Invocation&) {
    if (f->forget->parsed()) {
      check_preset_name(PresetKind::Cluster, f->name, "clusters forget-nodes");
      const auto file = excluded_nodes_file();
      const size_t n = file ? forget_nodes(*file, f->name) : 0;
      std::cout << "forgot " << n << " slow node(s) of cluster " << f->name << "\n";
      return 0;
    }
    Catalog catalog = Catalog::from_environment();
    if (f->show->parsed()) return show_preset(catalog, PresetKind::Cluster, f->name, f->as_json);
    if (f->diff->parsed()) {
      auto lines =
          diff_cluster_profiles(resolved_cluster_profile(catalog, f->diff_a, "clusters diff A"),
                                resolved_cluster_profile(catalog, f->diff_b, "clusters diff B"));
      std::cout << "clusters diff " << f->diff_a << " " << f->diff_b << " (resolved values, "
                << f->diff_a << " -> " << f->diff_b << "):\n";
      if (lines.empty()) std::cout << "  no differences\n";
      for (const auto& line : lines) std::cout << "  " << line << "\n";
      return 0;
    }
    return list_clusters(catalog, f->as_json);
  };
}

}  // namespace hpc
