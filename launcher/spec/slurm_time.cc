#include "spec/slurm_time.h"

#include <regex>

#include "error.h"
#include "shell.h"

namespace hpc {

std::optional<long> slurm_time_seconds(const std::string& text) {
  if (text == "UNLIMITED" || text == "INFINITE" || text == "unlimited" || text == "infinite")
    return -1;
  // std::regex on at most 20 characters (checked first): its recursion grows with the input.
  static const std::regex form(R"((?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?)");
  std::smatch m;
  if (text.size() > 20 || !std::regex_match(text, m, form)) return std::nullopt;
  for (int i = 1; i <= 4; ++i)
    if (m[i].length() > 9) return std::nullopt;  // no Slurm duration needs more; no overflow
  auto num = [&](int i) { return m[i].matched ? std::stol(m[i].str()) : 0L; };
  // A unit below another counts to 59 (23 for hours after days): "01:99:00" is a typo, not
  // 2 h 39 min. The first field alone may be any size ("90" minutes, "48:00:00").
  if (m[4].matched && num(4) > 59) return std::nullopt;
  if (m[3].matched && num(3) > 59) return std::nullopt;
  if (m[1].matched && num(2) > 23) return std::nullopt;
  if (m[1].matched) return num(1) * 86400 + num(2) * 3600 + num(3) * 60 + num(4);
  if (m[4].matched) return num(2) * 3600 + num(3) * 60 + num(4);  // hours:minutes:seconds
  if (m[3].matched) return num(2) * 60 + num(3);                  // minutes:seconds
  return num(2) * 60;                                             // minutes
}

long parse_slurm_time(const std::string& text, const std::string& where) {
  std::optional<long> seconds = slurm_time_seconds(text);
  if (!seconds) {
    throw UserError(where, "\"" + comment_text(text) + "\" is not a Slurm time limit",
                    "write MM, HH:MM:SS or D-HH:MM:SS, e.g. \"02:00:00\"");
  }
  if (*seconds == 0) {
    throw UserError(where, "time limit \"" + text + "\" is zero", "give the job some time");
  }
  return *seconds;
}

}  // namespace hpc
