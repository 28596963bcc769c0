// MKL's kernels on AMD CPUs. The torch wheel's libtorch_cpu carries Intel MKL, which asks
// mkl_serv_intel_cpu_true() before it looks at the CPU's features: on any other vendor it runs its
// generic code path (AVX2 "def" kernels), also on CPUs with AVX-512 (AMD Zen 4). Defined here, in
// the executable, this function is found before MKL's own (libtorch_cpu calls it through its
// PLT), so MKL picks its kernels by the CPU's feature bits as it does on Intel. On the test machine
// (AMD EPYC, Zen 4) that made a 2048^3 sgemm 112 instead of 92 GFLOP/s and hpctrain's steps 9%
// faster (docs/trainer.md). HPCTRAIN_MKL_VENDOR_CHECK=1 gives MKL its own answer back.
// Debian's LibTorch 1.13 uses OpenBLAS: nothing calls this there. The same file builds
// libhpc_mkl_cpu_dispatch.so, which bench/trainer_bench.sh preloads into the Python references so
// that both sides of its comparison run the same kernels.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace {

int answer() {
  const char* keep = std::getenv("HPCTRAIN_MKL_VENDOR_CHECK");
  if (keep == nullptr || std::strcmp(keep, "1") != 0) return 1;
  using Fn = int (*)();
  const auto mkl_own = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "mkl_serv_intel_cpu_true"));
  if (mkl_own) return mkl_own();
  // Preloaded into a process whose MKL is not in the global scope (Python loads libtorch_cpu
  // privately): MKL's own test, the CPU's vendor.
#if defined(__x86_64__)
  return __builtin_cpu_is("intel") ? 1 : 0;
#else
  return 0;
#endif
}

}  // namespace

// Decided once: MKL may ask on every call that dispatches a kernel.
extern "C" __attribute__((visibility("default"))) int mkl_serv_intel_cpu_true() {
  static const int cached = answer();
  return cached;
}
