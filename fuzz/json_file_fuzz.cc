// Fuzz target: the JSON-with-comments reader (common/json_file.h), which reads every preset,
// cluster profile, defaults.json and hpclaunch.json. The input is a file's whole text.
//
// Properties, besides the sanitizers:
//   - parse_json_text returns a value, or throws a one-line UserError (property.h) that starts
//     "fuzz.json:LINE:COLUMN: " with a position inside the text;
//   - a value comes back unchanged from its own dump (plain JSON, no comments): what the reader
//     accepts, nlohmann can write, and the reader reads that again.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "json_file.h"
#include "property.h"

namespace {

const char kOrigin[] = "fuzz.json";

// Checks that a refusal names a line and column that exist in `text` (the column may be one past
// the line's end: a missing '}' is reported there).
void check_position(const std::string& message, const std::string& text) {
  const std::string prefix = std::string(kOrigin) + ":";
  hpc::fuzz::check(message.rfind(prefix, 0) == 0, "a refusal names the file first", message);
  std::size_t line = 0, column = 0, used = 0;
  const std::string rest = message.substr(prefix.size());
  try {
    line = std::stoul(rest, &used);
    hpc::fuzz::check(rest[used] == ':', "a refusal says file:LINE:COLUMN", message);
    column = std::stoul(rest.substr(used + 1));
  } catch (const std::logic_error&) {
    hpc::fuzz::broken("a refusal says file:LINE:COLUMN", message);
  }
  std::size_t lines = 1, line_start = 0;
  for (std::size_t i = 0; i < text.size() && lines < line; ++i) {
    if (text[i] == '\n') {
      ++lines;
      line_start = i + 1;
    }
  }
  hpc::fuzz::check(line >= 1 && lines == line, "the line of a refusal is in the text", message);
  const std::size_t line_end = std::min(text.find('\n', line_start), text.size());
  hpc::fuzz::check(column >= 1 && column <= line_end - line_start + 1,
                   "the column of a refusal is on its line", message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json value;
  if (auto refused = hpc::fuzz::refusal([&] { value = hpc::parse_json_text(text, kOrigin); })) {
    check_position(*refused, text);
    return 0;
  }
  std::string dumped;
  nlohmann::json again;
  auto refused_again = hpc::fuzz::refusal([&] {
    dumped = value.dump();
    again = hpc::parse_json_text(dumped, "dump");
  });
  hpc::fuzz::check(!refused_again, "a value's dump is read again",
                   refused_again.value_or("") + " <- " + text);
  hpc::fuzz::check(again == value, "a value comes back from its dump", dumped);
  return 0;
}
