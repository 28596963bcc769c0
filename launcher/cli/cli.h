// The hpclaunch command line (CLI11). Kept out of main.cc so tests and benchmarks can call it.
#pragma once

#include <string>
#include <vector>

namespace hpc {

// Runs one hpclaunch invocation; returns the exit status (0 ok, 1 internal error, 2 bad input,
// 69 cluster unreachable, 74 an output could not be written; the job verbs add the job's own:
// docs/backends.md).
int run_cli(const std::vector<std::string>& args);

}  // namespace hpc
