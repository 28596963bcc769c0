// The one place for the differences between Debian's LibTorch 1.13 and LibTorch 2.x that the
// trainer's code (not c10d: dist/communicator.cc hides that) would otherwise spell twice.
//  - HPC_TORCH_AT_LEAST(2, 4): a version test for the few calls that changed;
//  - GradAccumulatorPtr: autograd's gradient accumulator node, a std::shared_ptr<Node> in 1.13 and
//    a c10::intrusive_ptr<Node> in recent 2.x (DDP and FSDP keep them, as autograd holds them
//    weakly);
//  - autocast on and off for bf16 on the CPU or CUDA (2.4 renamed the calls and made them per
//    device type).
// Needs <torch/csrc/autograd/engine.h> (or torch/torch.h) before it for the accumulator.
#pragma once

#include <utility>

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/version.h>

#define HPC_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||      \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace hpc::train::compat {

using GradAccumulatorPtr =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

// bf16 autocast for the CPU's or CUDA's ops from now on (on) or no more (off).
inline void set_bf16_autocast(bool cpu, bool on) {
#if HPC_TORCH_AT_LEAST(2, 4)
  const auto type = cpu ? at::kCPU : at::kCUDA;
  if (on) at::autocast::set_autocast_dtype(type, at::kBFloat16);
  at::autocast::set_autocast_enabled(type, on);
#else
  if (cpu) {
    if (on) at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(on);
  } else {
    if (on) at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(on);
  }
#endif
}

}  // namespace hpc::train::compat
