#include "suggest.h"

#include <algorithm>
#include <cctype>

namespace hpc {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) { best_distance = d; best = c; }
  }
  // A typo changes a few characters; allow one edit per three characters, at least two.
  size_t allowed = std::max<size_t>(2, word.size() / 3);
  return best_distance <= allowed ? best : std::string();
}

std::string suggest_fix(const std::string& word, const std::vector<std::string>& candidates,
                        const std::string& kind) {
  std::string best = closest_match(word, candidates);
  if (!best.empty()) return "did you mean \"" + best + "\"?";
  std::string list;
  for (const auto& c : candidates) list += (list.empty() ? "" : ", ") + c;
  if (list.empty()) return "no " + kind + " are defined";
  return "known " + kind + ": " + list;
}

}  // namespace hpc
