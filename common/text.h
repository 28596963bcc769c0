// Small string helpers both programs use. For joining, use fmt::join.
#pragma once

#include <string>
#include <string_view>

namespace hpc {

// `s` without leading and trailing blanks (space, tab, CR, LF).
std::string trim(std::string_view s);

// The first line of `s` that is not blank, trimmed: the line of an error text worth quoting.
std::string first_line(std::string_view s);

// Whether `s` is one or more ASCII digits (a job id, a file descriptor number).
bool all_digits(std::string_view s);

bool starts_with(std::string_view s, std::string_view prefix);

}  // namespace hpc
