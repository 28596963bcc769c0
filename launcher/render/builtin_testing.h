// Unit-test support: specs resolved from this repository's own presets and rendered through its
// own template (HPC_SOURCE_DIR), with no user directories and no project file. Included by the
// launcher's *_test.cc files only.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "render/render.h"
#include "spec/spec.h"

namespace hpc::testing {

// PRESET on CLUSTER with `--set` SETS; the caller adds the strategy, launch mode or words.
inline SpecRequest builtin_request(std::string preset, std::string cluster,
                                   std::vector<std::string> sets = {}) {
  SpecRequest r;
  r.preset = std::move(preset);
  r.cluster = std::move(cluster);
  r.sets = std::move(sets);
  r.read_project_file = false;
  return r;
}

inline Spec resolve_builtin(const SpecRequest& request) {
  std::filesystem::path data = HPC_SOURCE_DIR;
  Catalog catalog({{data / "presets", data / "templates", "built-in"}});
  return resolve_spec(catalog, request);
}

inline std::string render_builtin(const Spec& spec) {
  auto t = ScriptTemplate::from_file(std::filesystem::path(HPC_SOURCE_DIR) /
                                     "templates/sbatch.sh.mustache");
  return t.render(spec, {"test", {"hpclaunch", "render"}});
}

}  // namespace hpc::testing
