#include "spec/catalog.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "error.h"
#include "input_file.h"
#include "json_file.h"
#include "shell.h"
#include "spec/schema.h"
#include "spec/suggest.h"

#ifndef HPC_SOURCE_DIR
#define HPC_SOURCE_DIR ""
#endif
#ifndef HPC_DATA_SUBDIR
#define HPC_DATA_SUBDIR "share/hpclaunch"
#endif

namespace fs = std::filesystem;

namespace hpc {
namespace {

const char* kind_subdir(PresetKind kind) {
  return kind == PresetKind::Shape ? "shapes" : "clusters";
}

const char* kind_plural(PresetKind kind) {
  return kind == PresetKind::Shape ? "presets" : "cluster profiles";
}

fs::path kind_file(const SearchDir& dir, PresetKind kind, const std::string& name) {
  return dir.presets / kind_subdir(kind) / (name + ".json");
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool valid_preset_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 128 && name[0] != '.';
  for (unsigned char c : name)
    ok = ok && (std::isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-');
  return ok;
}

// Why a directory entry of shapes/ or clusters/ is not listed; "" when it is a preset.
std::string listing_problem(PresetKind kind, const fs::path& p) {
  if (p.extension() != ".json") return "not a .json file";
  if (!valid_preset_name(p.stem().string())) {
    return std::string("not a valid ") + kind_noun(kind) +
           " name; rename it: letters, digits, '.', '_', '+' and '-'";
  }
  std::error_code ec;
  auto status = fs::status(p, ec);
  if (fs::is_regular_file(status)) return "";
  if (ec || !fs::exists(status)) return "a dangling or looping symbolic link; fix or remove it";
  if (fs::is_directory(status)) return "a directory, not a file; rename or remove it";
  return "not a regular file; replace or remove it";
}

// How a file is named in messages and sources: built-in files relative to the data directory
// ("presets/clusters/jsc.json", the same on every machine), user files by their full path.
std::string display_name(const SearchDir& dir, const fs::path& file) {
  if (dir.label != "built-in") return file.string();
  return file.lexically_relative(dir.presets.parent_path()).string();
}

fs::path executable_path() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p;
}

}  // namespace

const char* kind_noun(PresetKind kind) {
  return kind == PresetKind::Shape ? "preset" : "cluster profile";
}

void check_preset_name(PresetKind kind, const std::string& name, const std::string& where) {
  if (!valid_preset_name(name)) {
    throw UserError(where,
                    std::string("\"") + name + "\" is not a valid " + kind_noun(kind) + " name",
                    "use letters, digits, '.', '_', '+' and '-' (it names a file)");
  }
}

void merge_layer(nlohmann::json& base, const nlohmann::json& layer, const std::string& origin,
                 std::map<std::string, std::string>& sources, const std::string& path) {
  for (const auto& [key, value] : layer.items()) {
    std::string sub = path.empty() ? key : path + "." + key;
    if (value.is_null()) {
      base.erase(key);
      for (auto it = sources.lower_bound(sub); it != sources.end() && it->first.rfind(sub, 0) == 0;)
        it = sources.erase(it);
      continue;
    }
    if (value.is_object()) {
      if (!base.contains(key) || !base[key].is_object()) base[key] = nlohmann::json::object();
      merge_layer(base[key], value, origin, sources, sub);
      if (value.empty()) sources[sub] = origin;
      continue;
    }
    base[key] = value;
    sources[sub] = origin;
  }
}

Catalog::Catalog(std::vector<SearchDir> dirs) : dirs_(std::move(dirs)) {}

fs::path Catalog::builtin_data_dir() {
  if (const char* env = std::getenv("HPCLAUNCH_DATA_DIR"); env && *env) {
    // Set but wrong is a mistake to report, not a reason to run without presets.
    if (!input_path_present(fs::path(env) / "presets" / "defaults.json")) {
      throw UserError(std::string("HPCLAUNCH_DATA_DIR=") + env,
                      "not a hpclaunch data directory (no presets/defaults.json there)",
                      "set it to the folder that holds presets/ and templates/, or unset it");
    }
    return env;
  }
  fs::path exe = executable_path();
  if (!exe.empty()) {
    fs::path installed = exe.parent_path().parent_path() / HPC_DATA_SUBDIR;
    if (is_file(installed / "presets" / "defaults.json")) return installed;
  }
  fs::path source = HPC_SOURCE_DIR;
  if (!input_path_present(source / "presets" / "defaults.json")) {
    throw UserError("",
                    "hpclaunch finds no data directory (presets/defaults.json) beside " +
                        std::string(exe.empty() ? "its binary" : exe.string()) + " or in " +
                        (source.empty() ? "its source tree" : source.string()),
                    "set HPCLAUNCH_DATA_DIR to the folder that holds presets/ and templates/");
  }
  return source;
}

std::optional<fs::path> Catalog::user_dir() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    return fs::path(xdg) / "hpclaunch";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".config" / "hpclaunch";
  return std::nullopt;
}

