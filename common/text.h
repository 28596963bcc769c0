// Small string helpers both programs use. For joining, use fmt::join.
#pragma once

#include <optional>
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

// The one rule for numbers hpclaunch reads from its flags and --set (JSON files have JSON's,
// which is the same): decimal digits with an optional leading '-', and nothing else: no '+', no
// blanks, no leading zeros ("0" itself is fine), no 0x or octal. "+2", " 2", "2 " and "010" all
// break it; strtol and CLI11 would take them, and read "010" as 10 or as 8.
bool is_plain_whole_number(std::string_view s);
// The value of a plain whole number; nothing when `s` breaks the rule or overflows long long.
std::optional<long long> parse_plain_whole_number(std::string_view s);
// A plain whole number with an optional fraction: "2", "0.5", "-1.25"; no exponent, inf or nan.
bool is_plain_decimal_number(std::string_view s);
std::optional<double> parse_plain_decimal_number(std::string_view s);
// The fix for a number that breaks the rule: "write 10 (decimal digits only: no '+', blanks or
// leading zeros)" for "010", "+10" or " 10"; a general hint when no digits are left to suggest.
std::string plain_number_fix(std::string_view s);


// The run-directory-safe form of a job name, used for <runs>/<name>-<job id>/ and for %x in log
// paths: letters, digits, '.', '_', '-' (anything else becomes '_'), at most 64 characters.
std::string run_dir_name(const std::string& job_name);

// A Slurm job id as hpclaunch passes it to scontrol and scancel: a number from 1 up without
// leading zeros, at most 10 digits, optionally an array task (_N) or a het job component (+N).
// Job id 0 (scontrol shows every job for it), "01", "-1", "--me" and the like are not.
bool is_job_id(std::string_view id);

}  // namespace hpc
