// Where shape presets, cluster profiles, defaults and templates come from.
//
// Directories are searched from the highest priority down:
//   1. each entry of HPCLAUNCH_PATH (colon-separated, the first entry wins, like PATH)
//   2. $XDG_CONFIG_HOME/hpclaunch (default ~/.config/hpclaunch)
//   3. the built-in data directory (presets/ and templates/ installed with hpclaunch)
// A user directory holds defaults.json, shapes/NAME.json, clusters/NAME.json and
// templates/sbatch.sh.mustache; the built-in one has the same layout under presets/.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpc {

enum class PresetKind { Shape, Cluster };

struct SearchDir {
  std::filesystem::path presets;    // holds defaults.json, shapes/, clusters/
  std::filesystem::path templates;  // holds sbatch.sh.mustache
  std::string label;                // "built-in", "$XDG_CONFIG_HOME/hpclaunch", "HPCLAUNCH_PATH"
};

// A preset or profile as loaded: the merged content of its `extends` chain.
struct LoadedPreset {
  std::string name;
  nlohmann::json content;                      // schema of shape_file_schema / cluster_file_schema
  std::vector<std::string> files;              // base first, the named file last
  std::map<std::string, std::string> sources;  // leaf key path -> file that set it
  // A shape named NnMg that no file holds: N nodes x M GPUs by its name, the other keys from
  // the nearest shape preset, named here ("" for a preset file).
  std::string by_name_base;
};

// N and M of a shape name "NnMg" (1 <= N <= 100000, 1 <= M <= 64), or nothing.
std::optional<std::pair<int, int>> shape_by_name(const std::string& name);

class Catalog {
 public:
  // dirs: lowest priority first.
  explicit Catalog(std::vector<SearchDir> dirs);

  // The built-in data directory: $HPCLAUNCH_DATA_DIR, else <exe>/../share/hpclaunch when it
  // exists (installed), else the source tree this binary was built from. Throws UserError when
  // HPCLAUNCH_DATA_DIR names no data directory, or when none is found.
  static std::filesystem::path builtin_data_dir();
  // Built-in dir plus the user's directories, from the environment.
  static Catalog from_environment();
  // The user's directory: $XDG_CONFIG_HOME/hpclaunch, else ~/.config/hpclaunch; nothing when
  // neither variable is set.
  static std::optional<std::filesystem::path> user_dir();

  // Sorted, the union of all dirs. Entries that cannot be a preset (not NAME.json, a name that
  // is not valid, a folder, a FIFO, a dangling link) are left out; `skipped`, when given, gets
  // one line for each ("FILE: skipped: why; what to do"). Hidden entries (".x") are ignored.
  std::vector<std::string> names(PresetKind kind,
                                 std::vector<std::string>* skipped = nullptr) const;
  bool has(PresetKind kind, const std::string& name) const;
  // Throws UserError for unknown names (with a did-you-mean), bad files, `extends` cycles.
  // `where` names what gave the name in messages: "--preset" / "--cluster" when empty.
  LoadedPreset load(PresetKind kind, const std::string& name, const std::string& where = "") const;
  // defaults.json of every directory that has one, lowest priority first: (content, file).
  std::vector<std::pair<nlohmann::json, std::string>> defaults() const;
  // The template that wins: a user's templates/sbatch.sh.mustache or the built-in one.
  std::filesystem::path default_template() const;

  const std::vector<SearchDir>& dirs() const { return dirs_; }

 private:
  std::optional<size_t> find(PresetKind kind, const std::string& name, size_t below) const;
  // chain: the files of the `extends` chain being loaded, to report cycles.
  void load_into(PresetKind kind, const std::string& name, size_t below, LoadedPreset& out,
                 std::vector<std::string>& chain) const;
  void load_shape_by_name(const std::string& name, std::pair<int, int> shape, LoadedPreset& out,
                          std::vector<std::string>& chain) const;

  std::vector<SearchDir> dirs_;
};

const char* kind_noun(PresetKind kind);  // "preset" / "cluster profile"

// Names are used as file names: letters, digits, '.', '_', '+', '-'; not starting with '.'.
void check_preset_name(PresetKind kind, const std::string& name, const std::string& where);

// Deep merge of a layer into `base`: objects merge key by key, anything else replaces, null
// removes. `sources` records, for each leaf key path the layer sets, the layer's origin.
void merge_layer(nlohmann::json& base, const nlohmann::json& layer, const std::string& origin,
                 std::map<std::string, std::string>& sources, const std::string& path = "");

}  // namespace hpc
