// `hpclaunch render --diff FILE`: what changes between two jobs, as a unified diff of the parts
// of two scripts above the job library's marker (the library below it is the same in every
// script of a version, so it is left out; a difference there is named in one line).
#pragma once

#include <string>

namespace hpc {

// The unified diff (3 lines of context, "--- OLD_NAME" / "+++ NEW_NAME" headers) of the two
// scripts' job parts, or "" when they are the same. A script without the marker is compared
// whole.
std::string job_diff(const std::string& old_script, const std::string& old_name,
                     const std::string& new_script, const std::string& new_name);

// Whether the two scripts carry the same job library (both without one counts as the same).
bool same_job_library(const std::string& a, const std::string& b);

}  // namespace hpc
