// GPT-2: token and learned position embeddings, n_layer pre-LayerNorm blocks (causal
// self-attention, GELU-tanh MLP), a final LayerNorm and a head tied to the token embedding.
// The model knows nothing about ranks, devices or precision policy: strategies in dist/ and the
// training loop apply those from outside.
//
// Parameter names follow Hugging Face's GPT2Model ("wte.weight", "h.3.attn.c_attn.weight", ...),
// with Linear weights stored [out, in] (HF's Conv1D stores [in, out]; checkpoint.cc transposes).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include "model/config.h"
#include "model/unit_hooks.h"

namespace hpc::train {

struct GptBlock;  // model.cc

// allocated: the parameters are built and initialised (init_weights). deferred: they have their
// shapes but no storage; a sharded strategy materialises each unit in its own buffer and fills
// it with init_parameter, unit after unit in parameter order, so that no rank ever holds the
// whole model and the values equal init_weights' (the generator is drawn in the same order).
// unfilled: allocated but not initialised, for a resume whose checkpoint fills every value (GPT-2
// 124M's init draws 124M normal numbers: seconds on a busy CPU, all overwritten).
enum class ParameterStorage { allocated, deferred, unfilled };

// Rows per chunk of the fused head + cross-entropy (GptImpl::loss).
constexpr int64_t kHeadChunkAuto = -1;
constexpr int64_t kHeadChunkBudgetBytes = int64_t(256) << 20;
// The auto choice for N rows of V logits: the fewest chunks whose [rows, V] fp32 buffer fits
// kHeadChunkBudgetBytes, with the N rows split evenly among them.
int64_t head_chunk_rows_for(int64_t N, int64_t V);

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const GptConfig& config, ParameterStorage storage = ParameterStorage::allocated);

  // GPT-2 initialisation from the current default generator (torch::manual_seed first):
  // weights normal(0, 0.02), residual projections (attn.c_proj, mlp.c_proj) normal(0,
  // 0.02/sqrt(2 n_layer)), biases zero, LayerNorm weight 1 and bias 0.
  void init_weights();
  // The same for parameter `index` (named_parameters() order), into `values` (its shape):
  // init_weights is this over every parameter in order.
  void init_parameter(size_t index, at::Tensor values) const;

  // idx [B, T] int64 -> logits [B, T, V].
  torch::Tensor logits(const torch::Tensor& idx);

  // idx, targets [B, T] int64 -> mean cross-entropy, a scalar. The head and the cross-entropy
  // are computed over chunks of `head_chunk_rows` rows of the B*T positions, so the [B*T, V]
  // logits never exist whole; the gradients of the head are formed in the same pass (see
  // chunked_head_loss). head_chunk_rows 0 takes the plain path (full logits, cross_entropy);
  // kHeadChunkAuto (the default) splits the rows evenly into the fewest chunks whose fp32 [rows, V]
  // buffer stays within kHeadChunkBudgetBytes (head_chunk_rows_for).
  torch::Tensor loss(const torch::Tensor& idx, const torch::Tensor& targets);

  const GptConfig& config() const { return config_; }
  void set_head_chunk_rows(int64_t rows) { head_chunk_rows_ = rows; }
  // dtype of the head's matrix products in the chunked path (bf16 under CUDA autocast).
  void set_head_matmul_dtype(c10::ScalarType t) { head_matmul_dtype_ = t; }

  // Sharded strategies (unit_hooks.h): the indices, in named_parameters() order, of each unit's
  // parameters (unit 0: wte, wpe; unit 1 + l: block l; unit n_layer + 1: ln_f), and the hooks
  // the forward pass
  // calls (none by default; the model does not own them).
  std::vector<std::vector<size_t>> parameter_units();
  void set_unit_hooks(UnitHooks* hooks) { hooks_ = hooks; }

 private:
  torch::Tensor hidden(const torch::Tensor& idx);  // [B, T] -> [B, T, C] after ln_f
  void init_named(const std::string& name, at::Tensor values) const;

  GptConfig config_;
  int64_t head_chunk_rows_ = kHeadChunkAuto;
  c10::ScalarType head_matmul_dtype_ = c10::ScalarType::Float;
  torch::Tensor wte_, wpe_, ln_f_w_, ln_f_b_;
  std::vector<std::shared_ptr<GptBlock>> blocks_;  // registered as "h.0", "h.1", ...
  torch::Tensor causal_bias_;
  UnitHooks* hooks_ = nullptr;  // [block, block]: 0 on and below the diagonal, -inf above
};
TORCH_MODULE(Gpt);

// Mean cross-entropy of the logits x @ w^T against targets, computed `chunk_rows` rows at a time.
//   x [N, C], w [V, C], targets [N] int64 -> scalar
// With gradients enabled the forward pass also forms d loss/d x and d loss/d w chunk by chunk
// ((softmax - onehot)/N times w, and its transpose times x), so neither the [N, V] logits nor
// their gradient are ever held whole; backward only scales them by the incoming gradient.
// matmul_dtype: the products run in this dtype (float: exact fp32 path), softmax in fp32.
// kernel: `fastest` takes the fused CPU kernel (softmax_xent.h) for fp32 on the CPU and the
// generic ATen path otherwise (CUDA, bf16); `generic` always takes the generic path (tests run
// CUDA's path on the CPU with it).
enum class HeadKernel { fastest, generic };
torch::Tensor chunked_head_loss(const torch::Tensor& x, const torch::Tensor& w,
                                const torch::Tensor& targets, int64_t chunk_rows,
                                c10::ScalarType matmul_dtype = c10::ScalarType::Float,
                                HeadKernel kernel = HeadKernel::fastest);

}  // namespace hpc::train
