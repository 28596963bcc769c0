#include "spec/suggest.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace hpc {
namespace {

bool same_letter(char x, char y) {
  return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
}

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbouring letters ("fdsp" -> "fsdp") each cost one, as typos do.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = same_letter(a[i - 1], b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && same_letter(a[i - 1], b[j - 2]) && same_letter(a[i - 2], b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
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
