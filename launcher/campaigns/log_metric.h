// A figure that a user's own program prints, read from its job's log: what `hpclaunch sweep`
// measures when the sweep declares `"metric": {"regex": "..."}` instead of reading hpctrain's
// metrics.jsonl (docs/sweeps.md, "Your own program's figure").
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "follow/startup.h"

namespace re2 {
class RE2;
}

namespace hpc {

// RE2's syntax (https://github.com/google/re2/wiki/Syntax), matched in time linear in the line's
// length: a user's regex meets a user's log, and std::regex's backtracking overflowed the stack
// on a 200 KB line and took 81 s for (a+)+$ on 30 characters (issue 35).
struct LogMetric {
  std::string pattern;                    // as the user wrote it
  std::shared_ptr<const re2::RE2> regex;  // compiled from it
};

// Compiles `pattern`. Throws UserError(where, "... is not a valid regular expression (RE2: ...)",
// fix) for a pattern RE2 refuses (a backreference, a lookahead, a bad repetition), or an empty
// one.
LogMetric make_log_metric(const std::string& pattern, const std::string& where);

// The labels of a log line: srun --label's "N: " (a global rank under one task per GPU, a node
// index under one torchrun per node) and then torch's "[rankN]:" (a global rank; torchrun's own
// "[defaultN]:" prefix is a local rank and is not read). -1: absent.
struct LabelledLine {
  int srun_label = -1, torch_rank = -1;
  std::string text;  // after the labels
};
LabelledLine split_rank_label(const std::string& line);

// What srun's label means in a log: the global rank (hpctrain, launch srun), or the node of a
// torchrun (launch torchrun), whose c10d rendezvous numbers the nodes in the order they join, so
// global rank 0 may be on any node and its lines are not told apart by the label.
enum class SrunLabels { kRanks, kNodes };

// The figure of the LAST line of `log` that rank 0 printed and that the regex matches anywhere
// (a search): capture group 1, else the whole match, read as a number. Rank 0's lines:
// "[rank0]:", else srun's label 0 when labels are ranks, else any line without "[rankN]:" of
// another rank (under torchrun print the figure from rank 0 only). Lines without labels count.
// nullopt when no such line exists. Throws std::runtime_error "line N: ... is not a number" when
// the matched text is not one (a pattern whose group catches the wrong part).
std::optional<double> last_metric_value(const LogMetric& metric, const std::string& log,
                                        SrunLabels labels = SrunLabels::kRanks);

// A test of a log line for the start-up table's first step (follow/startup.h): the regex found
// in the line's text after its labels, on any rank.
LinePredicate log_line_matcher(const LogMetric& metric);

}  // namespace hpc
