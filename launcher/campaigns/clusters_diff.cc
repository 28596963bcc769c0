#include "campaigns/clusters_diff.h"

#include <fmt/core.h>
#include <map>
#include <set>

#include "shell.h"

using nlohmann::json;

namespace hpc {
namespace {

std::string str_at(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// A shown value in a diff line.
std::string shown(const json* v) {
  if (!v) return "(unset)";
  return v->dump(-1, ' ', false, json::error_handler_t::replace);
}

void flatten(const json& j, const std::string& path, std::map<std::string, json>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [k, v] : j.items()) flatten(v, path.empty() ? k : path + "." + k, out);
    return;
  }
  out[path] = j;
}

}  // namespace

json resolved_cluster_profile(const Catalog& catalog, const std::string& name,
                              const std::string& where) {
  json doc = json::object();
  std::map<std::string, std::string> sources;
  for (const auto& [layer, origin] : catalog.defaults())
    if (layer.contains("profile")) merge_layer(doc, layer["profile"], origin, sources);
  LoadedPreset p = catalog.load(PresetKind::Cluster, name, where);
  merge_layer(doc, p.content, name, sources);
  return doc;
}

std::vector<std::string> diff_cluster_profiles(const json& a, const json& b) {
  std::vector<std::string> lines;
  // Environment variables: one line each, value and reason together.
  std::set<std::string> blocks = {"nccl", "env"};
  for (const auto& block : blocks) {
    json ea = a.contains(block) && a[block].is_object() ? a[block] : json::object();
    json eb = b.contains(block) && b[block].is_object() ? b[block] : json::object();
    std::set<std::string> names;
    for (const auto& [k, v] : ea.items()) names.insert(k);
    for (const auto& [k, v] : eb.items()) names.insert(k);
    for (const auto& n : names) {
      const json* va = ea.contains(n) && ea[n].is_object() && ea[n].contains("value")
                           ? &ea[n]["value"]
                           : nullptr;
      const json* vb = eb.contains(n) && eb[n].is_object() && eb[n].contains("value")
                           ? &eb[n]["value"]
                           : nullptr;
      std::string ra = str_at(ea.contains(n) ? ea[n] : json(), "reason");
      std::string rb = str_at(eb.contains(n) ? eb[n] : json(), "reason");
      bool same_value = (va && vb) ? shown(va) == shown(vb) : (!va && !vb);
      if (same_value && ra == rb) continue;
      std::string line = block + "." + n + ": ";
      if (same_value) {
        line += shown(va) + ", reason \"" + comment_text(ra) + "\" -> \"" + comment_text(rb) + "\"";
      } else {
        line += shown(va) + " -> " + shown(vb);
        if (vb && !rb.empty()) line += " (" + comment_text(rb) + ")";
      }
      lines.push_back(line);
    }
  }
  std::map<std::string, json> fa, fb;
  for (const auto& [k, v] : a.items())
    if (!blocks.count(k) && k != "tuning") flatten(v, k, fa);
  for (const auto& [k, v] : b.items())
    if (!blocks.count(k) && k != "tuning") flatten(v, k, fb);
  std::set<std::string> keys;
  for (const auto& [k, v] : fa) keys.insert(k);
  for (const auto& [k, v] : fb) keys.insert(k);
  std::vector<std::string> other;
  for (const auto& k : keys) {
    const json* va = fa.count(k) ? &fa[k] : nullptr;
    const json* vb = fb.count(k) ? &fb[k] : nullptr;
    if (va && vb && *va == *vb) continue;
    other.push_back(k + ": " + comment_text(shown(va)) + " -> " + comment_text(shown(vb)));
  }
  lines.insert(lines.begin(), other.begin(), other.end());
  auto tuning_summary = [](const json& p) -> std::string {
    if (!p.contains("tuning") || !p["tuning"].is_object()) return "(none)";
    const json& t = p["tuning"];
    size_t n = t.contains("candidates") && t["candidates"].is_array() ? t["candidates"].size() : 0;
    return fmt::format("{} on {}, {} candidate{}, winner {}", str_at(t, "preset"),
                       str_at(t, "date"), n, n == 1 ? "" : "s", str_at(t, "winner"));
  };
  std::string ta = tuning_summary(a), tb = tuning_summary(b);
  bool same_tuning = (a.contains("tuning") ? a["tuning"] : json()) ==
                     (b.contains("tuning") ? b["tuning"] : json());
  if (!same_tuning)
    lines.push_back("tuning (measurements, hpclaunch clusters show): " + comment_text(ta) + " -> " +
                    comment_text(tb));
  return lines;
}

}  // namespace hpc
