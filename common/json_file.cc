#include "json_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "error.h"

namespace hpc {

std::pair<int, int> line_column_at(const std::string& text, size_t byte_offset) {
  int line = 1, column = 1;
  size_t end = std::min(byte_offset, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else
      ++column;
  }
  return {line, column};
}

nlohmann::json parse_json_text(const std::string& text, const std::string& origin,
                               const std::string& fix) {
  try {
    return nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is one past the last character nlohmann read: the end of the offending token.
    // Walk back to the token's start, where a reader looks for the mistake.
    size_t at = e.byte > 0 ? std::min<size_t>(e.byte - 1, text.size() ? text.size() - 1 : 0) : 0;
    if (at < text.size() && text[at] == '"' && at > 0) {
      size_t open = at - 1;
      while (open > 0 && !(text[open] == '"' && text[open - 1] != '\\')) --open;
      if (text[open] == '"') at = open;
    } else {
      auto in_word = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+';
      };
      while (at > 0 && at < text.size() && in_word(text[at]) && in_word(text[at - 1])) --at;
    }
    std::string msg = e.what();
    auto [line, column] = line_column_at(text, at);
    // nlohmann's text reads "[json.exception.parse_error.101] parse error at line 3, column 5:
    // syntax error while parsing object key - invalid literal; last read: '...'"; keep the part
    // after the position, which says what was expected.
    std::string what = msg;
    auto colon = what.find(": ", what.find("column"));
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw UserError(origin + ":" + std::to_string(line) + ":" + std::to_string(column),
                    "invalid JSON: " + what, fix);
  }
}

std::string read_text_file(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(path.string(), "is a directory, not a " + what, "name a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    throw UserError(path.string(), "cannot read " + what + ": " + std::strerror(err),
                    "check the path and its permissions");
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) {
    throw UserError(path.string(), "cannot read " + what, "check the file");
  }
  return buf.str();
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(path.string(), "is a directory, not a JSON file", "name a .json file");
  }
  return parse_json_text(read_text_file(path, "JSON file"), path.string());
}

}  // namespace hpc
