#include "campaigns/log_metric.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include <re2/re2.h>

#include "error.h"
#include "shell.h"

namespace hpc {

LogMetric make_log_metric(const std::string& pattern, const std::string& where) {
  const std::string fix =
      "write an RE2 regular expression (no backreferences or lookaround: "
      "https://github.com/google/re2/wiki/Syntax) whose first group is the number, e.g. "
      "\"tokens/s: ([0-9.]+)\" (in JSON, a backslash is written \\\\)";
  if (pattern.empty()) throw UserError(where, "the regular expression is empty", fix);
  RE2::Options options;
  options.set_log_errors(false);  // the error is ours to report, on one line
  auto regex = std::make_shared<const RE2>(pattern, options);
  if (!regex->ok()) {
    throw UserError(where,
                    "\"" + comment_text(pattern) + "\" is not a valid regular expression (RE2: " +
                        comment_text(regex->error()) + ")",
                    fix);
  }
  return LogMetric{pattern, std::move(regex)};
}

namespace {

// Reads `digits` at `at` (1 to 7 of them, as a rank is written) into `value`; advances `at`.
bool read_label_number(const std::string& s, size_t& at, int& value) {
  size_t end = at;
  while (end < s.size() && end - at < 8 && s[end] >= '0' && s[end] <= '9') ++end;
  if (end == at || end - at > 7) return false;
  value = std::atoi(s.substr(at, end - at).c_str());
  at = end;
  return true;
}

}  // namespace

// Scanned by hand, in one pass: a log line may be megabytes long.
LabelledLine split_rank_label(const std::string& line) {
  LabelledLine out{-1, -1, line};
  // srun --label: optional padding, 1 to 7 digits, ':', an optional space.
  size_t at = line.find_first_not_of(" \t\v\f\r");
  int value = 0;
  if (at != std::string::npos && read_label_number(line, at, value) && at < line.size() &&
      line[at] == ':') {
    ++at;
    if (at < line.size() && line[at] == ' ') ++at;
    out.srun_label = value;
    out.text = line.substr(at);
  }
  // torch's global-rank prefix ("[rank3]:", as in its error reports and log_line_prefix_template).
  const std::string& rest = out.text;
  static const std::string open = "[rank";
  at = open.size();
  if (rest.compare(0, open.size(), open) == 0 && read_label_number(rest, at, value) &&
      rest.compare(at, 2, "]:") == 0) {
    at += 2;
    if (at < rest.size() && rest[at] == ' ') ++at;
    out.torch_rank = value;
    out.text = rest.substr(at);
  }
  return out;
}

namespace {
bool printed_by_rank0(const LabelledLine& l, SrunLabels labels) {
  if (l.torch_rank >= 0) return l.torch_rank == 0;
  if (labels == SrunLabels::kRanks) return l.srun_label <= 0;
  return true;
}
}  // namespace

std::optional<double> last_metric_value(const LogMetric& metric, const std::string& log,
                                        SrunLabels labels) {
  std::istringstream in(log);
  std::string line;
  std::optional<double> value;
  long number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    LabelledLine l = split_rank_label(line);
    if (!printed_by_rank0(l, labels)) continue;
    re2::StringPiece groups[2];  // the whole match, group 1
    const int wanted = metric.regex->NumberOfCapturingGroups() > 0 ? 2 : 1;
    if (!metric.regex->Match(l.text, 0, l.text.size(), RE2::UNANCHORED, groups, wanted)) continue;
    const re2::StringPiece& caught = wanted == 2 && groups[1].data() ? groups[1] : groups[0];
    std::string figure(caught.data(), caught.size());
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(figure.c_str(), &end);
    if (figure.empty() || end != figure.c_str() + figure.size() || errno == ERANGE ||
        !std::isfinite(v)) {
      // What was caught may be a whole long line: its start is enough to see what went wrong.
      const std::string shown = figure.size() > 80 ? figure.substr(0, 80) + "..." : figure;
      throw std::runtime_error("line " + std::to_string(number) + ": \"" + comment_text(shown) +
                               "\" (what the regex caught) is not a number");
    }
    value = v;
  }
  return value;
}

LinePredicate log_line_matcher(const LogMetric& metric) {
  return [regex = metric.regex](const std::string& line) {
    const std::string text = split_rank_label(line).text;
    return RE2::PartialMatch(text, *regex);
  };
}

}  // namespace hpc
