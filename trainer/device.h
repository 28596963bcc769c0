// The device a rank computes on and what the commands ask of it: which one, waiting for its queued
// work (timings), memory in use, peak FLOP/s (MFU), bf16 autocast. The CUDA specifics
// (HPC_TORCH_CUDA builds) stay in device.cc.
#pragma once

#include <cstdint>
#include <string>

#include <c10/core/Device.h>

namespace hpc::train {

// "auto" (CUDA when usable, else the CPU), "cpu" or "cuda"; CUDA device local_rank mod the
// count. Throws UserError naming --device.
c10::Device pick_device(const std::string& name, int local_rank);

// Returns once the work queued on `d` is done (CUDA); nothing on the CPU.
void synchronize(const c10::Device& d);

// CUDA: the caching allocator's peak of allocated bytes; CPU: the process's resident set size.
int64_t memory_in_use(const c10::Device& d);

// Peak dense bf16 FLOP/s of known GPUs, for MFU: the flag (in TFLOP/s) when positive; 0 when
// unknown (CPUs).
double peak_flops(const c10::Device& d, double peak_tflops_flag);

// --precision: "auto" (bf16 on CUDA, fp32 on the CPU), "fp32" or "bf16". Whether it means bf16
// on `d`; throws UserError naming --precision for another word.
bool use_bf16(const std::string& precision, const c10::Device& d);

// bf16 autocast on the device's type (CUDA, or the CPU: what the tests run the bf16 path on) for
// the scope's lifetime; nothing when off.
class AutocastScope {
 public:
  AutocastScope(bool on, const c10::Device& d);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_;
  bool cpu_;
};

}  // namespace hpc::train
