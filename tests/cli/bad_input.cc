#include "bad_input.h"

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

void check_bad_input(const BadCase& c, bool require_hint) {
  check_bad_input(c, Prepare(), require_hint);
}

void check_bad_input(const BadCase& c, const Prepare& prepare, bool require_hint) {
  Sandbox sb;
  for (const auto& [path, content] : c.files) {
    if (content == "<dir>")
      fs::create_directories(sb.root() / path);
    else
      sb.write(path, content);
  }
  if (prepare) prepare(sb);
  auto before = sb.snapshot();
  Run r = sb.hpclaunch(c.args);
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
