#include "campaigns/sweep_axes.h"

#include <cctype>
#include <set>

#include "error.h"
#include "json_file.h"
#include "shell.h"
#include "sha256.h"
#include "spec/schema.h"

using nlohmann::json;

namespace hpc {
namespace {

// "file:L:C" of the n-th (0-based) `"needle"` after the first `"axes"` in the file's text, so
// that an error points at the axis it is about; "file" when it cannot be found.
std::string where_in(const std::string& file, const std::string& text, const std::string& needle,
                     size_t nth) {
  size_t pos = text.find("\"axes\"");
  for (size_t i = 0; pos != std::string::npos && i <= nth; ++i)
    pos = text.find("\"" + needle + "\"", pos + 1);
  if (pos == std::string::npos) return file;
  auto [line, column] = line_column_at(text, pos);
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

// A value's text: strings verbatim, numbers and booleans as JSON writes them.
std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

bool is_program_arg_key(const std::string& key) {
  return key == "seed" || key.rfind("trainer.args.", 0) == 0;
}

// The --set path of an axis key: an NCCL or environment variable names its value.
std::string set_path(const std::string& key) {
  for (const char* map : {"profile.nccl.", "profile.env."}) {
    std::string prefix = map;
    if (key.rfind(prefix, 0) == 0 && key.find('.', prefix.size()) == std::string::npos)
      return key + ".value";
  }
  return key;
}

// trainer.args.micro_batch -> --micro-batch; trainer.args.--exact_name -> --exact_name.
std::string program_flag(const std::string& key) {
  if (key == "seed") return "--seed";
  std::string name = key.substr(std::string("trainer.args.").size());
  if (name.rfind("--", 0) == 0) return name;
  for (char& c : name)
    if (c == '_') c = '-';
  return "--" + name;
}

void check_axis_key(const SweepAxis& axis, const std::string& where) {
  const std::string& key = axis.key;
  if (key.empty())
    throw UserError(where, "an empty key",
                    "name a spec key (shape.gpus_per_node), trainer.args.NAME, launch or seed");
  if (key == "preset" || key == "strategy")
    throw UserError(where, "\"" + key + "\" is an axis of its own",
                    "list them under \"" + key +
                        "s\" (presets and strategies are always crossed "
                        "with the other axes)");
  if (key == "launch") {
    for (const auto& v : axis.values)
      if (v != "srun" && v != "torchrun")
        throw UserError(where, "launch \"" + comment_text(v) + "\" cannot be an axis value",
                        "a launch axis compares srun and torchrun for your program");
    return;
  }
  if (is_program_arg_key(key)) {
    if (key == "trainer.args." || key == "trainer.args.--")
      throw UserError(where, "no argument name", "write trainer.args.micro_batch");
    return;
  }
  // Any other key is a spec key, checked with each value as --set checks them.
  for (const auto& v : axis.values) {
    try {
      parse_set_assignment(set_path(key) + "=" + v);
    } catch (const UserError& e) {
      throw UserError(where, e.what(), "use a key and values that --set accepts (docs/spec.md)");
    }
  }
}

}  // namespace

SweepAxes read_sweep_axes(const std::string& file, const std::string& text, const json& j,
                          const json* combine) {
  SweepAxes out;
  if (combine) {
    if (!combine->is_string() || (*combine != "grid" && *combine != "zip"))
      throw UserError(file + ": combine", "expected \"grid\" or \"zip\", found " + combine->dump(),
                      "grid: every combination of the axes; zip: their i-th values together");
    out.zip = *combine == "zip";
  }
  const std::string fix =
      "write \"axes\": [{\"key\": \"trainer.args.micro_batch\", \"values\": "
      "[4, 8]}]";
  if (!j.is_array()) throw UserError(file + ": axes", "expected a list of axes", fix);
  std::set<std::string> keys;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = "axes[" + std::to_string(i) + "]";
    const json& a = j[i];
    if (!a.is_object())
      throw UserError(where_in(file, text, "key", i) + ": " + at, "expected an object", fix);
    for (const auto& [k, v] : a.items()) {
      if (k != "key" && k != "values")
        throw UserError(where_in(file, text, k, 0) + ": " + at + "." + k, "unknown key",
                        "an axis has \"key\" and \"values\"");
    }
    const std::string key_at = where_in(file, text, "key", i) + ": " + at + ".key";
    const std::string values_at = where_in(file, text, "values", i) + ": " + at + ".values";
    if (!a.contains("key") || !a["key"].is_string())
      throw UserError(key_at, "expected a key name as a string", fix);
    SweepAxis axis;
    axis.key = a["key"].get<std::string>();
    if (!keys.insert(axis.key).second)
      throw UserError(key_at, "\"" + comment_text(axis.key) + "\" is an axis twice",
                      "give each key one axis");
    if (!a.contains("values") || !a["values"].is_array() || a["values"].empty())
      throw UserError(values_at, "expected a non-empty list of values", fix);
    std::set<std::string> seen;
    for (const auto& v : a["values"]) {
      if (!v.is_string() && !v.is_number() && !v.is_boolean())
        throw UserError(values_at, "expected strings, numbers or booleans, found " + v.dump(),
                        "write each value as a string or a number");
      std::string t = value_text(v);
      if (!seen.insert(t).second)
        throw UserError(values_at, "\"" + comment_text(t) + "\" is listed twice",
                        "list each value once");
      axis.values.push_back(t);
    }
    check_axis_key(axis, key_at);
    if (out.zip && !out.axes.empty() && axis.values.size() != out.axes.front().values.size())
      throw UserError(values_at,
                      std::to_string(axis.values.size()) + " values, but axes[0] has " +
                          std::to_string(out.axes.front().values.size()),
                      "zipped axes need the same number of values (or use \"combine\": \"grid\")");
    out.axes.push_back(std::move(axis));
  }
  return out;
}

std::vector<AxisValues> expand_axes(const SweepAxes& a) {
  std::vector<AxisValues> out = {{}};
  if (a.axes.empty()) return out;
  if (a.zip) {
    out.assign(a.axes.front().values.size(), {});
    for (size_t i = 0; i < out.size(); ++i)
      for (const auto& axis : a.axes) out[i].push_back({axis.key, axis.values[i]});
    return out;
  }
  for (const auto& axis : a.axes) {
    std::vector<AxisValues> next;
    next.reserve(out.size() * axis.values.size());
    for (const auto& prefix : out) {
      for (const auto& v : axis.values) {
        next.push_back(prefix);
        next.back().push_back({axis.key, v});
      }
    }
    out = std::move(next);
  }
  return out;
}

namespace {

// a x b, or nullopt when it does not fit 64 bits.
std::optional<std::uint64_t> times(std::optional<std::uint64_t> a, std::uint64_t b) {
  std::uint64_t product = 0;
  if (!a || __builtin_mul_overflow(*a, b, &product)) return std::nullopt;
  return product;
}

}  // namespace

std::optional<std::uint64_t> axis_combination_count(const SweepAxes& a) {
  if (a.axes.empty()) return 1;
  if (a.zip) return a.axes.front().values.size();
  std::optional<std::uint64_t> count = 1;
  for (const auto& axis : a.axes) count = times(count, axis.values.size());
  return count;
}

void check_sweep_size(const SweepAxes& axes, std::uint64_t presets, std::uint64_t series,
                      std::uint64_t repeats) {
  const std::optional<std::uint64_t> combos = axis_combination_count(axes);
  const std::optional<std::uint64_t> points = times(times(combos, presets), series);
  const std::optional<std::uint64_t> runs = times(points, repeats);
  if (runs && *runs <= kMaxSweepRuns) return;
  auto text = [](const std::optional<std::uint64_t>& n) {
    return n ? std::to_string(*n) : std::string("more than 18446744073709551615");
  };
  const std::string count = text(points) + " points (" + std::to_string(presets) + " preset" +
                            (presets == 1 ? "" : "s") + " x " + std::to_string(series) +
                            " series x " + text(combos) + " axis combination" +
                            (combos == std::optional<std::uint64_t>(1) ? "" : "s") + ") x " +
                            std::to_string(repeats) + " repeat" + (repeats == 1 ? "" : "s") +
                            (runs ? " = " + std::to_string(*runs) + " runs" : "");
  throw UserError("sweep", count + ", over the limit of " + std::to_string(kMaxSweepRuns) + " runs",
                  "pass fewer presets, axis values or --repeats, or split the sweep into parts");
}

std::string safe_value_word(const std::string& value) {
  std::string word;
  bool changed = value.empty() || value[0] == '.' || value.size() > 40;
  for (unsigned char c : value.substr(0, 40)) {
    bool ok = std::isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-';
    word += ok ? static_cast<char>(c) : '_';
    changed = changed || !ok;
  }
  if (!changed) return word;
  if (!word.empty() && word[0] == '.') word[0] = '_';
  return word + (word.empty() ? "" : "_") + sha256_hex(value).substr(0, 8);
}

std::string axis_short_name(const std::string& key) {
  std::string name = key.substr(key.rfind('.') + 1);
  while (!name.empty() && name[0] == '-') name.erase(0, 1);
  return safe_value_word(name);
}

AxisEffect axis_effect(const AxisValues& values) {
  AxisEffect e;
  for (const auto& [key, value] : values) {
    if (key == "launch")
      e.launch = value;
    else if (is_program_arg_key(key))
      e.args.push_back({program_flag(key), value});
    else {
      e.sets.push_back(set_path(key) + "=" + value);
      // An NCCL or environment variable says why it is set, beside it in the script.
      if (set_path(key) != key)
        e.sets.push_back(key + ".reason=a sweep axis (hpclaunch sweep: " + key + ")");
    }
    if (key.rfind("shape.", 0) == 0) e.shape = true;
  }
  return e;
}

std::vector<std::string> with_program_args(
    std::vector<std::string> args,
    const std::vector<std::pair<std::string, std::string>>& replace) {
  for (const auto& [flag, value] : replace) {
    std::vector<std::string> kept;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == flag) {
        ++i;  // and its value
        continue;
      }
      if (args[i].rfind(flag + "=", 0) == 0) continue;
      kept.push_back(args[i]);
    }
    kept.push_back(flag);
    kept.push_back(value);
    args = std::move(kept);
  }
  return args;
}

}  // namespace hpc
