// Unit-test support: specs resolved from this repository's own presets (spec/builtin_testing.h)
// and rendered through its own template (HPC_SOURCE_DIR). Included by the launcher's *_test.cc
// files only.
#pragma once

#include <filesystem>
#include <string>

#include "render/render.h"
#include "spec/builtin_testing.h"

namespace hpc::testing {

inline const ScriptTemplate& builtin_template() {
  static const ScriptTemplate t = ScriptTemplate::from_file(
      std::filesystem::path(HPC_SOURCE_DIR) / "templates/sbatch.sh.mustache");
  return t;
}

inline std::string render_builtin(const Spec& spec) {
  return builtin_template().render(spec, {"test", {"hpclaunch", "render"}});
}

}  // namespace hpc::testing
