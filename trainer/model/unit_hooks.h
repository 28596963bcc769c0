// Points in the model's forward pass where a strategy that shards the parameters (fsdp) gathers
// and frees them. The model announces its units and calls the hooks; it knows nothing of ranks.
//
// Units of GPT-2 (GptImpl::parameter_units): unit 0 is the embedding/head group (wte, which the
// head shares, and wpe), used at both ends of the forward pass; unit 1 + l is block l; the last
// unit, n_layer + 1, is the final LayerNorm (ln_f).
// Order of calls in one forward pass: before(0), then for each block before(1 + l) and
// after(1 + l, x) on the block's output, before(n_layer + 1) and after(n_layer + 1, x) around
// ln_f, and after(0, y) on the pass's result (logits or loss).
#pragma once

#include <ATen/core/Tensor.h>

namespace hpc::train {

// Whether the backward pass reads the values of a unit's parameters (the model knows which of its
// operations keep their weights for backward: a matrix product does; the embedding lookup and
// the chunked head, which forms its weight gradient in the forward pass, do not).
enum class BackwardReads { values, nothing };

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // The unit's parameters must hold their values when this returns.
  virtual void before(int unit) = 0;
  // The unit's output (or the pass's result, for unit 0). Returns the tensor the model goes on
  // with: the same, or the same with a gradient hook registered (to gather again for backward,
  // when `reads` is values).
  virtual at::Tensor after(int unit, const at::Tensor& out, BackwardReads reads) = 0;
};

}  // namespace hpc::train
