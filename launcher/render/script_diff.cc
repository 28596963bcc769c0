#include "render/script_diff.h"

#include <algorithm>
#include <vector>

#include "render/render.h"

namespace hpc {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::string library_part(const std::string& script) {
  size_t at = job_library_offset(script);
  return at == std::string::npos ? std::string() : script.substr(at);
}

struct Edit {
  char kind;  // ' ', '-', '+'
  size_t a, b;  // line numbers (0-based) in the old and new text at this edit
  std::string text;
};

// The edit script from a longest common subsequence (the job parts are ~100 lines: a table of
// their product is small).
std::vector<Edit> edits(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::vector<Edit> out;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      out.push_back({' ', i, j, a[i]});
      ++i, ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push_back({'-', i, j, a[i]});  // removals first, as diff -u shows them
      ++i;
    } else {
      out.push_back({'+', i, j, b[j]});
      ++j;
    }
  }
  return out;
}

std::string range(size_t start, size_t count) {
  // Unified diff: a range of no lines names the line before it.
  return std::to_string(count == 0 ? start : start + 1) + "," + std::to_string(count);
}

}  // namespace

std::string job_diff(const std::string& old_script, const std::string& old_name,
                     const std::string& new_script, const std::string& new_name) {
  const auto a = lines_of(job_part(old_script)), b = lines_of(job_part(new_script));
  const auto e = edits(a, b);
  constexpr size_t kContext = 3;
  std::string out;
  size_t k = 0;
  while (k < e.size()) {
    if (e[k].kind == ' ') {
      ++k;
      continue;
    }
    // A hunk: from kContext lines before this change to kContext after the last change that
    // is within 2 * kContext unchanged lines of the one before it.
    size_t begin = k >= kContext ? k - kContext : 0;
    size_t end = k, quiet = 0;
    for (size_t x = k; x < e.size(); ++x) {
      if (e[x].kind == ' ') {
        if (++quiet > 2 * kContext) break;
      } else {
        quiet = 0;
        end = x;
      }
    }
    end = std::min(e.size(), end + 1 + kContext);
    size_t old_count = 0, new_count = 0;
    for (size_t x = begin; x < end; ++x) {
      if (e[x].kind != '+') ++old_count;
      if (e[x].kind != '-') ++new_count;
    }
    if (out.empty()) out = "--- " + old_name + "\n+++ " + new_name + "\n";
    out += "@@ -" + range(e[begin].a, old_count) + " +" + range(e[begin].b, new_count) + " @@\n";
    for (size_t x = begin; x < end; ++x) out += std::string(1, e[x].kind) + e[x].text + "\n";
    k = end;
  }
  return out;
}

bool same_job_library(const std::string& a, const std::string& b) {
  return library_part(a) == library_part(b);
}

}  // namespace hpc
