// What `--version` prints: the program, the release (CMake's project VERSION) and the commit it
// was built from, from the header cmake/git_revision.cmake writes ("unknown" from a tarball).
#pragma once

#include <string>

namespace hpc {

// "1a2b3c4d5e6f", "1a2b3c4d5e6f-dirty" or "unknown".
const char* git_revision();

// "hpclaunch 0.1.0 (git 1a2b3c4d5e6f)".
std::string version_line(const std::string& program);

}  // namespace hpc
