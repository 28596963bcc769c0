#include "version_line.h"

#include "hpc_git_revision.h"  // generated into the build tree at every build

#ifndef HPC_VERSION
#define HPC_VERSION "0.0.0"
#endif

namespace hpc {

const char* git_revision() { return HPC_GIT_REVISION; }

std::string version_line(const std::string& program) {
  return program + " " + HPC_VERSION + " (git " + HPC_GIT_REVISION + ")";
}

}  // namespace hpc
