#include "spec/job_features.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "error.h"
#include "shell.h"
#include "spec/suggest.h"
#include "text.h"

namespace hpc {
namespace {

const char* const kArrayFix =
    "write indexes as sbatch takes them: 0-9, 0-15:4, 1,3,5 or 0-9%2 (at most 2 at once)";

// A plain whole number within [0, max]; nullopt for anything else ("", "+1", "01", "1e3").
std::optional<long> array_number(const std::string& text, long max) {
  if (text.empty() || !all_digits(text) || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  auto v = parse_plain_whole_number(text);
  if (!v || *v > max) return std::nullopt;
  return static_cast<long>(*v);
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

// One list element: N, N-M or N-M:STEP; appends its indexes.
void add_array_element(const std::string& element, const std::string& text,
                       const std::string& where, std::vector<long>& out) {
  const std::string quoted = "\"" + comment_text(text) + "\"";
  auto bad = [&](const std::string& what) {
    throw UserError(where, quoted + " is not a job array: " + what, kArrayFix);
  };
  if (element.empty()) bad("an empty element (two commas, or one at an end)");
  const size_t dash = element.find('-');
  const size_t colon = element.find(':');
  const std::string first_text = element.substr(0, std::min(dash, colon));
  auto first = array_number(first_text, kMaxArrayIndex);
  if (!first) {
    bad("\"" + comment_text(first_text) + "\" is not an index (0 to " +
        std::to_string(kMaxArrayIndex) + ")");
  }
  if (dash == std::string::npos) {
    if (colon != std::string::npos) bad("a step (\":\") belongs to a range such as 0-15:4");
    out.push_back(*first);
    return;
  }
  const std::string last_text =
      element.substr(dash + 1, colon == std::string::npos ? std::string::npos : colon - dash - 1);
  if (last_text.empty()) bad("the range \"" + comment_text(element) + "\" has no last index");
  auto last = array_number(last_text, kMaxArrayIndex);
  if (!last) bad("\"" + comment_text(last_text) + "\" is not an index");
  if (*last < *first) {
    bad("the range " + element.substr(0, colon) + " runs backwards (write " +
        std::to_string(*last) + "-" + std::to_string(*first) + ")");
  }
  long step = 1;
  if (colon != std::string::npos) {
    auto s = array_number(element.substr(colon + 1), kMaxArrayIndex);
    if (!s || *s == 0) bad("the step after ':' must be a whole number from 1 up");
    step = *s;
  }
  for (long i = *first; i <= *last; i += step) {
    out.push_back(i);
    if (out.size() > kMaxArrayTasks) {
      throw UserError(where,
                      quoted + " has more than " + std::to_string(kMaxArrayTasks) +
                          " tasks (hpclaunch makes a run directory for each)",
                      "use several smaller arrays, or a step (0-99999:10)");
    }
  }
}

}  // namespace

ArrayIndexes parse_array_indexes(const std::string& text, const std::string& where) {
  ArrayIndexes result;
  std::string list = text;
  if (const size_t percent = text.find('%'); percent != std::string::npos) {
    list = text.substr(0, percent);
    auto limit = array_number(text.substr(percent + 1), 1000000);
    if (!limit || *limit == 0) {
      throw UserError(where,
                      "\"" + comment_text(text) +
                          "\": the limit after '%' must be a whole number " +
                          "from 1 up (how many tasks may run at once)",
                      "write e.g. 0-9%2, or leave the %LIMIT out for no limit");
    }
    result.limit = static_cast<int>(*limit);
  }
  for (const auto& element : split(list, ','))
    add_array_element(element, text, where, result.indexes);
  std::sort(result.indexes.begin(), result.indexes.end());
  result.indexes.erase(std::unique(result.indexes.begin(), result.indexes.end()),
                       result.indexes.end());
  if (result.indexes.size() > kMaxArrayTasks) {
    throw UserError(
        where,
        "\"" + comment_text(text) + "\" has more than " + std::to_string(kMaxArrayTasks) + " tasks",
        "use several smaller arrays");
  }
  return result;
}

const std::vector<std::string>& known_dependency_types() {
  static const std::vector<std::string> types = {"afterok", "afterany", "afternotok", "after"};
  return types;
}

Dependency parse_dependency(const std::string& text, const std::string& where) {
  Dependency d;
  const size_t colon = text.find(':');
  d.job_id = text.substr(0, colon);
  if (colon != std::string::npos) d.type = text.substr(colon + 1);
  if (!is_job_id(d.job_id) || d.job_id.find('+') != std::string::npos) {
    throw UserError(where,
                    "\"" + comment_text(d.job_id) +
                        "\" is not a job id (a number from 1 up, or an array task such as 123_4)",
                    "write JOBID[:TYPE], e.g. 4242 or 4242:afterany (the id hpclaunch submit "
                    "prints)");
  }
  const auto& types = known_dependency_types();
  if (std::find(types.begin(), types.end(), d.type) == types.end()) {
    throw UserError(where, "unknown dependency type \"" + comment_text(d.type) + "\"",
                    suggest_fix(d.type, types, "types (afterok: the job must succeed)"));
  }
  return d;
}

std::string dependency_directive(const std::vector<Dependency>& deps) {
  std::vector<std::pair<std::string, std::string>> groups;  // type -> ":id:id"
  for (const auto& d : deps) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == d.type; });
    if (it == groups.end()) {
      groups.emplace_back(d.type, "");
      it = groups.end() - 1;
    }
    it->second += ":" + d.job_id;
  }
  std::string out;
  for (const auto& [type, ids] : groups) out += (out.empty() ? "" : ",") + type + ids;
  return out;
}

const std::vector<std::string>& known_mail_types() {
  static const std::vector<std::string> types = {
      "NONE",          "BEGIN",          "END",        "FAIL",       "REQUEUE",
      "ALL",           "INVALID_DEPEND", "STAGE_OUT",  "TIME_LIMIT", "TIME_LIMIT_90",
      "TIME_LIMIT_80", "TIME_LIMIT_50",  "ARRAY_TASKS"};
  return types;
}

std::string parse_mail_type(const std::string& text, const std::string& where) {
  std::string upper = text;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto& types = known_mail_types();
  if (std::find(types.begin(), types.end(), upper) == types.end()) {
    throw UserError(where, "unknown mail type \"" + comment_text(text) + "\"",
                    suggest_fix(upper, types, "mail types (sbatch --mail-type)"));
  }
  return upper;
}

void check_mail_user(const std::string& text, const std::string& where) {
  // std::regex on at most 254 characters (checked first): its recursion grows with the input.
  static const std::regex address(R"([A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*)");
  if (text.size() > 254 || !std::regex_match(text, address)) {
    throw UserError(where, "\"" + comment_text(text) + "\" is not a mail address",
                    "write an address such as ada@example.org (leave it out and Slurm mails the "
                    "submitting user)");
  }
}

}  // namespace hpc
