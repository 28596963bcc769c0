// What this hpctrain was built against, for `hpctrain --version`: the LibTorch version, whether
// CUDA and NCCL are compiled in, and where the Gloo headers came from.
#pragma once

#include <string>

namespace hpc::train {

// Several lines, e.g. "LibTorch 2.15.0 (C++11 ABI: yes)\nCUDA: compiled in (toolkit 13.0)\n...";
// `hpctrain --version` prints them under hpc::version_line("hpctrain").
std::string build_description();

}  // namespace hpc::train
