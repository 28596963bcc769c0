// parse_json_text: JSON with comments, and what it refuses beyond JSON's grammar, with positions.
#include "json_file.h"

#include <catch2/catch.hpp>
#include <string>

#include "error.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using namespace std::string_literals;

namespace {

std::string error_of(const std::string& text) {
  try {
    hpc::parse_json_text(text, "f.json");
  } catch (const hpc::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("parse_json_text: comments, and keys that only look alike", "[json]") {
  CHECK(hpc::parse_json_text("// c\n{\"a\": 1 /* \"a\": 2, { */}", "f")["a"] == 1);
  // The same key in different objects, in an array of objects, and in strings and comments.
  CHECK(error_of("{\"a\": {\"x\": 1}, \"b\": {\"x\": 2}}") == "");
  CHECK(error_of("[{\"x\": 1}, {\"x\": 2}]") == "");
  CHECK(error_of("{\"a\": \"\\\"a\\\": {\", \"b\": \"// \\\"a\\\"\"}") == "");
  CHECK(error_of("{\"a\": 1, // \"a\": 2\n \"b\": 2}") == "");
  CHECK(error_of("{\"a\": [1, {\"a\": 2}], \"b\": {\"a\": {\"a\": 3}}}") == "");
  CHECK(error_of("{\"\\u00e9\": 1, \"\xc3\xa9\\u0301\": 2}") == "");
  // Large and small numbers a double holds.
  CHECK(hpc::parse_json_text("[1e308, -1e308, 1e-400]", "f").size() == 3);
  CHECK(hpc::parse_json_text("18446744073709551615", "f").is_number_unsigned());
}

TEST_CASE("parse_json_text: a key given twice is an error at the second, naming the first",
          "[json]") {
  CHECK(error_of("{\"a\": 1, \"a\": 2}") ==
        "f.json:1:10: key \"a\" is given twice in one object (first at 1:2); JSON readers keep "
        "only one of them; remove one, or merge the two into one entry");
  CHECK_THAT(error_of("{\n \"o\": {\"k\": 1},\n \"p\": [{\"k\": 1, \"k\": 2}]\n}"),
             StartsWith("f.json:3:17: key \"k\" is given twice") && Contains("(first at 3:9)"));
  CHECK_THAT(error_of("{\"a\": {}, \"\\u0061\": {}}"), StartsWith("f.json:1:11: key \"a\""));
  CHECK_THAT(error_of("{\"\xc3\xa9\": 1, \"\\u00e9\": 2}"), Contains("is given twice"));
  CHECK_THAT(error_of("{\"a\": {\"b\": {\"c\": 1, \"c\": 2}}}"), StartsWith("f.json:1:22:"));
}

TEST_CASE("parse_json_text: a NUL byte anywhere is an error where it is", "[json]") {
  CHECK(error_of("{}\0{\"a\": 1}"s) ==
        "f.json:1:3: a NUL byte (is this a binary file?); remove it: JSON files are text");
  CHECK_THAT(error_of("\0"s), StartsWith("f.json:1:1: a NUL byte"));
  CHECK_THAT(error_of("{\"a\":\n\"x\0\"}"s), StartsWith("f.json:2:3: a NUL byte"));
}

TEST_CASE("parse_json_text: a number no double holds is an error with its position", "[json]") {
  CHECK(error_of("{\"a\": [1, 1e400]}") ==
        "f.json:1:11: the number 1e400 is out of range (no value hpclaunch reads is near that "
        "large); write a smaller number");
  CHECK_THAT(error_of("{\n  \"b\": -1e309\n}"), StartsWith("f.json:2:8: the number -1e309"));
  CHECK_THAT(error_of("[" + std::string(400, '9') + "]"),
             StartsWith("f.json:1:2: the number 9999") && Contains("... is out of range"));
  // A syntax error before the number is reported as such.
  CHECK_THAT(error_of("{\"a\" 1e400}"), StartsWith("f.json:1:6: invalid JSON"));
}

TEST_CASE("parse_json_text: nesting deeper than kMaxJsonDepth is refused", "[json]") {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  CHECK(error_of(nested(hpc::kMaxJsonDepth)) == "");
  CHECK(error_of(nested(hpc::kMaxJsonDepth + 1)) ==
        "f.json:1:65: nested deeper than 64 levels; check the brackets (hpclaunch files nest a "
        "few levels)");
  CHECK_THAT(error_of(nested(1000000)), StartsWith("f.json:1:65: nested deeper"));
  CHECK_THAT(error_of("{\"a\":" + nested(200) + "}"), StartsWith("f.json:1:69:"));
}

// Found by fuzzing (fuzz/json_file_fuzz.cc): nlohmann reports a number beyond double's range as
// out_of_range, not parse_error, and it escaped as "hpclaunch: internal error: ... number
// overflow parsing '1e400'", exit 1.
TEST_CASE("parse_json_text: numbers beyond double's range, as the fuzzer found them", "[json]") {
  CHECK_THAT(error_of("{\n  \"min\": 1e400\n}"),
             StartsWith("f.json:2:10: ") && Contains("out of range"));
  CHECK_THAT(error_of("[-1E+999]"), StartsWith("f.json:1:2: ") && Contains("out of range"));
  CHECK(hpc::parse_json_text("[1e-400, 1.7e308]", "f.json")[1] == 1.7e308);  // 1e-400 is 0
  // A `//` comment ended by a lone CR, then a number out of range: still a position.
  CHECK_THAT(error_of("// c\r1e400"), StartsWith("f.json:1:") && Contains("out of range"));
}
