// What this hpctrain was built against, for `hpctrain --version`: the LibTorch version, whether
// CUDA and NCCL are compiled in, and where the Gloo headers came from.
#pragma once

#include <string>

namespace hpc::train {

// Several lines, e.g. "hpctrain 0.1.0\nLibTorch 2.15.0 (C++11 ABI)\nCUDA: compiled in (13.0)...".
std::string build_description();

}  // namespace hpc::train
