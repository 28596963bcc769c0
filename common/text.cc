#include "text.h"

#include <algorithm>
#include <cctype>

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

}  // namespace hpc
