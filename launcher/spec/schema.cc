#include "spec/schema.h"

#include "error.h"
#include "json_file.h"
#include "shell.h"
#include "spec/suggest.h"
#include "text.h"

namespace hpc {
namespace {

using Fields = std::vector<std::pair<std::string, SchemaNode>>;

SchemaNode leaf(SchemaType t) { return SchemaNode{t, {}, {}}; }
SchemaNode object(Fields f) { return SchemaNode{SchemaType::Object, std::move(f), {}}; }
SchemaNode map_of(SchemaNode v) { return SchemaNode{SchemaType::Map, {}, {std::move(v)}}; }

const SchemaNode kString = leaf(SchemaType::String);
const SchemaNode kInteger = leaf(SchemaType::Integer);
const SchemaNode kBoolean = leaf(SchemaType::Boolean);
const SchemaNode kStringList = leaf(SchemaType::StringList);

Fields shape_fields() {
  return {{"description", kString},   {"nodes", kInteger},      {"gpus_per_node", kInteger},
          {"cpus_per_gpu", kInteger}, {"mem_per_gpu", kString}, {"time", kString}};
}

Fields profile_fields() {
  // An environment variable with the reason it is set (printed as a comment in the script).
  SchemaNode env_var = object({{"value", leaf(SchemaType::StringOrInteger)}, {"reason", kString}});
  return {{"description", kString},
          {"required", kStringList},
          {"partition", kString},
          {"account", kString},
          {"qos", kString},
          {"constraint", kString},
          {"reservation", kString},
          {"exclusive", kBoolean},
          {"modules", kStringList},
          {"module_purge", kString},
          {"lmod_init", kString},
          {"python", object({{"venv", kString}, {"conda", kString}})},
          {"setup", kStringList},
          {"sbatch_extra", kStringList},
          {"gpu_request", kString},
          {"gpu_type", kString},
          {"ib_suffix", kString},
          {"resolve_master_addr", kBoolean},
          {"port_range", object({{"min", kInteger}, {"max", kInteger}})},
          {"cpu_bind", kString},
          {"gpu_bind", kString},
          {"max_gpus_per_node", kInteger},
          {"max_nodes", kInteger},
          // The site's limits and defaults (docs/clusters.md, spec/site_limits.h).
          {"partitions", map_of(object({{"max_time", kString},
                                        {"max_nodes", kInteger},
                                        {"gpus_per_node", kInteger},
                                        {"cpus_per_node", kInteger},
                                        {"mem_per_node", kString}}))},
          {"qos_limits", map_of(object({{"max_time", kString}, {"max_nodes", kInteger}}))},
          {"qos_from_time", kBoolean},
          {"cpus_per_gpu", kInteger},
          {"mem_per_gpu", kString},
          // A hint per required key, added to the error when it is missing.
          {"hints", map_of(kString)},
          {"nccl", map_of(env_var)},
          {"env", map_of(env_var)},
          // What `hpclaunch tune` measured (docs/tuning.md): a record, not read by the renderer.
          {"tuning", object({{"date", kString},
                             {"cluster", kString},
                             {"preset", kString},
                             {"nodes", kStringList},
                             {"metric", kString},
                             {"winner", kString},
                             {"command", kString},
                             {"candidates", leaf(SchemaType::Json)}})}};
}

Fields with_extends(Fields f) {
  f.insert(f.begin(), {"extends", kString});
  return f;
}

const char* type_name(SchemaType t) {
  switch (t) {
    case SchemaType::String:
      return "a string";
    case SchemaType::Integer:
      return "an integer";
    case SchemaType::Boolean:
      return "true or false";
    case SchemaType::StringList:
      return "a list of strings";
    case SchemaType::StringOrInteger:
      return "a string or an integer";
    case SchemaType::BooleanOrString:
      return "true, false or a string";
    case SchemaType::Object:
      return "an object";
    case SchemaType::Map:
      return "an object";
    case SchemaType::Json:
      return "any JSON value";
  }
  return "?";
}

std::string json_type_name(const nlohmann::json& v) {
  if (v.is_number_integer()) return "the integer " + v.dump();
  if (v.is_number()) return "the number " + v.dump();
  if (v.is_string()) return "the string " + v.dump();
  if (v.is_boolean()) return std::string("the boolean ") + v.dump();
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

std::string type_fix(SchemaType t, const nlohmann::json& v) {
  if (t == SchemaType::Integer && v.is_string()) return "write the number without quotes";
  if (t == SchemaType::Integer) return "write a whole number, e.g. 4";
  if (t == SchemaType::String) return "put the value in double quotes";
  if (t == SchemaType::StringList) return "write a list such as [\"a\", \"b\"]";
  if (t == SchemaType::Boolean) return "write true or false without quotes";
  if (t == SchemaType::Object || t == SchemaType::Map) return "write an object { ... }";
  return "fix the value";
}

std::string join_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

bool matches(const nlohmann::json& v, SchemaType t) {
  switch (t) {
    case SchemaType::String:
      return v.is_string();
    case SchemaType::Integer:
      return v.is_number_integer();
    case SchemaType::Boolean:
      return v.is_boolean();
    case SchemaType::StringOrInteger:
      return v.is_string() || v.is_number_integer();
    case SchemaType::BooleanOrString:
      return v.is_boolean() || v.is_string();
    case SchemaType::StringList:
      if (!v.is_array()) return false;
      for (const auto& e : v)
        if (!e.is_string()) return false;
      return true;
    case SchemaType::Object:
    case SchemaType::Map:
      return v.is_object();
    case SchemaType::Json:
      return true;
  }
  return false;
}

// Parses a --set value typed by the schema node it lands on.
nlohmann::json parse_set_value(const std::string& text, const SchemaNode& node,
                               const std::string& where) {
  // `--set key=null` removes the key, whatever its type (as null does in a file).
  if (text == "null") return nullptr;
  switch (node.type) {
    case SchemaType::String:
    case SchemaType::StringOrInteger:
      return text;
    case SchemaType::Integer: {
      // The same rule as the flags' numbers and JSON's: "+2", " 2", "2 " and "010" are refused.
      if (auto v = parse_plain_whole_number(text)) return *v;
      if (is_plain_whole_number(text))
        throw UserError(where, text + " is out of range", "write a smaller number");
      throw UserError(where, "expected an integer, got \"" + comment_text(text) + "\"",
                      plain_number_fix(text));
    }
    case SchemaType::Boolean:
      if (text == "true" || text == "yes" || text == "1") return true;
      if (text == "false" || text == "no" || text == "0") return false;
      throw UserError(where, "expected true or false, got \"" + text + "\"", "write true or false");
    case SchemaType::BooleanOrString:
      if (text == "true") return true;
      if (text == "false") return false;
      return text;
    case SchemaType::StringList:
    case SchemaType::Object:
    case SchemaType::Map:
    case SchemaType::Json: {
      nlohmann::json v = parse_json_text(
          text, where, "write the value as JSON, e.g. [\"a\", \"b\"] or {\"key\": \"value\"}");
      return v;
    }
  }
  return text;
}

}  // namespace

const SchemaNode* SchemaNode::field(const std::string& key) const {
  for (const auto& [name, node] : fields)
    if (name == key) return &node;
  return nullptr;
}

std::vector<std::string> SchemaNode::field_names() const {
  std::vector<std::string> names;
  for (const auto& f : fields) names.push_back(f.first);
  return names;
}

const SchemaNode& spec_schema() {
  static const SchemaNode schema = object({
      {"preset", kString},
      {"cluster", kString},
      {"strategy", kString},
      {"launch", kString},
      {"torchrun", object({{"command", kStringList}})},
      {"shape", object(shape_fields())},
      {"profile", object(profile_fields())},
      {"job", object({{"name", kString},
                      {"output", kString},
                      {"error", kString},
                      {"chdir", kString},
                      {"signal", kString},
                      {"signal_seconds", kInteger},
                      {"max_requeues", kInteger},
                      {"srun_wait", kInteger},
                      {"hang_seconds", kInteger},
                      {"start_seconds", kInteger},
                      {"env_from_submit", kStringList},
                      {"after", kStringList},
                      {"array", kString},
                      {"mail_type", kStringList},
                      {"mail_user", kString},
                      // The node check before training (spec/job_features.h, docs/node-check.md).
                      {"preflight", object({{"enabled", kBoolean},
                                            {"margin", kInteger},
                                            {"timeout", kInteger},
                                            {"hpctrain", kString}})}})},
      {"trainer", object({{"program", kString}, {"command", kString}, {"args", kStringList}})},
      // The container each task's program runs in (spec/container.h).
      {"container", object({{"runtime", kString},
                            {"image", kString},
                            {"mounts", kStringList},
                            {"options", kStringList},
                            {"workdir", kString},
                            {"gpus", leaf(SchemaType::BooleanOrString)}})},
  });
  return schema;
}

const SchemaNode& shape_file_schema() {
  static const SchemaNode schema = object(with_extends(shape_fields()));
  return schema;
}

const SchemaNode& cluster_file_schema() {
  static const SchemaNode schema = object(with_extends(profile_fields()));
  return schema;
}

void check_json(const nlohmann::json& value, const SchemaNode& schema, const std::string& origin,
                const std::string& path) {
  std::string where = path.empty() ? origin : origin + ": " + path;
  if (value.is_null() && !path.empty()) return;  // removes the key when layered
  if (!matches(value, schema.type)) {
    throw UserError(
        where, std::string("expected ") + type_name(schema.type) + ", got " + json_type_name(value),
        type_fix(schema.type, value));
  }
  if (schema.type == SchemaType::Object) {
    for (const auto& [key, child] : value.items()) {
      const SchemaNode* node = schema.field(key);
      if (!node) {
        throw UserError(origin + ": " + join_path(path, key), "unknown key",
                        suggest_fix(key, schema.field_names(), "keys here"));
      }
      check_json(child, *node, origin, join_path(path, key));
    }
  } else if (schema.type == SchemaType::Map) {
    for (const auto& [key, child] : value.items())
      check_json(child, schema.value.front(), origin, join_path(path, key));
  }
}

nlohmann::json parse_set_assignment(const std::string& assignment) {
  std::string where = "--set " + assignment;
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw UserError(where, "expected KEY.PATH=VALUE", "write e.g. --set shape.nodes=4");
  }
  std::string key_path = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);

