#include "follow/program_state.h"

#include <algorithm>

#include "sha256.h"
#include "subprocess.h"
#include "text.h"

using nlohmann::json;

namespace hpc {
namespace {

CommandResult git(const std::string& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {"git", "-C", dir};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions o;
  o.timeout = std::chrono::seconds(30);
  // No pager, no prompt, and none of the user's external diff drivers or colours.
  o.env = {"GIT_PAGER=cat", "GIT_TERMINAL_PROMPT=0", "GIT_EXTERNAL_DIFF="};
  return run_command(argv, o);
}

std::vector<std::string> split_nul(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// Files named in a binary-safe `git diff` ("diff --git a/X b/X" lines).
size_t files_in_diff(const std::string& diff) {
  size_t n = 0;
  for (size_t at = 0; (at = diff.find("diff --git ", at)) != std::string::npos; ++at)
    if (at == 0 || diff[at - 1] == '\n') ++n;
  return n;
}

std::string plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

json ProgramState::to_json() const {
  if (!in_git()) return json{{"git", false}};
  return json{{"git", true},
              {"work_tree", work_tree},
              {"revision", revision},
              {"dirty", dirty()},
              {"diff_bytes", diff.size()},
              {"diff_files", files_in_diff(diff)},
              {"untracked", untracked},
              {"untracked_truncated", untracked_truncated},
              {"changes_sha256", changes_sha256}};
}

ProgramState ProgramState::from_json(const json& j) {
  ProgramState s;
  if (!j.is_object() || !j.value("git", false)) return s;
  auto text = [&](const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
  s.work_tree = text("work_tree");
  s.revision = text("revision");
  s.changes_sha256 = text("changes_sha256");
  if (j.contains("untracked") && j["untracked"].is_array())
    for (const auto& name : j["untracked"])
      if (name.is_string()) s.untracked.push_back(name.get<std::string>());
  s.untracked_truncated = j.value("untracked_truncated", false);
  return s;
}

ProgramState read_program_state(const std::string& dir) {
  ProgramState s;
  CommandResult top = git(dir, {"rev-parse", "--show-toplevel"});
  if (!top.ok()) return s;
  s.work_tree = trim(top.out);
  CommandResult head = git(s.work_tree, {"rev-parse", "--verify", "--quiet", "HEAD"});
  if (head.ok()) s.revision = trim(head.out);
  // Before the first commit there is no HEAD: every file is untracked or staged (git diff
  // --cached against the empty tree would list them; the names below are enough to compare).
  if (!s.revision.empty()) {
    CommandResult diff = git(s.work_tree, {"-c", "core.quotePath=false", "diff", "--binary",
                                           "--no-color", "--no-ext-diff", "HEAD", "--"});
    if (diff.ok()) s.diff = diff.out;
  }
  CommandResult others =
      git(s.work_tree, {"ls-files", "-z", "--others", "--exclude-standard", "--"});
  if (others.ok()) s.untracked = split_nul(others.out);
  std::sort(s.untracked.begin(), s.untracked.end());
  if (s.untracked.size() > ProgramState::kMaxUntracked) {
    s.untracked.resize(ProgramState::kMaxUntracked);
    s.untracked_truncated = true;
  }
  std::string hashed = s.diff;
  for (const auto& name : s.untracked) hashed += std::string("\0untracked ", 11) + name;
  s.changes_sha256 = sha256_hex(hashed);
  return s;
}

std::string describe_program_change(const ProgramState& then, const ProgramState& now) {
  if (!then.in_git()) return "";  // nothing recorded to compare with
  if (!now.in_git())
    return "the work tree " + then.work_tree + " is no longer a git work tree here";
  if (then.revision != now.revision) {
    return "the git revision changed (" + then.revision.substr(0, 12) + " -> " +
           (now.revision.empty() ? std::string("none") : now.revision.substr(0, 12)) + ")";
  }
  if (then.changes_sha256 != now.changes_sha256) {
    return "the uncommitted changes differ from the run's (now " +
           plural(files_in_diff(now.diff), "changed file") + " in git diff HEAD, " +
           plural(now.untracked.size(), "untracked file") + ")";
  }
  return "";
}

}  // namespace hpc
