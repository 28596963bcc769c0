#include "json_file.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "error.h"
#include "input_file.h"

namespace hpc {
namespace {

std::string position(const std::string& text, const std::string& origin, size_t at) {
  auto [line, column] = line_column_at(text, at);
  return origin + ":" + std::to_string(line) + ":" + std::to_string(column);
}

// A walk over JSON-with-comments text for what nlohmann either does not report or reports
// without a position: a key given twice in one object (nlohmann keeps the last one silently),
// a number too large for a double (nlohmann's out_of_range 406 has no position), nesting
// deeper than kMaxJsonDepth. It runs on text nlohmann accepted, or read up to the number it
// could not hold, so it only needs to tell strings, comments, numbers and brackets apart.
class JsonLayoutCheck {
 public:
  JsonLayoutCheck(const std::string& text, const std::string& origin)
      : text_(text), origin_(origin) {}

  void run() {
    for (size_t i = 0; i < text_.size();) {
      const char c = text_[i];
      if (c == '/' && i + 1 < text_.size() && (text_[i + 1] == '/' || text_[i + 1] == '*')) {
        i = comment_end(i);
      } else if (c == '"') {
        const size_t end = string_end(i);
        if (!frames_.empty() && frames_.back().object && frames_.back().expect_key) key_at(i, end);
        i = end;
      } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
        i = number_end(i);
      } else {
        structure(c, i);
        ++i;
      }
    }
  }

 private:
  struct Frame {
    bool object = false;
    bool expect_key = false;
    std::map<std::string, size_t> keys;  // key -> offset of its first occurrence
  };

  void structure(char c, size_t at) {
    if (c == '{' || c == '[') {
      if (static_cast<int>(frames_.size()) >= kMaxJsonDepth) {
        throw UserError(position(text_, origin_, at),
                        "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                        "check the brackets (hpclaunch files nest a few levels)");
      }
      frames_.push_back(Frame{c == '{', c == '{', {}});
    } else if ((c == '}' || c == ']') && !frames_.empty()) {
      frames_.pop_back();
    } else if (c == ',' && !frames_.empty() && frames_.back().object) {
      frames_.back().expect_key = true;
    }
  }

  size_t comment_end(size_t at) const {
    if (text_[at + 1] == '/') {
      // As nlohmann reads it: a line comment ends at LF or at CR (found by fuzzing).
      const size_t eol = text_.find_first_of("\n\r", at);
      return eol == std::string::npos ? text_.size() : eol + 1;
    }
    const size_t close = text_.find("*/", at + 2);
    return close == std::string::npos ? text_.size() : close + 2;
  }

  // One past the closing quote of the string opening at `at`.
  size_t string_end(size_t at) const {
    for (size_t i = at + 1; i < text_.size(); ++i) {
      if (text_[i] == '\\')
        ++i;
      else if (text_[i] == '"')
        return i + 1;
    }
    return text_.size();
  }

  void key_at(size_t begin, size_t end) {
    Frame& frame = frames_.back();
    frame.expect_key = false;
    // nlohmann decodes the key as it did when it parsed the file ("a" and "\u0061" are one key).
    std::string key;
    try {
      key = nlohmann::json::parse(text_.substr(begin, end - begin)).get<std::string>();
    } catch (const nlohmann::json::exception&) {
      return;  // not a well-formed string: nlohmann reports it
    }
    auto [it, added] = frame.keys.emplace(key, begin);
    if (added) return;
    auto [line, column] = line_column_at(text_, it->second);
    throw UserError(position(text_, origin_, begin),
                    "key " + nlohmann::json(key).dump() +
                        " is given twice in one object (first at " + std::to_string(line) + ":" +
                        std::to_string(column) + "); JSON readers keep only one of them",
                    "remove one, or merge the two into one entry");
  }

  size_t number_end(size_t at) const {
    size_t end = at;
    while (end < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[end])) ||
                                  std::strchr("+-.eE", text_[end]) != nullptr)) {
      ++end;
    }
    const std::string token = text_.substr(at, end - at);
    if (std::isinf(std::strtod(token.c_str(), nullptr))) {
      throw UserError(position(text_, origin_, at),
                      "the number " + token.substr(0, 40) + (token.size() > 40 ? "..." : "") +
                          " is out of range (no value hpclaunch reads is near that large)",
                      "write a smaller number");
    }
    return end;
  }

  const std::string& text_;
  const std::string& origin_;
  std::vector<Frame> frames_;
};

[[noreturn]] void throw_syntax_error(const nlohmann::json::parse_error& e, const std::string& text,
                                     const std::string& origin, const std::string& fix) {
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
  // nlohmann's text reads "[json.exception.parse_error.101] parse error at line 3, column 5:
  // syntax error while parsing object key - invalid literal; last read: '...'"; keep the part
  // after the position, which says what was expected.
  std::string what = e.what();
  auto colon = what.find(": ", what.find("column"));
  if (colon != std::string::npos) what = what.substr(colon + 2);
  throw UserError(position(text, origin, at), "invalid JSON: " + what, fix);
}

}  // namespace

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
  // nlohmann would stop reading at a NUL and ignore what follows it.
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    throw UserError(position(text, origin, nul), "a NUL byte (is this a binary file?)",
                    "remove it: JSON files are text");
  }
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/true,
                                  /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    throw_syntax_error(e, text, origin, fix);
  } catch (const nlohmann::json::out_of_range&) {
    // A number too large for a double (1e400): the walk finds it and says where.
    JsonLayoutCheck(text, origin).run();
    throw UserError(origin, "a number is out of range", "write a smaller number");
  }
  JsonLayoutCheck(text, origin).run();
  return value;
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json_text(read_input_file(path, "JSON file"), path.string());
}

}  // namespace hpc
