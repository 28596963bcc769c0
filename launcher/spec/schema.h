// The shape of every file and of the merged spec: which keys exist and what type each holds.
// Checking a file against it gives the "unknown key, did you mean" and "expected an integer"
// errors, naming the file and the key path.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpc {

enum class SchemaType {
  String,
  Integer,
  Boolean,
  StringList,
  StringOrInteger,
  BooleanOrString,
  Object,
  Map,
  Json
};

struct SchemaNode {
  SchemaType type;
  std::vector<std::pair<std::string, SchemaNode>> fields;  // Object: its keys, in doc order
  std::vector<SchemaNode> value;                           // Map: one node, the value's schema

  const SchemaNode* field(const std::string& key) const;
  std::vector<std::string> field_names() const;
};

const SchemaNode& spec_schema();          // the merged spec; also hpclaunch.json and defaults.json
const SchemaNode& shape_file_schema();    // presets/shapes/NAME.json
const SchemaNode& cluster_file_schema();  // presets/clusters/NAME.json

// Throws UserError "origin: key.path: what; fix" for unknown keys and wrong types. `null`
// is accepted anywhere below the top: in a layer it removes the key (see merge_layer).
void check_json(const nlohmann::json& value, const SchemaNode& schema, const std::string& origin,
                const std::string& path = "");

// "--set shape.nodes=4" -> {"shape": {"nodes": 4}}, typed by the schema: strings are taken
// verbatim, integers and booleans parsed strictly, lists and objects as JSON.
nlohmann::json parse_set_assignment(const std::string& assignment);

}  // namespace hpc
