#include "campaigns/log_metric.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "error.h"
#include "shell.h"

namespace hpc {

LogMetric make_log_metric(const std::string& pattern, const std::string& where) {
  const std::string fix =
      "write an ECMAScript regular expression whose first group is the number, e.g. "
      "\"tokens/s: ([0-9.]+)\" (in JSON, a backslash is written \\\\)";
  if (pattern.empty()) throw UserError(where, "the regular expression is empty", fix);
  try {
    return LogMetric{pattern, std::regex(pattern, std::regex::ECMAScript)};
  } catch (const std::regex_error& e) {
    throw UserError(
        where,
        "\"" + comment_text(pattern) + "\" is not a valid regular expression (" + e.what() + ")",
        fix);
  }
}

LabelledLine split_rank_label(const std::string& line) {
  // srun --label: optional padding, digits, ": ".
  static const std::regex srun_label(R"(^\s*([0-9]{1,7}): ?)");
  // torch's global-rank prefix ("[rank3]:", as in its error reports and log_line_prefix_template).
  static const std::regex torch_rank(R"(^\[rank([0-9]{1,7})\]: ?)");
  LabelledLine out{-1, -1, line};
  std::smatch m;
  if (std::regex_search(line, m, srun_label)) {
    out.srun_label = std::atoi(m[1].str().c_str());
    out.text = m.suffix();
  }
  std::string rest = out.text;
  if (std::regex_search(rest, m, torch_rank)) {
    out.torch_rank = std::atoi(m[1].str().c_str());
    out.text = m.suffix();
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
    std::smatch m;
    if (!std::regex_search(l.text, m, metric.regex)) continue;
    std::string figure = m.size() > 1 && m[1].matched ? m[1].str() : m[0].str();
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(figure.c_str(), &end);
    if (figure.empty() || end != figure.c_str() + figure.size() || errno == ERANGE ||
        !std::isfinite(v)) {
      throw std::runtime_error("line " + std::to_string(number) + ": \"" + comment_text(figure) +
                               "\" (what the regex caught) is not a number");
    }
    value = v;
  }
  return value;
}

}  // namespace hpc
