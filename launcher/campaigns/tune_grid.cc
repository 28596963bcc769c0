#include "campaigns/tune_grid.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/core.h>

#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "shell.h"
#include "spec/env_names.h"
#include "spec/suggest.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

constexpr const char* kGridFix = "see docs/tuning.md for the grid file";

// A grid value: a string, an integer (as its digits) or null (unset).
TuneValue grid_value(const json& v, const std::string& where) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s.empty())
      throw UserError(where, "an empty value", "write null to leave the variable unset");
    if (has_control_chars(s))
      throw UserError(where, "contains a newline or control character", "remove it");
    return s;
  }
  if (v.is_number_integer()) return v.dump();  // 18446744073709551615 stays itself
  throw UserError(where, "expected a string, an integer or null, got " + v.dump(),
                  "write the value in quotes, e.g. \"Ring\" (null: leave the variable unset)");
}

void check_var_name(const std::string& name, const std::string& where) {
  if (!is_env_name(name)) {
    throw UserError(where, "\"" + comment_text(name) + "\" is not an environment variable name",
                    "use letters, digits and '_', e.g. NCCL_ALGO");
  }
  const std::string reserved = reserved_env_reason(name);  // the profile's rule (spec/env_names.h)
  if (!reserved.empty()) throw UserError(where, reserved, "remove it from the grid");
}

}  // namespace

std::string tune_value_text(const TuneValue& v) { return v ? *v : "(unset)"; }

std::string TuneCandidate::describe() const {
  std::string s;
  for (const auto& [name, v] : vars) s += (s.empty() ? "" : " ") + name + "=" + tune_value_text(v);
  return s.empty() ? "(no variables)" : s;
}

TuneGrid parse_tune_grid(const json& j, const std::string& origin) {
  TuneGrid g;
  g.origin = origin;
  if (!j.is_object()) {
    throw UserError(origin, "expected a JSON object with \"variables\" and/or \"candidates\"",
                    kGridFix);
  }
  static const std::vector<std::string> keys = {"variables", "candidates"};
  for (const auto& [key, v] : j.items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      throw UserError(origin + ": " + key, "unknown key", suggest_fix(key, keys, "keys"));
    }
  }
  if (j.contains("variables")) {
    const json& vars = j["variables"];
    if (!vars.is_object()) {
      throw UserError(origin + ": variables",
                      "expected an object (variable name -> list of values)",
                      "write {\"NCCL_ALGO\": [\"Ring\", \"Tree\"]}");
    }
    for (const auto& [name, values] : vars.items()) {
      std::string where = origin + ": variables." + comment_text(name);
      check_var_name(name, where);
      if (!values.is_array()) {
        throw UserError(where,
                        "expected a list of values, got " +
                            (values.is_object() ? std::string("an object") : values.dump()),
                        "write [\"Ring\", \"Tree\"]; explicit sets go under \"candidates\"");
      }
      if (values.empty())
        throw UserError(where, "an empty list of values",
                        "list at least one value, or remove the variable");
      std::vector<TuneValue> list;
      for (size_t i = 0; i < values.size(); ++i) {
        TuneValue v = grid_value(values[i], where + "[" + std::to_string(i) + "]");
        if (std::find(list.begin(), list.end(), v) != list.end()) {
          throw UserError(where, tune_value_text(v) + " is listed twice", "list each value once");
        }
        list.push_back(v);
      }
      g.variables.emplace_back(name, std::move(list));
    }
  }
  if (j.contains("candidates")) {
    const json& sets = j["candidates"];
    if (!sets.is_array()) {
      throw UserError(origin + ": candidates",
                      "expected a list of objects (variable name -> value)",
                      "write [{\"NCCL_ALGO\": \"Ring\"}, {\"NCCL_ALGO\": \"Tree\"}]");
    }
    for (size_t i = 0; i < sets.size(); ++i) {
      std::string where = origin + ": candidates[" + std::to_string(i) + "]";
      if (!sets[i].is_object()) {
        throw UserError(where, "expected an object (variable name -> value), got " + sets[i].dump(),
                        "write {\"NCCL_ALGO\": \"Ring\", \"NCCL_PROTO\": \"Simple\"}");
      }
      if (sets[i].empty())
        throw UserError(where, "an empty candidate", "name at least one variable, or remove it");
      std::vector<std::pair<std::string, TuneValue>> set;
      for (const auto& [name, v] : sets[i].items()) {
        check_var_name(name, where + "." + comment_text(name));
        set.emplace_back(name, grid_value(v, where + "." + comment_text(name)));
      }
      g.sets.push_back(std::move(set));
    }
  }
  if (g.variables.empty() && g.sets.empty()) {
    throw UserError(origin, "the grid has no candidates",
                    "add \"variables\": {\"NCCL_ALGO\": [\"Ring\", \"Tree\"]} or \"candidates\": "
                    "[...] (docs/tuning.md)");
  }
  return g;
}

TuneGrid read_tune_grid(const fs::path& path) {
  if (!input_path_present(path)) {
    throw UserError(path.string(), "no such grid file", "check the path given to --grid");
  }
  return parse_tune_grid(read_json_file(path), path.string());
}

TuneGrid default_tune_grid(const ClusterProfile& profile) {
  TuneGrid g;
  g.origin = "default grid";
  g.variables = {{"NCCL_ALGO", {"Ring", "Tree"}},
                 {"NCCL_PROTO", {"Simple", "LL128"}},
                 {"NCCL_P2P_DISABLE", {"0", "1"}}};
  for (const char* name : {"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"}) {
    for (const auto& v : profile.nccl) {
      if (v.name == name && !v.value.empty())
        g.variables.push_back({name, {v.value, std::nullopt}});
    }
  }
  return g;
}

std::vector<TuneCandidate> expand_tune_grid(const TuneGrid& grid, int max_candidates) {
  long long total = grid.variables.empty() ? 0 : 1;
  for (const auto& [name, values] : grid.variables) {
    total *= static_cast<long long>(values.size());
    if (total > 1000000) break;
  }
  total += static_cast<long long>(grid.sets.size());
  if (total == 0) {
    throw UserError(grid.origin, "the grid has no candidates",
                    "list variables and values (docs/tuning.md)");
  }
  if (total > max_candidates) {
    throw UserError(
        grid.origin,
        fmt::format("{}{} candidates, more than {} (one benchmark job each)",
                    total > 1000000 ? "over " : "", total, max_candidates),
        fmt::format("shrink the grid, or pass --max-candidates {} to run them all", total));
  }
  std::vector<TuneCandidate> out;
  if (!grid.variables.empty()) {
    std::vector<size_t> index(grid.variables.size(), 0);
    while (true) {
      TuneCandidate c;
      for (size_t i = 0; i < grid.variables.size(); ++i)
        c.vars.emplace_back(grid.variables[i].first, grid.variables[i].second[index[i]]);
      out.push_back(std::move(c));
      // The last variable varies fastest; stop when the first one wraps around.
      size_t i = grid.variables.size();
      bool carry = true;
      while (i > 0 && carry) {
        --i;
        if (++index[i] < grid.variables[i].second.size())
          carry = false;
        else
          index[i] = 0;
      }
      if (carry) break;
    }
  }
  for (const auto& set : grid.sets) out.push_back(TuneCandidate{"", set});
  for (size_t i = 0; i < out.size(); ++i) out[i].id = "c" + std::to_string(i + 1);
  return out;
}

}  // namespace hpc