  std::vector<std::string> keys;
  for (size_t start = 0;;) {
    size_t dot = key_path.find('.', start);
    keys.push_back(key_path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  const SchemaNode* node = &spec_schema();
  std::string walked;
  for (const auto& key : keys) {
    if (key.empty()) {
      throw UserError(where, "empty key in \"" + key_path + "\"",
                      "separate keys with single dots, e.g. profile.port_range.min");
    }
    walked = join_path(walked, key);
    if (node->type == SchemaType::Object) {
      const SchemaNode* next = node->field(key);
      if (!next) {
        throw UserError("--set " + walked, "unknown key",
                        suggest_fix(key, node->field_names(), "keys here"));
      }
      node = next;
    } else if (node->type == SchemaType::Map) {
      node = &node->value.front();
    } else {
      throw UserError("--set " + walked, "the value above it is not an object",
                      "set " + walked.substr(0, walked.rfind('.')) + "=VALUE instead");
    }
  }
  nlohmann::json value = parse_set_value(text, *node, "--set " + key_path);
  check_json(value, *node, "--set", key_path);

  nlohmann::json patch = value;
  for (auto it = keys.rbegin(); it != keys.rend(); ++it) patch = nlohmann::json{{*it, patch}};
  return patch;
}

}  // namespace hpc
