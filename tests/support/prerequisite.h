// For tests whose check needs a tool or a service that a machine may lack (shellcheck, a Slurm
// cluster). Under CI (the environment variable CI is "true") a missing one fails the test: CI
// installs everything (scripts/install-deps.sh, the test cluster's fixture), so a skip there
// would hide a broken setup behind a passing test. Elsewhere the check is skipped with a WARN.
#pragma once

#include <string>

namespace hpc::test {

// Whether CI=true.
bool in_ci();

// Says that `what` is missing: FAILs the test under CI, else WARNs that the check is skipped.
// The caller returns after it.
//   if (shellcheck.empty()) return missing_prerequisite("shellcheck is not installed");
void missing_prerequisite(const std::string& what);

}  // namespace hpc::test
