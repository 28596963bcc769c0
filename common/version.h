// hpclaunch's version, from CMake's project(VERSION ...), for headers, run records and --version.
#pragma once

#ifndef HPC_VERSION
#define HPC_VERSION "0.0.0"
#endif

namespace hpc {
inline constexpr const char* kVersion = HPC_VERSION;
}  // namespace hpc
