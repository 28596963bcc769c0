// Reads typed values out of the merged spec document; every error names where the value came
// from (the file and key path, or the flag). Used by spec.cc and site_limits.cc.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error.h"
#include "shell.h"

namespace hpc {

inline constexpr const char* kDefaultsOrigin = "built-in defaults";

// Reads typed values out of the merged document; every error names where the value came from.
class SpecReader {
 public:
  SpecReader(const nlohmann::json& doc, const std::map<std::string, std::string>& sources)
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
    // --preset, --cluster, --strategy; --container sets container.image.
    if (from == "command line") return path == "container.image" ? "--container" : "--" + path;
    return from + ": " + path;
  }

  const nlohmann::json* find(const std::string& path) const {
    const nlohmann::json* node = &doc_;
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
    const nlohmann::json* v = find(path);
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
    const nlohmann::json* v = find(path);
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
    const nlohmann::json* v = find(path);
    return v ? v->get<bool>() : fallback;
  }

  std::vector<std::string> strings(const std::string& path) const {
    const nlohmann::json* v = find(path);
    return v ? v->get<std::vector<std::string>>() : std::vector<std::string>{};
  }

 private:
  const nlohmann::json& doc_;
  const std::map<std::string, std::string>& sources_;
};

}  // namespace hpc
