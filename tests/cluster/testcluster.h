// Where the test cluster of scripts/testcluster.sh lives, for tests that declare
// FIXTURES_REQUIRED slurm_cluster (see tests/cluster/CMakeLists.txt).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

namespace hpc::test {

// $HPC_TESTCLUSTER_DIR when set (a cluster brought up by hand), else the build's own
// <build>/testcluster, which the cluster:up fixture starts.
inline std::string testcluster_dir() {
  if (const char* dir = std::getenv("HPC_TESTCLUSTER_DIR"); dir && *dir) return dir;
#ifdef HPC_TESTCLUSTER_DIR
  return HPC_TESTCLUSTER_DIR;
#else
  return "/tmp/hpclaunch-testcluster";
#endif
}

// `ssh -F <this> testlogin CMD` logs in to the cluster's sshd on 127.0.0.1 (testlogin-wrongkey
// offers a key that is refused).
inline std::string testcluster_ssh_config() { return testcluster_dir() + "/ssh/config"; }

// The lines of a program's output, without their '\n'; no trailing empty line.
inline std::vector<std::string> output_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

}  // namespace hpc::test
