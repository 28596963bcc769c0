#include "device.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "error.h"
#include "metrics/metrics.h"
#include "torch_compat.h"

#if HPC_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace hpc::train {

c10::Device pick_device(const std::string& name, int local_rank) {
  const bool cuda = torch::cuda::is_available();
  if (name == "cpu" || (name == "auto" && !cuda)) return c10::Device(c10::kCPU);
  if (name == "cuda" || name == "auto") {
    if (!cuda) {
      throw UserError("--device", "cuda was asked for but no CUDA device is usable",
                      "use --device cpu, or a CUDA build of LibTorch on a GPU node");
    }
    const int n = int(torch::cuda::device_count());
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % n));
  }
  throw UserError("--device", fmt::format("unknown device '{}'", name), "use auto, cpu or cuda");
}

void synchronize(const c10::Device& d) {
#if HPC_TORCH_CUDA
  if (d.is_cuda()) at::cuda::getCurrentCUDAStream(d.index()).synchronize();
#else
  (void)d;
#endif
}

int64_t memory_in_use(const c10::Device& d) {
#if HPC_TORCH_CUDA
  if (d.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(d.index());
    return stats.allocated_bytes[0].peak;  // StatType::AGGREGATE
  }
#endif
  (void)d;
  return resident_memory_bytes();
}

double peak_flops(const c10::Device& d, double peak_tflops_flag) {
  if (peak_tflops_flag > 0) return peak_tflops_flag * 1e12;
#if HPC_TORCH_CUDA
  if (d.is_cuda()) {
    const std::string name = at::cuda::getDeviceProperties(d.index())->name;
    auto is = [&](const char* model) { return name.find(model) != std::string::npos; };
    if (is("H100") || is("H200")) return 989e12;
    if (is("A100")) return 312e12;
    if (is("L40S")) return 362e12;
    if (is("A40")) return 150e12;
  }
#endif
  (void)d;
  return 0;
}

bool use_bf16(const std::string& precision, const c10::Device& d) {
  if (precision == "auto") return d.is_cuda();
  if (precision == "bf16") return true;
  if (precision == "fp32") return false;
  throw UserError("--precision", fmt::format("unknown precision '{}'", precision),
                  "use auto (bf16 on CUDA, fp32 on the CPU), fp32 or bf16");
}

AutocastScope::AutocastScope(bool on, const c10::Device& d) : on_(on), cpu_(!d.is_cuda()) {
  if (on_) compat::set_bf16_autocast(cpu_, true);
}

AutocastScope::~AutocastScope() {
  if (!on_) return;
  compat::set_bf16_autocast(cpu_, false);
  at::autocast::clear_cache();
}

}  // namespace hpc::train
