// The time bounds of the tests (docs/hacking.md#time-bounds). A bound in a test guards against a
// program that hangs; it is never a measurement (timings belong in bench/). Each bound is chosen
// far above what the slowest machine of the project's kind needs under the suite's own parallel
// load, and every one is multiplied by HPC_TEST_SLOWDOWN (a number >= 1, default 1) for a machine
// slower still: `HPC_TEST_SLOWDOWN=3 scripts/test.sh`.
#pragma once

#include <chrono>

namespace hpc::test {

// HPC_TEST_SLOWDOWN as a number in [1, 100]; 1 when unset or unreadable.
double slowdown_factor();

// `bound` x slowdown_factor().
std::chrono::milliseconds scaled(std::chrono::milliseconds bound);

}  // namespace hpc::test
