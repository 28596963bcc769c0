// The sweep file (examples/sweeps/*.json, docs/sweeps.md): JSON with comments, checked key by key,
// read on top of a SweepConfig.
#include <climits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "campaigns/sweep.h"
#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "spec/suggest.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

// "metric": {"regex": "tokens/s: ([0-9.]+)"}: the figure a user's program prints.
LogMetric read_metric(const std::string& file, const json& v) {
  const std::string fix = "write \"metric\": {\"regex\": \"tokens/s: ([0-9.]+)\"}";
  if (!v.is_object())
    throw UserError(file + ": metric", "expected an object, found " + v.dump(), fix);
  for (const auto& [key, value] : v.items()) {
    if (key != "regex")
      throw UserError(file + ": metric." + key, "unknown key", suggest_fix(key, {"regex"}, "keys"));
  }
  if (!v.contains("regex")) throw UserError(file + ": metric", "no \"regex\"", fix);
  if (!v["regex"].is_string())
    throw UserError(file + ": metric.regex", "expected a string, found " + v["regex"].dump(),
                    "quote the regular expression");
  return make_log_metric(v["regex"].get<std::string>(), file + ": metric.regex");
}

}  // namespace

std::vector<std::string> split_comma_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    out.push_back(item);
  }
  return out;
}

SweepConfig read_sweep_file(const fs::path& path, SweepConfig c) {
  const std::string file = path.string();
  const std::string text = read_input_file(path, "JSON file");
  json j = parse_json_text(text, file);
  if (!j.is_object())
    throw UserError(file, "expected a JSON object", "see examples/sweeps/ and docs/sweeps.md");
  static const std::vector<std::string> keys = {
      "presets",      "strategies",    "scaling", "steps", "cluster",      "max_concurrent",
      "warmup_steps", "start_timeout", "out",     "set",   "trainer_args", "project",
      "template",     "metric",        "launch",  "axes",  "combine",      "repeats"};
  auto strings = [&](const std::string& key, const json& v) {
    if (v.is_string()) return split_comma_list(v.get<std::string>());
    if (!v.is_array())
      throw UserError(file + ": " + key, "expected a list of strings", "write [\"a\", \"b\"]");
    std::vector<std::string> out;
    for (const auto& e : v) {
      if (!e.is_string())
        throw UserError(file + ": " + key, "expected a list of strings, found " + e.dump(),
                        "quote every item");
      out.push_back(e.get<std::string>());
    }
    return out;
  };
  auto string = [&](const std::string& key, const json& v) {
    if (!v.is_string())
      throw UserError(file + ": " + key, "expected a string, found " + v.dump(), "quote the value");
    return v.get<std::string>();
  };
  // Whole numbers that fit an int: 2^64-1 is not read as -1, nor 2^32+1 as 1.
  auto integer = [&](const std::string& key, const json& v) {
    if (!v.is_number_integer())
      throw UserError(file + ": " + key, "expected an integer, found " + v.dump(),
                      "write a whole number");
    const bool fits = v.is_number_unsigned()
                          ? v.get<unsigned long long>() <= INT_MAX
                          : v.get<long long>() >= INT_MIN && v.get<long long>() <= INT_MAX;
    if (!fits)
      throw UserError(file + ": " + key, v.dump() + " is out of range", "write a smaller number");
    return v.get<int>();
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "presets")
      c.presets = strings(key, v);
    else if (key == "strategies")
      c.strategies = strings(key, v);
    else if (key == "scaling")
      c.scaling = string(key, v);
    else if (key == "steps") {
      c.steps = integer(key, v);
      if (c.steps < 1)
        throw UserError(file + ": steps", "must be at least 1 (0 would lift the step limit)",
                        "remove \"steps\" to keep the trainer's own --max-steps");
    } else if (key == "cluster")
      c.cluster = string(key, v);
    else if (key == "max_concurrent")
      c.max_concurrent = static_cast<int>(integer(key, v));
    else if (key == "warmup_steps") {
      c.warmup_steps = static_cast<int>(integer(key, v));
      if (c.warmup_steps < 0)
        throw UserError(file + ": warmup_steps", std::to_string(c.warmup_steps) + " is negative",
                        "write 0 or more steps to drop before averaging (leave it out for max(3, "
                        "20%))");
    }
    else if (key == "start_timeout")
      c.start_timeout_s = integer(key, v);
    else if (key == "out")
      c.out_dir = string(key, v);
    else if (key == "set")
      c.sets = strings(key, v);
    else if (key == "trainer_args") {
      if (!v.is_array())
        throw UserError(file + ": " + key, "expected a list of strings",
                        "write [\"--model\", \"tiny\"]");
      c.trainer_args = strings(key, v);
    } else if (key == "project")
      c.project = string(key, v);
    else if (key == "template")
      c.template_file = string(key, v);
    else if (key == "metric")
      c.metric = read_metric(file, v);
    else if (key == "launch")
      c.launch = string(key, v);
    else if (key == "axes")
      c.axes = read_sweep_axes(file, text, v, j.contains("combine") ? &j["combine"] : nullptr);
    else if (key == "combine") {
      if (!j.contains("axes")) read_sweep_axes(file, text, json::array(), &v);  // checks it
    } else if (key == "repeats") {
      c.repeats = integer(key, v);
      if (c.repeats < 1)
        throw UserError(file + ": repeats", "must be at least 1", "write \"repeats\": 3");
    } else
      throw UserError(file + ": " + key, "unknown key", suggest_fix(key, keys, "keys"));
  }
  return c;
}

}  // namespace hpc
