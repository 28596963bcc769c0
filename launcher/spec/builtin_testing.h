// Unit-test support: specs resolved from this repository's own presets (HPC_SOURCE_DIR), with no
// user directories and no project file. Included by the launcher's *_test.cc files only; the
// rendering half is render/builtin_testing.h.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

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

}  // namespace hpc::testing
