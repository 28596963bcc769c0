// "Did you mean ...?" for unknown keys, presets, clusters and strategies.
#pragma once

#include <string>
#include <vector>

namespace hpc {

// The closest candidate by edit distance, if close enough to be a plausible typo; else "".
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// A fix for an unknown `word`: `did you mean "x"?` or `known <kind>: a, b, c`.
std::string suggest_fix(const std::string& word, const std::vector<std::string>& candidates,
                        const std::string& kind);

}  // namespace hpc
