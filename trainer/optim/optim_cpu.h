// The optimiser's per-element work on CPU float arrays, one pass each (LibTorch's per-tensor
// operators take about ten passes and allocate temporaries for the same AdamW update). No LibTorch.
#pragma once

#include <cstdint>

namespace hpc::train {

struct AdamWStep {
  float decay;  // 1 - lr * weight_decay (1 for tensors without decay)
  float beta1, beta2;
  float bc2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
  float step_size;  // lr / (1 - beta1^t)
};

// PyTorch's single-tensor AdamW, element by element, in its order of operations:
//   p *= decay; m = m*b1 + (1-b1) g; v = v*b2 + (1-b2) g g;
//   p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s);

// Sum of squares, accumulated in double.
double sum_of_squares(const float* x, int64_t n);

}  // namespace hpc::train