Catalog Catalog::from_environment() {
  std::vector<SearchDir> dirs;
  fs::path data = builtin_data_dir();
  dirs.push_back({data / "presets", data / "templates", "built-in"});

  if (const auto d = user_dir()) dirs.push_back({*d, *d / "templates", d->string()});
  if (const char* path = std::getenv("HPCLAUNCH_PATH"); path && *path) {
    std::vector<fs::path> entries;
    std::string all = path;
    for (size_t start = 0;;) {
      size_t colon = all.find(':', start);
      std::string e = all.substr(start, colon - start);
      if (!e.empty()) entries.push_back(e);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    // The first entry has the highest priority, so it goes last.
    for (auto it = entries.rbegin(); it != entries.rend(); ++it)
      dirs.push_back({*it, *it / "templates", it->string()});
  }
  return Catalog(std::move(dirs));
}

std::vector<std::string> Catalog::names(PresetKind kind, std::vector<std::string>* skipped) const {
  std::set<std::string> names;
  for (const auto& dir : dirs_) {
    std::error_code ec;
    fs::directory_iterator it(dir.presets / kind_subdir(kind), ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const fs::path& p = it->path();
      if (p.filename().string()[0] == '.') continue;  // editors' backups, hidden on purpose
      std::string problem = listing_problem(kind, p);
      if (problem.empty())
        names.insert(p.stem().string());
      else if (skipped)
        skipped->push_back(comment_text(display_name(dir, p)) + ": skipped: " + problem);
    }
  }
  if (skipped) std::sort(skipped->begin(), skipped->end());
  return {names.begin(), names.end()};
}

std::optional<size_t> Catalog::find(PresetKind kind, const std::string& name, size_t below) const {
  // Anything at the path counts (a folder, a dangling link): loading it says what is wrong,
  // rather than falling through to a lower-priority file of the same name.
  for (size_t i = std::min(below, dirs_.size()); i-- > 0;)
    if (input_path_present(kind_file(dirs_[i], kind, name))) return i;
  return std::nullopt;
}

std::optional<std::pair<int, int>> shape_by_name(const std::string& name) {
  const size_t n = name.find('n');
  if (n == 0 || n == std::string::npos || name.size() < n + 3 || name.back() != 'g')
    return std::nullopt;
  const std::string nodes = name.substr(0, n), gpus = name.substr(n + 1, name.size() - n - 2);
  const auto number = [](const std::string& s, int max) -> int {
    if (s.empty() || s.size() > 6 || s[0] == '0') return 0;
    for (unsigned char c : s)
      if (!std::isdigit(c)) return 0;
    const int v = std::stoi(s);
    return v <= max ? v : 0;
  };
  const int N = number(nodes, 100000), M = number(gpus, 64);
  if (N == 0 || M == 0) return std::nullopt;
  return std::make_pair(N, M);
}

bool Catalog::has(PresetKind kind, const std::string& name) const {
  return find(kind, name, dirs_.size()).has_value();
}

void Catalog::load_into(PresetKind kind, const std::string& name, size_t below, LoadedPreset& out,
                        std::vector<std::string>& chain) const {
  auto index = find(kind, name, below);
  const auto by_name =
      kind == PresetKind::Shape && chain.empty() ? shape_by_name(name) : std::nullopt;
  if (!index && by_name) return load_shape_by_name(name, *by_name, out, chain);
  if (!index) {
    throw UserError("", std::string("no ") + kind_noun(kind) + " named \"" + name + "\"",
                    suggest_fix(name, names(kind), kind_plural(kind)) +
                        (kind == PresetKind::Shape ? " (hpclaunch presets list)"
                                                   : " (hpclaunch clusters list)"));
  }
  fs::path file = kind_file(dirs_[*index], kind, name);
  std::string shown = display_name(dirs_[*index], file);
  for (const auto& f : chain) {
    if (f == shown) {
      std::string cycle;
      for (const auto& c : chain) cycle += c + " -> ";
      throw UserError(chain.back() + ": extends", "cycle: " + cycle + shown,
                      "make \"extends\" name a base that does not extend this file");
    }
  }
  chain.push_back(shown);
  // Parse errors name the full path; a folder, FIFO or dangling link is refused by name.
  nlohmann::json content = read_json_file(file);
  check_json(content, kind == PresetKind::Shape ? shape_file_schema() : cluster_file_schema(),
             shown);
  if (content.contains("extends") && content["extends"].is_string()) {
    std::string base = content["extends"].get<std::string>();
    check_preset_name(kind, base, shown + ": extends");
    // A file extending its own name builds on the lower-priority file of that name (a user's
    // jsc.json that tweaks the built-in jsc); any other name is looked up everywhere.
    size_t base_below = base == name ? *index : dirs_.size();
    if (base == name && !find(kind, base, base_below)) {
      throw UserError(
          shown + ": extends",
          std::string("no lower-priority ") + kind_noun(kind) + " named \"" + base + "\" to extend",
          "remove \"extends\" or name another " + std::string(kind_noun(kind)));
    }
    try {
      load_into(kind, base, base_below, out, chain);
    } catch (const UserError& e) {
      std::string msg = e.what();
      if (msg.rfind("no ", 0) == 0) throw UserError(shown + ": extends: " + msg);
      throw;
    }
    content.erase("extends");
  }
  merge_layer(out.content, content, shown, out.sources);
  out.files.push_back(shown);
}

// The shape preset nearest to N nodes x M GPUs: fewest nodes apart, then fewest GPUs per node
// apart, a tie to the larger one (its time limit and CPUs suit the bigger job). Only the
// presets whose own name is a shape (NnMg) are candidates: a named variant ("2n4g-long") is a
// choice of its own.
void Catalog::load_shape_by_name(const std::string& name, std::pair<int, int> shape,
                                 LoadedPreset& out, std::vector<std::string>& chain) const {
  std::optional<std::pair<int, int>> best;
  std::string base;
  for (const auto& candidate : names(PresetKind::Shape)) {
    const auto c = shape_by_name(candidate);
    if (!c) continue;
    const auto distance = [&](std::pair<int, int> x) {
      return std::make_pair(std::abs(x.first - shape.first), std::abs(x.second - shape.second));
    };
    if (!best || distance(*c) < distance(*best) ||
        (distance(*c) == distance(*best) && *c > *best)) {
      best = c;
      base = candidate;
    }
  }
  if (!best) {
    throw UserError("",
                    "no preset named \"" + name +
                        "\" and no NnMg preset to take its other keys from",
                    "add presets/shapes/" + name + ".json (hpclaunch presets list)");
  }
  load_into(PresetKind::Shape, base, dirs_.size(), out, chain);
  const std::string origin = "--preset " + name + " (a shape by its name)";
  nlohmann::json layer = {
      {"description", std::to_string(shape.first) + " node" + (shape.first > 1 ? "s" : "") +
                          " x " + std::to_string(shape.second) + " GPU" +
                          (shape.second > 1 ? "s" : "") + ", the other keys from preset " + base},
      {"nodes", shape.first},
      {"gpus_per_node", shape.second}};
  merge_layer(out.content, layer, origin, out.sources);
  out.files.push_back(origin);
  out.by_name_base = base;
}

LoadedPreset Catalog::load(PresetKind kind, const std::string& name,
                           const std::string& where) const {
  check_preset_name(kind, name,
                    !where.empty()
                        ? where
                        : std::string("--") + (kind == PresetKind::Shape ? "preset" : "cluster"));
  LoadedPreset out;
  out.name = name;
  out.content = nlohmann::json::object();
  std::vector<std::string> chain;
  load_into(kind, name, dirs_.size(), out, chain);
  return out;
}

std::vector<std::pair<nlohmann::json, std::string>> Catalog::defaults() const {
  std::vector<std::pair<nlohmann::json, std::string>> layers;
  for (const auto& dir : dirs_) {
    fs::path file = dir.presets / "defaults.json";
    if (!input_path_present(file)) continue;  // a folder or a dangling link is reported
    nlohmann::json content = read_json_file(file);
    std::string shown = display_name(dir, file);
    check_json(content, spec_schema(), shown);
    layers.emplace_back(std::move(content), shown);
  }
  return layers;
}

fs::path Catalog::default_template() const {
  for (size_t i = dirs_.size(); i-- > 0;) {
    fs::path t = dirs_[i].templates / "sbatch.sh.mustache";
    if (input_path_present(t)) return t;  // reading it refuses a folder or a dangling link
  }
  return dirs_.empty() ? fs::path("templates/sbatch.sh.mustache")
                       : dirs_.front().templates / "sbatch.sh.mustache";
}

}  // namespace hpc
