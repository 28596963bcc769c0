#include "text.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace hpc {
namespace {

constexpr std::string_view kBlanks = " \t\r\n";

}  // namespace

std::string trim(std::string_view s) {
  size_t begin = s.find_first_not_of(kBlanks);
  if (begin == std::string_view::npos) return "";
  return std::string(s.substr(begin, s.find_last_not_of(kBlanks) - begin + 1));
}

std::string first_line(std::string_view s) {
  while (!s.empty()) {
    size_t end = s.find('\n');
    std::string line = trim(s.substr(0, end));
    if (!line.empty() || end == std::string_view::npos) return line;
    s.remove_prefix(end + 1);
  }
  return "";
}

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

namespace {

bool digits_without_leading_zero(std::string_view s) {
  return all_digits(s) && (s.size() == 1 || s[0] != '0');
}

// "+2" -> "2", "010" -> "10", " 2.50" -> "2.50"; "" when no digits are left.
std::string plain_number_suggestion(std::string_view s) {
  std::string t = trim(s);
  bool negative = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    negative = t[0] == '-';
    t.erase(0, 1);
  }
  const size_t dot = t.find('.');
  std::string whole = t.substr(0, dot);
  if (!all_digits(whole) || (dot != std::string::npos && !all_digits(t.substr(dot + 1)))) return "";
  whole.erase(0, std::min(whole.find_first_not_of('0'), whole.size() - 1));
  std::string out = (negative ? "-" : "") + whole;
  if (dot != std::string::npos) out += t.substr(dot);
  return out;
}

}  // namespace

bool is_plain_whole_number(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  return digits_without_leading_zero(s);
}

std::optional<long long> parse_plain_whole_number(std::string_view s) {
  if (!is_plain_whole_number(s)) return std::nullopt;
  const std::string text(s);
  errno = 0;
  const long long value = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return std::nullopt;
  return value;
}

bool is_plain_decimal_number(std::string_view s) {
  const size_t dot = s.find('.');
  if (dot == std::string_view::npos) return is_plain_whole_number(s);
  return is_plain_whole_number(s.substr(0, dot)) && all_digits(s.substr(dot + 1));
}

std::optional<double> parse_plain_decimal_number(std::string_view s) {
  if (!is_plain_decimal_number(s) || s.size() > 40) return std::nullopt;
  return std::strtod(std::string(s).c_str(), nullptr);
}

std::string plain_number_fix(std::string_view s) {
  const std::string rule = "no '+', blanks, leading zeros, 0x or exponent";
  const std::string instead = plain_number_suggestion(s);
  if (instead.empty() || instead == s)
    return "write a number in plain decimal digits (" + rule + "), e.g. 4";
  return "write " + instead + " (plain decimal digits: " + rule + ")";
}

std::string run_dir_name(const std::string& job_name) {
  std::string out;
  for (unsigned char c : job_name)
    out += (std::isalnum(c) || c == '.' || c == '_' || c == '-') ? char(c) : '_';
  if (out.empty() || out[0] == '.') out.insert(out.begin(), 'j');
  if (out.size() > 64) out.resize(64);
  return out;
}

bool is_job_id(std::string_view id) {
  auto number = [](std::string_view n) {
    return !n.empty() && n.size() <= 10 && all_digits(n) && (n[0] != '0' || n == "0");
  };
  size_t sep = id.find_first_of("_+");
  std::string_view job = id.substr(0, sep);
  return number(job) && job != "0" && (sep == std::string_view::npos || number(id.substr(sep + 1)));
}

}  // namespace hpc
