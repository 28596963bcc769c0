#include "model/softmax_xent.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hpc::train {
namespace {

// ---- portable version -------------------------------------------------------------------------

void row_scalar(float* l, int64_t V, int64_t t, float* loss, float scale) {
  const float lt = l[t];
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < V; ++j) m = std::max(m, l[j]);
  double sum = 0;
  for (int64_t j = 0; j < V; ++j) {
    const float e = std::exp(l[j] - m);
    sum += e;
    if (scale != 0) l[j] = e;
  }
  *loss = float(std::log(sum)) - (lt - m);  // -log_softmax at the target, as ATen forms it
  if (scale == 0) return;
  const float k = float(double(scale) / sum);
  for (int64_t j = 0; j < V; ++j) l[j] *= k;
  l[t] -= scale;
}

#if defined(__x86_64__)

// ---- AVX2 + FMA version -------------------------------------------------------------------------

// exp(x) for x <= 0 (inputs are logits minus their row maximum), Cephes' single-precision
// method: x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n through the exponent
// bits. Error about 1 ulp, like the SLEEF u10 exp LibTorch uses; results below e^-87.3 are
// flushed to zero as the probabilities they stand for are.
__attribute__((target("avx2,fma"))) inline __m256 exp_nonpositive(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(underflow, y);
}

__attribute__((target("avx2,fma"))) inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

__attribute__((target("avx2,fma"))) inline double hsum(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

// exp of 8 values as 8 floats, added to two double accumulators (sums of 50k terms keep their
// precision in double).
__attribute__((target("avx2,fma"))) inline void add_to(__m256d& a, __m256d& b, __m256 e) {
  a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
  b = _mm256_add_pd(b, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
}

__attribute__((target("avx2,fma"))) void row_avx2(float* l, int64_t V, int64_t t, float* loss,
                                                  float scale) {
  const int64_t V8 = V & ~int64_t(7);
  const float lt = l[t];
  // Pass 1: the row maximum.
  __m256 vm = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < V8; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(l + j));
  float m = hmax(vm);
  for (int64_t j = V8; j < V; ++j) m = std::max(m, l[j]);
  // Pass 2: exp(l - m), summed (and stored when the gradient is wanted).
  const __m256 bm = _mm256_set1_ps(m);
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  double tail = 0;
  if (scale != 0) {
    for (int64_t j = 0; j < V8; j += 8) {
      const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(l + j), bm));
      _mm256_storeu_ps(l + j, e);
      add_to(s0, s1, e);
    }
    for (int64_t j = V8; j < V; ++j) tail += (l[j] = std::exp(l[j] - m));
  } else {
    for (int64_t j = 0; j < V8; j += 8) {
      add_to(s0, s1, exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(l + j), bm)));
    }
    for (int64_t j = V8; j < V; ++j) tail += std::exp(l[j] - m);
  }
  const double sum = hsum(_mm256_add_pd(s0, s1)) + tail;
  *loss = float(std::log(sum)) - (lt - m);
  if (scale == 0) return;
  // Pass 3: scale * softmax, minus scale at the target.
  const __m256 k = _mm256_set1_ps(float(double(scale) / sum));
  for (int64_t j = 0; j < V8; j += 8) {
    _mm256_storeu_ps(l + j, _mm256_mul_ps(_mm256_loadu_ps(l + j), k));
  }
  const float ks = float(double(scale) / sum);
  for (int64_t j = V8; j < V; ++j) l[j] *= ks;
  l[t] -= scale;
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

#else
bool have_avx2() { return false; }
#endif

}  // namespace

void softmax_xent_rows(float* logits, int64_t n, int64_t V, int64_t ld, const int64_t* target,
                       float* loss, float grad_scale) {
#if defined(__x86_64__)
  if (have_avx2()) {
    for (int64_t i = 0; i < n; ++i) row_avx2(logits + i * ld, V, target[i], loss + i, grad_scale);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) row_scalar(logits + i * ld, V, target[i], loss + i, grad_scale);
}

const char* softmax_xent_isa() { return have_avx2() ? "avx2" : "scalar"; }

}  // namespace hpc::train
