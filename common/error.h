// Errors the user can fix: one line saying where, what was wrong, and what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace hpc {

// Thrown for bad input (files, keys, flags, host lists). main() prints what() on one line
// and exits with status 2, having written and submitted nothing.
class UserError : public std::runtime_error {
 public:
  // where: "presets/clusters/jsc.json: profile.port_range.min" or "hpclaunch.json:3:14" or "--set".
  UserError(const std::string& where, const std::string& what, const std::string& fix)
      : std::runtime_error(compose(where, what, fix)) {}
  explicit UserError(const std::string& line) : std::runtime_error(line) {}

 private:
  static std::string compose(const std::string& where, const std::string& what,
                             const std::string& fix) {
    std::string s = where.empty() ? what : where + ": " + what;
    if (!fix.empty()) s += "; " + fix;
    return s;
  }
};

inline constexpr int kExitUsage = 2;  // bad input: nothing written, nothing submitted

// An output that failed after writing had begun: standard output closed or full, a device
// refusing a write. What was written may be partial. main() prints it on one line and exits
// with kExitOutput.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitOutput = 74;  // sysexits' EX_IOERR: an output could not be written

}  // namespace hpc
