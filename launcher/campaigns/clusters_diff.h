// `hpclaunch clusters diff A B`: what a tuned profile changed, resolved value by value.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spec/catalog.h"

namespace hpc {

// `hpclaunch clusters diff A B`: one line per resolved key that differs ("key: A -> B", with
// "(unset)"), the tuning record summarised in one line. Empty: no differences.
std::vector<std::string> diff_cluster_profiles(const nlohmann::json& a, const nlohmann::json& b);
// The resolved profile content of a cluster (the defaults' profile block, then the file chain).
// `where` names what gave the name in messages (Catalog::load).
nlohmann::json resolved_cluster_profile(const Catalog& catalog, const std::string& name,
                                        const std::string& where = "");

}  // namespace hpc
