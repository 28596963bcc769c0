// The candidates of `hpclaunch tune`: a grid of NCCL variables (a file, or the default one from
// the cluster profile) expanded into numbered candidate sets. Enters: a grid file or a profile.
// Leaves: TuneCandidates, each a list of variables and values (docs/tuning.md).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "spec/spec.h"

namespace hpc {

// A variable's candidate value; nullopt: not exported at all (NCCL decides for itself).
using TuneValue = std::optional<std::string>;
// "Ring", or "(unset)".
std::string tune_value_text(const TuneValue& v);

// One candidate: the variables it sets, in grid order.
struct TuneCandidate {
  std::string id;  // c1, c2, ...
  std::vector<std::pair<std::string, TuneValue>> vars;

  std::string describe() const;  // "NCCL_ALGO=Ring NCCL_PROTO=(unset)"
};

// What to try. A grid file (JSON with comments, docs/tuning.md) holds "variables" (name ->
// list of values: every combination is a candidate) and/or "candidates" (a list of explicit
// sets, name -> value); a value is a string, an integer or null (unset).
struct TuneGrid {
  std::vector<std::pair<std::string, std::vector<TuneValue>>> variables;
  std::vector<std::vector<std::pair<std::string, TuneValue>>> sets;
  std::string origin;  // the file, or "default grid"
};

// Throws UserError "file[:line:col]: key: what; fix" for bad JSON, unknown keys, a value that
// is not a string/integer/null, names that are not environment variables, empty lists,
// duplicate values, and a grid without any candidate.
TuneGrid read_tune_grid(const std::filesystem::path& path);
TuneGrid parse_tune_grid(const nlohmann::json& j, const std::string& origin);

// The default: NCCL_ALGO Ring/Tree, NCCL_PROTO Simple/LL128, NCCL_P2P_DISABLE 0/1, and
// for NCCL_IB_HCA / NCCL_SOCKET_IFNAME the profile's value or unset, when the profile sets one.
TuneGrid default_tune_grid(const ClusterProfile& profile);

// Every candidate of the grid (the product of "variables", then the explicit sets), numbered.
// Throws UserError when there is none, or more than max_candidates.
std::vector<TuneCandidate> expand_tune_grid(const TuneGrid& grid, int max_candidates);

}  // namespace hpc
