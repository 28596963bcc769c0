// The program's code as it was at submit: the git revision of the work tree the job was submitted
// from, its uncommitted changes (`git diff --binary HEAD`, saved beside run.json as program.diff)
// and the names of its untracked files. `hpclaunch rerun` compares them with the work tree now.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpc {

struct ProgramState {
  std::string work_tree;  // the git work tree's top folder; "" when not inside one (or no git)
  std::string revision;   // HEAD's commit; "" before the first commit
  std::string diff;       // `git diff --binary HEAD`: every uncommitted change to tracked files
  std::vector<std::string> untracked;  // untracked files (not ignored), at most kMaxUntracked
  bool untracked_truncated = false;
  // SHA-256 of the diff and the untracked names: two states with equal hashes have the same
  // tracked code (untracked files' contents are not compared).
  std::string changes_sha256;

  static constexpr size_t kMaxUntracked = 1000;

  bool in_git() const { return !work_tree.empty(); }
  bool dirty() const { return !diff.empty() || !untracked.empty(); }
  // run.json's "program" object (the diff itself stays in program.diff).
  nlohmann::json to_json() const;
  static ProgramState from_json(const nlohmann::json& j);
};

// The state of the work tree holding `dir`, through git (argv, never a shell; bounded in time).
// Not a work tree, or no git: a state with in_git() false. Never throws.
ProgramState read_program_state(const std::string& dir);

// "" when `now` has the same code as `then`; else one phrase naming what changed:
// "the git revision changed (3f2a1b0c9d1e -> 77aa01c2b3d4)", "the uncommitted changes differ
// (2 files in git diff HEAD; 1 untracked file)".
std::string describe_program_change(const ProgramState& then, const ProgramState& now);

}  // namespace hpc
