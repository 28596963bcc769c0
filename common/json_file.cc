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

namespace {

// Where nlohmann's parser stops on `text`, from its SAX interface: the DOM parser reports a number
// beyond double's range ("1e400") as out_of_range, which carries no position.
size_t error_offset(const std::string& text) {
  struct Sax : nlohmann::json_sax<nlohmann::json> {
    size_t offset = 0;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t position, const std::string&,
                     const nlohmann::detail::exception&) override {
      offset = position;
      return false;
    }
  } sax;
  nlohmann::json::sax_parse(text, &sax, nlohmann::json::input_format_t::json, /*strict=*/true,
                            /*ignore_comments=*/true);
  return sax.offset;
}

// `byte` is one past the last character nlohmann read: the end of the offending token. Walks back
// to the token's start, where a reader looks for the mistake, and throws "origin:L:C: ...".
[[noreturn]] void throw_at(const std::string& text, const std::string& origin, size_t byte,
                           const std::string& what, const std::string& fix) {
  size_t at = byte > 0 ? std::min<size_t>(byte - 1, text.size() ? text.size() - 1 : 0) : 0;
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
  auto [line, column] = line_column_at(text, at);
  throw UserError(origin + ":" + std::to_string(line) + ":" + std::to_string(column),
                  "invalid JSON: " + what, fix);
}

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& origin,
                               const std::string& fix) {
  try {
    return nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's text reads "[json.exception.parse_error.101] parse error at line 3, column 5:
    // syntax error while parsing object key - invalid literal; last read: '...'"; keep the part
    // after the position, which says what was expected.
    std::string what = e.what();
    auto colon = what.find(": ", what.find("column"));
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw_at(text, origin, e.byte, what, fix);
  } catch (const nlohmann::json::out_of_range& e) {
    // 406, "number overflow parsing '1e400'": the only other error parse() raises.
    std::string what = e.what();
    what = what.substr(what.find("] ") == std::string::npos ? 0 : what.find("] ") + 2);
    throw_at(text, origin, error_offset(text), what, "write a number between -1.7e308 and 1.7e308");
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
