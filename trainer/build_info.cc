#include "build_info.h"

#include <fmt/format.h>
#include <torch/version.h>

#if HPC_TORCH_CUDA
#include <cuda_runtime_api.h>  // CUDART_VERSION: the toolkit the CUDA code was compiled with
#endif
#if HPC_WITH_NCCL
#include <nccl.h>  // NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH: the headers ProcessGroupNCCL saw
#endif

#ifndef HPC_GLOO_SOURCE
#define HPC_GLOO_SOURCE "none (no Gloo headers: CPU tensors cannot be reduced)"
#endif

namespace hpc::train {

std::string build_description() {
  std::string s = fmt::format("LibTorch {} (C++11 ABI: {})\n", TORCH_VERSION,
                              _GLIBCXX_USE_CXX11_ABI ? "yes" : "no");
#if HPC_TORCH_CUDA
  s += fmt::format("CUDA: compiled in (toolkit {}.{})\n", CUDART_VERSION / 1000,
                   CUDART_VERSION % 1000 / 10);
#else
  s += "CUDA: not compiled in (CPU LibTorch)\n";
#endif
#if HPC_WITH_NCCL
  s += fmt::format("NCCL: compiled in (headers {}.{}.{})\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#else
  s += "NCCL: not compiled in\n";
#endif
  s += fmt::format("Gloo: {}", HPC_GLOO_SOURCE);
  return s;
}

}  // namespace hpc::train
