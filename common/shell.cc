#include "shell.h"

#include <cstdio>

namespace hpc {
namespace {

bool is_safe_word_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == '/' || c == ':' || c == '@' || c == '%' || c == '+' ||
         c == ',' || c == '=';
}

bool is_safe_word(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!is_safe_word_char(c)) return false;
  return true;
}

void append_escaped(std::string& out, unsigned char c) {
  switch (c) {
    case '\n':
      out += "\\n";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\r':
      out += "\\r";
      return;
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
}

}  // namespace

bool has_control_chars(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

std::string shell_quote(std::string_view s) {
  if (is_safe_word(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 2);
  // Text with $, ` or \ goes in double quotes with those escaped: the same literal, and
  // shellcheck does not mistake it for an expansion meant to happen (SC2016, SC1003).
  if (s.find_first_of("$`\\") != std::string_view::npos) {
    out += '"';
    for (char c : s) {
      if (c == '$' || c == '`' || c == '\\' || c == '"') out += '\\';
      out += c;
    }
    out += '"';
    return out;
  }
  out += '\'';
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  out += '\'';
  return out;
}

std::string sbatch_quote(std::string_view s) {
  if (is_safe_word(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

std::string comment_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f)
      append_escaped(out, c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

std::string printable_first_line(std::string_view text) {
  return comment_text(text.substr(0, text.find('\n')));
}

std::string comment_command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& arg : argv) {
    if (!out.empty()) out += ' ';
    if (has_control_chars(arg)) {
      // ANSI-C quoting keeps the comment on one line and can still be pasted into bash.
      out += "$'";
      for (unsigned char c : arg) {
        if (c == '\'' || c == '\\') {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f)
          append_escaped(out, c);
        else
          out += static_cast<char>(c);
      }
      out += '\'';
    } else {
      out += shell_quote(arg);
    }
  }
  return out;
}

// A gnuplot string constant that is only text: single-quoted, where gnuplot expands no
// backquoted command, no @macro and no backslash escape (a double-quoted one runs `...`); a
// quote is doubled. Control characters (a newline would end the command) are dropped.
std::string gnuplot_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
  }
  return out + "'";
}

}  // namespace hpc
