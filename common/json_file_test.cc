// parse_json_text: every bad file is a UserError "file:line:column: invalid JSON: ...", one line.
// The cases under "found by fuzzing" came from fuzz/json_file_fuzz.cc (fuzz/corpus/json_file/).
#include "json_file.h"

#include <catch2/catch.hpp>
#include <string>

#include "error.h"

namespace {

// The message parse_json_text throws for `text`; fails the test when it does not throw.
std::string parse_error(const std::string& text) {
  try {
    hpc::parse_json_text(text, "f.json");
    FAIL("expected hpc::UserError for " << text);
  } catch (const hpc::UserError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("json_file: comments are allowed, errors name line and column", "[json]") {
  CHECK(hpc::parse_json_text("// a comment\n{\"a\": /* here */ 1}", "f.json")["a"] == 1);
  CHECK(parse_error("{\n  \"a\": 1,\n}").rfind("f.json:3:1: invalid JSON: ", 0) == 0);
}

// Found by fuzzing: nlohmann reports a number beyond double's range as out_of_range, not as a
// parse_error, and it escaped as "hpclaunch: internal error: [json.exception.out_of_range.406]
// number overflow parsing '1e400' (please report it)", exit 1.
TEST_CASE("json_file: a number beyond double's range is a user error at its position", "[json]") {
  const std::string message = parse_error("{\n  \"min\": 1e400\n}");
  INFO(message);
  CHECK(message.rfind("f.json:2:10: invalid JSON: number overflow parsing '1e400'", 0) == 0);
  CHECK(message.find("1.7e308") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  CHECK(parse_error("[-1E+999]").rfind("f.json:1:2: invalid JSON: number overflow", 0) == 0);
  CHECK(hpc::parse_json_text("[1e-400, 1.7e308]", "f.json")[1] == 1.7e308);  // 1e-400 is 0
}
