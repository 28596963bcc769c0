// A manual page (roff, man(7) macros) written from a CLI11 App: its description, every visible
// option, every subcommand with its own options, and its footer. Generated at build time
// (`hpclaunch --help-man`, `hpctrain --help-man`), so the page cannot drift from the flags.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace hpc {

struct ManPageText {
  std::string program;   // "hpclaunch"
  std::string version;   // shown in the page's footer: "hpclaunch 0.1.0"
  std::string synopsis;  // one line, plain text: "hpclaunch COMMAND [OPTIONS] [-- ARGS...]"
  // Sections after the commands, in order: ("ENVIRONMENT", "text"). The text is plain: lines
  // starting with two spaces are kept as they are (examples), the others are filled.
  std::vector<std::pair<std::string, std::string>> sections;
};

std::string man_page(const CLI::App& app, const ManPageText& text);

// Text as roff shows it literally: backslashes, hyphens and a leading '.' or '\'' escaped.
std::string roff_escape(const std::string& text);

}  // namespace hpc
