// Quoting for the places a user's text lands: a batch script (a bash word, an #SBATCH value, a
// comment) and a gnuplot script. Every layer of the launcher uses it, and the tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hpc {

// A bash word that expands to exactly `s`: safe words stay bare, text with $, ` or \ is
// double-quoted with those (and ") backslash-escaped, anything else is single-quoted
// ('it'\''s'). Newlines survive literally inside either quotes.
std::string shell_quote(std::string_view s);

// The value part of an `#SBATCH --opt=VALUE` directive, as sbatch's own parser reads it:
// bare when safe, else double-quoted with `"` and `\` escaped. Directives are single lines,
// so callers must reject control characters first (see has_control_chars).
std::string sbatch_quote(std::string_view s);

// Text for a `# ...` comment: control characters shown as \n, \t, \xHH so that nothing a
// user typed can end the comment line.
std::string comment_text(std::string_view s);

// The first line of a message (an exception's what()), made printable as comment_text does:
// what the one-line errors and the campaigns' rows show.
std::string printable_first_line(std::string_view text);

// A command line for a comment: each argument shell-quoted, control characters escaped.
std::string comment_command_line(const std::vector<std::string>& argv);

bool has_control_chars(std::string_view s);

// A gnuplot string constant that is only text (single-quoted; no command, macro or escape).
std::string gnuplot_string(const std::string& s);

}  // namespace hpc
