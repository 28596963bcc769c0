// The inner loop of the fused head + cross-entropy: softmax cross-entropy over rows of logits,
// turning each row into its gradient in place while it is in cache. No LibTorch: plain floats,
// AVX-512 or AVX2/FMA when the CPU has them (chosen at run time), portable C++ otherwise.
#pragma once

#include <cstdint>

namespace hpc::train {

// For each row i < n of `logits` (V floats, rows `ld` floats apart):
//   loss[i] = log(sum_j exp(l_ij - m_i)) + m_i - l_i,target[i]       with m_i = max_j l_ij
// and, if grad_scale is not 0, the row is overwritten with
//   grad_scale * (softmax(l_i) - onehot(target[i]))
// which is d(grad_scale * sum_i loss_i)/d l_i: the gradient of the logits, ready for the two
// matrix products that carry it to the hidden states and the head's weights.
// Targets must lie in [0, V). `isa` picks the implementation (tests run each one the CPU has);
// best: AVX-512 (two passes over each row), else AVX2 (three), else portable C++.
enum class SoftmaxIsa { best, avx512, avx2, scalar };
void softmax_xent_rows(float* logits, int64_t n, int64_t V, int64_t ld, const int64_t* target,
                       float* loss, float grad_scale, SoftmaxIsa isa = SoftmaxIsa::best);

// Whether this CPU runs `isa` (best and scalar: always).
bool softmax_xent_has(SoftmaxIsa isa);

// Which implementation `best` runs here: "avx512", "avx2" or "scalar".
const char* softmax_xent_isa();

}  // namespace hpc::train
