#include "bad_input.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace cli_test {

std::vector<std::string> render_args(std::vector<std::string> extra, const std::string& preset) {
  std::vector<std::string> a = {"render", "--preset",   preset,       "--strategy", "ddp",
                                "-o",     "out.sbatch", "--spec-out", "spec.json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

namespace {

std::string replace_root(std::string s, const Sandbox& sb) {
  const std::string key = "{root}";
  for (size_t at; (at = s.find(key)) != std::string::npos;)
    s.replace(at, key.size(), sb.root().string());
  return s;
}

}  // namespace

bool has_fix_hint(const std::string& line) {
  size_t semi = line.find("; ");
  if (semi == std::string::npos) return false;
  std::string hint = line.substr(semi + 2);
  static const std::vector<std::string> verbs = {
      "did you mean", "use ", "write ", "pass ",  "add ",  "remove", "create", "make ",
      "give ",        "swap", "lower",  "pick ",  "check", "name ",  "set ",   "move ",
      "separate",     "fix ", "see ",   "choose", "put ",  "known "};
  for (const auto& v : verbs)
    if (hint.find(v) != std::string::npos) return true;
  return false;
}

namespace {

void make_file(const Sandbox& sb, const std::string& path, const std::string& content) {
  const fs::path at = sb.root() / path;
  const std::string link = "<link>";
  if (content == "<dir>") {
    fs::create_directories(at);
  } else if (content == "<fifo>") {
    fs::create_directories(at.parent_path());
    REQUIRE(mkfifo(at.c_str(), 0600) == 0);
  } else if (content.rfind(link, 0) == 0) {
    fs::create_directories(at.parent_path());
    fs::create_symlink(replace_root(content.substr(link.size()), sb), at);
  } else {
    sb.write(path, content);
  }
}

// The sandbox's environment with `extra` ("NAME=value") replacing or adding entries.
std::vector<std::string> env_with(const Sandbox& sb, const std::vector<std::string>& extra) {
  std::vector<std::string> env = sb.env();
  for (const auto& e : extra) {
    const std::string entry = replace_root(e, sb);
    const std::string name = entry.substr(0, entry.find('=') + 1);
    env.erase(std::remove_if(env.begin(), env.end(),
                             [&](const std::string& v) { return v.rfind(name, 0) == 0; }),
              env.end());
    env.push_back(entry);
  }
  return env;
}

}  // namespace

void check_bad_input(const BadCase& c, bool require_hint) {
  check_bad_input(c, Prepare(), require_hint);
}

void check_bad_input(const BadCase& c, const Prepare& prepare, bool require_hint) {
  Sandbox sb;
  for (const auto& [path, content] : c.files) make_file(sb, path, content);
  if (prepare) prepare(sb);
  auto before = sb.snapshot();
  std::vector<std::string> argv = {hpclaunch_binary()};
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  // A bounded wait: a hostile input must never make hpclaunch hang.
  Run r = spawn(argv, sb.work(), env_with(sb, c.env), std::chrono::seconds(20));
  INFO("case: " << c.name << "\n" << r.describe());

  CHECK(r.status == 2);
  CHECK(r.out.empty());
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  std::string line = r.err.substr(0, r.err.size() - 1);
  CHECK(line.find('\n') == std::string::npos);  // exactly one line
  CHECK_THAT(line, StartsWith("hpclaunch: error: "));
  for (const auto& e : c.expect) CHECK_THAT(line, Contains(replace_root(e, sb)));
  if (require_hint) CHECK(has_fix_hint(line));
  CHECK(sb.snapshot() == before);  // nothing written, no temp file left behind
}

void check_all(const std::vector<BadCase>& cases, bool require_hint) {
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) { check_bad_input(c, require_hint); }
  }
}

}  // namespace cli_test
