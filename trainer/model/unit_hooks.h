// Points in the model's forward pass where a strategy that shards the parameters (fsdp) gathers
// and frees them. The model announces its units and calls the hooks; it knows nothing of ranks.
//
// Units of GPT-2 (GptImpl::parameter_units): unit 0 is the embedding/head group (wte, which the
// head shares, wpe and ln_f), used at both ends of the forward pass; unit 1 + l is block l.
// Order of calls in one forward pass: before(0), then for each block before(1 + l) and
// after(1 + l, x) on the block's output, and after(0, y) on the pass's result (logits or loss).
#pragma once

#include <ATen/core/Tensor.h>

namespace hpc::train {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // The unit's parameters must hold their values when this returns.
  virtual void before(int unit) = 0;
  // The unit's output (or the pass's result, for unit 0). Returns the tensor the model goes on
  // with: the same, or the same with a gradient hook registered (to gather again for backward).
  virtual at::Tensor after(int unit, const at::Tensor& out) = 0;
};

}  // namespace hpc::train
