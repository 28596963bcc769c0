// A figure that a user's own program prints, read from its job's log: what `hpclaunch sweep`
// measures when the sweep declares `"metric": {"regex": "..."}` instead of reading hpctrain's
// metrics.jsonl (docs/sweeps.md, "Your own program's figure").
#pragma once

#include <optional>
#include <regex>
#include <string>

namespace hpc {

struct LogMetric {
  std::string pattern;  // as the user wrote it (ECMAScript syntax)
  std::regex regex;     // compiled from it
};

// Compiles `pattern`. Throws UserError(where, "not a valid regular expression: ...", fix) for a
// pattern std::regex refuses, or an empty one.
LogMetric make_log_metric(const std::string& pattern, const std::string& where);

// The rank a log line carries, and the text after the label: srun --label's "N: " (one task per
// GPU: the global rank; one per node: the node's launcher, whose local rank 0 is the node's
// first rank), then torchrun's "[rankN]:" or "[defaultN]:" when present. -1: no label.
struct LabelledLine {
  int rank = -1;
  std::string text;
};
LabelledLine split_rank_label(const std::string& line);

// The figure of the LAST line of `log` that rank 0 printed (label 0, or no label) and that the
// regex matches (std::regex_search): capture group 1, else the whole match, read as a number.
// nullopt when no such line exists. Throws std::runtime_error "line N: ... is not a number" when
// the matched text is not one (a pattern whose group catches the wrong part).
std::optional<double> last_metric_value(const LogMetric& metric, const std::string& log);

}  // namespace hpc
