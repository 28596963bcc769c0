// Spec -> batch script, through a mustache template (templates/sbatch.sh.mustache).
//
// In the template, {{name}} is shell-quoted (the escape function is shell_quote), so a user's
// copy of the template stays safe by default; {{{name}}} is inserted as is and is only offered
// for values hpclaunch has validated or formatted itself (integers, #SBATCH directives,
// comments).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "spec/spec.h"

namespace kainjow::mustache {
template <typename StringType>
class basic_mustache;
}

namespace hpc {

struct RenderContext {
  std::string version;               // hpclaunch version
  std::vector<std::string> command;  // the generating command line, for the header
  // `hpclaunch shell`: the script ends in the user's interactive shell instead of the program
  // (the template's {{#interactive}} sections), and does not requeue itself.
  bool interactive = false;
};

// The job library every script ends with (templates/job-library.sh as built): the functions
// main() calls, from the marker line `# --- hpclaunch job library` to the call of main.
std::string_view job_library_text();
inline constexpr std::string_view kJobLibraryMarker = "# --- hpclaunch job library";
// Where a rendered script's job library begins (the marker at the start of a line), or npos.
inline size_t job_library_offset(const std::string& script) {
  size_t at = script.find("\n" + std::string(kJobLibraryMarker));
  return at == std::string::npos ? at : at + 1;
}
// The job: what stands above the job library (the whole script when it has none).
inline std::string job_part(const std::string& script) {
  return script.substr(0, job_library_offset(script));
}

// The #SBATCH directives of a spec, without the "#SBATCH " prefix, in the script's order.
std::vector<std::string> sbatch_directives(const Spec& spec);

// A compiled template; reuse it to render many specs (sweeps).
class ScriptTemplate {
 public:
  // Throws UserError naming the file when it cannot be read or does not parse.
  static ScriptTemplate from_file(const std::filesystem::path& path);
  static ScriptTemplate from_text(std::string text, std::string origin);

  std::string render(const Spec& spec, const RenderContext& context) const;
  const std::string& origin() const { return origin_; }
  // Whether the template opens the section {{#name}} (the interactive launch of hpclaunch shell).
  bool has_section(const std::string& name) const {
    return text_.find("{{#" + name + "}}") != std::string::npos;
  }

 private:
  std::string text_, origin_;
  // Parsed once (a sweep renders thousands of points); rendering does not change it.
  std::shared_ptr<kainjow::mustache::basic_mustache<std::string>> compiled_;
};

}  // namespace hpc
