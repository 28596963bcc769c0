#include "optim/optim_cpu.h"

#include <cmath>

namespace hpc::train {

// Compiled for AVX2 and for the baseline; the loader picks one (GCC function multiversioning).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HPC_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HPC_VECTOR_CLONES
#endif

HPC_VECTOR_CLONES
void adamw_update(float* __restrict p, const float* __restrict g, float* __restrict m,
                  float* __restrict v, int64_t n, const AdamWStep& s) {
  const float decay = s.decay, b1 = s.beta1, b2 = s.beta2, c1 = 1.0f - s.beta1, c2 = 1.0f - s.beta2,
              bc2 = s.bc2_sqrt, eps = s.eps, step = -s.step_size;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * b1 + c1 * gi;
    const float vi = v[i] * b2 + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2 + eps;
    p[i] = p[i] * decay + step * (mi / denom);
  }
}

HPC_VECTOR_CLONES
double sum_of_squares(const float* __restrict x, int64_t n) {
  // 16 float lanes (one or two vector registers) per block of 4096, blocks added up in double.
  double total = 0;
  constexpr int64_t kLanes = 16, kBlock = 4096;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    float acc[kLanes] = {};
    for (int64_t j = 0; j < kBlock; j += kLanes) {
      for (int64_t k = 0; k < kLanes; ++k) acc[k] += x[i + j + k] * x[i + j + k];
    }
    double s = 0;
    for (float a : acc) s += a;
    total += s;
  }
  for (; i < n; ++i) total += double(x[i]) * double(x[i]);
  return total;
}

}  // namespace hpc::train
