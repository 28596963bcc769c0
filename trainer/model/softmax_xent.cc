#include "model/softmax_xent.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

// ---- AVX-512 version ----------------------------------------------------------------------------
// GCC 12 warns inside its own reduction intrinsics (_mm512_undefined_*), a known false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// exp_nonpositive on 16 lanes: the same method and constants. Lanes below e^-87.3, -inf and NaN
// give 0.
__attribute__((target("avx512f,avx512dq"))) inline __m512 exp_nonpositive16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654f);
  const __mmask16 in_range = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  x = _mm512_max_ps(x, lo);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(in_range, p, _mm512_castsi512_ps(e));
}

// The lanes of [j, end) of a row, at most 16: a mask for the loads and stores of the last vector.
inline __mmask16 lanes(int64_t j, int64_t end) {
  const int64_t n = end - j;
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}

// Two passes over the row instead of three. Pass 1 goes block by block (kBlock floats, in L1):
// the block's maximum m_b, then exp(l - m_b) stored in place and summed, the row's maximum M and
// sum S carried along (S = sum_b s_b e^(m_b - M)). Pass 2 scales each block by
// scale e^(m_b - M) / S. `block_max` holds ceil(V / kBlock) floats.
constexpr int64_t kBlock = 2048;

__attribute__((target("avx512f,avx512dq"))) void row_avx512(float* l, int64_t V, int64_t t,
                                                            float* loss, float scale,
                                                            float* block_max) {
  const float lt = l[t];
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  double M = -std::numeric_limits<double>::infinity(), S = 0;
  for (int64_t b0 = 0, b = 0; b0 < V; b0 += kBlock, ++b) {
    const int64_t b1 = std::min(V, b0 + kBlock);
    __m512 vm = neg_inf;
    for (int64_t j = b0; j < b1; j += 16) {
      vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(neg_inf, lanes(j, b1), l + j));
    }
    const float mb = _mm512_reduce_max_ps(vm);
    block_max[b] = mb;
    const __m512 bm = _mm512_set1_ps(std::isinf(mb) ? 0.0f : mb);  // an all -inf block adds 0
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t j = b0; j < b1; j += 16) {
      const __mmask16 k = lanes(j, b1);
      const __m512 e =
          exp_nonpositive16(_mm512_sub_ps(_mm512_mask_loadu_ps(neg_inf, k, l + j), bm));
      if (scale != 0) _mm512_mask_storeu_ps(l + j, k, e);
      s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
      s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    const double sb = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    if (mb > M) {
      S = S * std::exp(M - double(mb)) + sb;
      M = mb;
    } else {
      S += sb * std::exp(double(mb) - M);
    }
  }
  *loss = float(std::log(S)) - (lt - float(M));
  if (scale == 0) return;
  for (int64_t b0 = 0, b = 0; b0 < V; b0 += kBlock, ++b) {
    const int64_t b1 = std::min(V, b0 + kBlock);
    const __m512 k = _mm512_set1_ps(float(double(scale) * std::exp(double(block_max[b]) - M) / S));
    for (int64_t j = b0; j < b1; j += 16) {
      const __mmask16 m = lanes(j, b1);
      _mm512_mask_storeu_ps(l + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, l + j), k));
    }
  }
  l[t] -= scale;
}

#pragma GCC diagnostic pop

bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return yes;
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

#else
bool have_avx2() { return false; }
bool have_avx512() { return false; }
#endif

}  // namespace

bool softmax_xent_has(SoftmaxIsa isa) {
  switch (isa) {
    case SoftmaxIsa::avx512:
      return have_avx512();
    case SoftmaxIsa::avx2:
      return have_avx2();
    default:
      return true;
  }
}

void softmax_xent_rows(float* logits, int64_t n, int64_t V, int64_t ld, const int64_t* target,
                       float* loss, float grad_scale, SoftmaxIsa isa) {
  if (isa == SoftmaxIsa::best)
    isa = have_avx512() ? SoftmaxIsa::avx512 : have_avx2() ? SoftmaxIsa::avx2 : SoftmaxIsa::scalar;
#if defined(__x86_64__)
  if (isa == SoftmaxIsa::avx512 && have_avx512()) {
    std::vector<float> block_max(size_t((V + kBlock - 1) / kBlock));
    for (int64_t i = 0; i < n; ++i) {
      row_avx512(logits + i * ld, V, target[i], loss + i, grad_scale, block_max.data());
    }
    return;
  }
  if (isa != SoftmaxIsa::scalar && have_avx2()) {
    for (int64_t i = 0; i < n; ++i) row_avx2(logits + i * ld, V, target[i], loss + i, grad_scale);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) row_scalar(logits + i * ld, V, target[i], loss + i, grad_scale);
}

const char* softmax_xent_isa() {
  return have_avx512() ? "avx512" : have_avx2() ? "avx2" : "scalar";
}

}  // namespace hpc::train
