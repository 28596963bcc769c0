// The bad-input cases' harness: a case is a command line and the files it finds; it must end
// with exit status 2, exactly one line on stderr starting with "hpclaunch: error: " that names
// the file (or flag) and the key path or line:column and says how to fix it, nothing on stdout,
// and nothing written (the sandbox byte-for-byte unchanged: no out.sbatch, no spec.json, no
// leftover temp file). bad_input_test.cc and bad_input_usage_test.cc hold the cases.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "harness.h"

namespace cli_test {

struct BadCase {
  std::string name;
  std::vector<std::string> args;
  // Files to create first: path relative to the sandbox root -> content. A content of
  // "<dir>" makes a directory instead, "<fifo>" a FIFO, "<link>TARGET" a symbolic link to
  // TARGET ("{root}" stands for the sandbox root).
  std::vector<std::pair<std::string, std::string>> files;
  // Substrings the error line must contain ("{root}" stands for the sandbox root): the file or
  // flag, the key path or line:column, and the specific fix.
  std::vector<std::string> expect;
  // "NAME=value" entries that replace or add to the sandbox's environment ("{root}" as above).
  std::vector<std::string> env = {};
};

// `hpclaunch render --preset PRESET --strategy ddp -o out.sbatch --spec-out spec.json EXTRA...`:
// the usual outputs of a render; each case checks that neither appears.
std::vector<std::string> render_args(std::vector<std::string> extra,
                                     const std::string& preset = "1n2g");

// A fix hint: after the first "; " the line tells the user what to do.
bool has_fix_hint(const std::string& line);

void check_bad_input(const BadCase& c, bool require_hint = true);
// The same, with `prepare` run after the files are written and before the snapshot: for what a
// file list cannot make (a FIFO, a symbolic link, a socket, a device node).
using Prepare = std::function<void(const Sandbox&)>;
void check_bad_input(const BadCase& c, const Prepare& prepare, bool require_hint = true);
// Each case in a section of its own.
void check_all(const std::vector<BadCase>& cases, bool require_hint = true);

inline const std::string kProject = "work/hpclaunch.json";

}  // namespace cli_test
