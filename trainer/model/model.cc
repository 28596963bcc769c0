#include "model/model.h"

#include "model/softmax_xent.h"

#include <algorithm>
#include <cmath>

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "torch_compat.h"

namespace hpc::train {

namespace {

// A CPU float tensor of `shape` without storage (0 bytes): a parameter whose values a sharded
// strategy materialises later (set_data onto its own buffer). Reading it is an error.
torch::Tensor without_storage(at::IntArrayRef shape) {
  auto t = torch::empty({0});
  t.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
  return t;
}

torch::Tensor parameter_tensor(at::IntArrayRef shape, ParameterStorage storage) {
  return storage == ParameterStorage::deferred ? without_storage(shape) : torch::empty(shape);
}

// A weight and an optional bias: the parameters of a Linear ([out, in], [out]), a LayerNorm
// ([C], [C]) or an embedding table ([rows, C]). Values come from init_parameter.
struct Affine : torch::nn::Module {
  Affine(std::vector<int64_t> weight_shape, int64_t bias_size, ParameterStorage storage) {
    weight = register_parameter("weight", parameter_tensor(weight_shape, storage));
    if (bias_size > 0) bias = register_parameter("bias", parameter_tensor({bias_size}, storage));
  }
  torch::Tensor weight, bias;
};

std::shared_ptr<Affine> affine(std::vector<int64_t> weight_shape, int64_t bias_size,
                               ParameterStorage storage) {
  return std::make_shared<Affine>(std::move(weight_shape), bias_size, storage);
}

struct Attention : torch::nn::Module {
  Attention(int64_t C, ParameterStorage s) {
    c_attn = register_module("c_attn", affine({3 * C, C}, 3 * C, s));
    c_proj = register_module("c_proj", affine({C, C}, C, s));
  }
  std::shared_ptr<Affine> c_attn, c_proj;
};

struct Mlp : torch::nn::Module {
  Mlp(int64_t C, ParameterStorage s) {
    c_fc = register_module("c_fc", affine({4 * C, C}, 4 * C, s));
    c_proj = register_module("c_proj", affine({C, 4 * C}, C, s));
  }
  std::shared_ptr<Affine> c_fc, c_proj;
};

std::shared_ptr<Affine> layer_norm_params(int64_t C, ParameterStorage s) {
  return affine({C}, C, s);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

torch::Tensor layer_norm(const torch::Tensor& x, const Affine& p) {
  return at::layer_norm(x, {p.weight.size(0)}, p.weight, p.bias, 1e-5);
}

}  // namespace

struct GptBlock : torch::nn::Module {
  GptBlock(int64_t C, ParameterStorage s) {
    ln_1 = register_module("ln_1", layer_norm_params(C, s));
    attn = register_module("attn", std::make_shared<Attention>(C, s));
    ln_2 = register_module("ln_2", layer_norm_params(C, s));
    mlp = register_module("mlp", std::make_shared<Mlp>(C, s));
  }
  std::shared_ptr<Affine> ln_1, ln_2;
  std::shared_ptr<Attention> attn;
  std::shared_ptr<Mlp> mlp;
};

GptImpl::GptImpl(const GptConfig& config, ParameterStorage storage) : config_(config) {
  validate(config_);
  const int64_t C = config_.n_embd;
  auto wte = register_module("wte", affine({config_.vocab_size, C}, 0, storage));
  auto wpe = register_module("wpe", affine({config_.block_size, C}, 0, storage));
  wte_ = wte->weight;
  wpe_ = wpe->weight;
  auto h = register_module("h", torch::nn::ModuleList());
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    blocks_.push_back(std::make_shared<GptBlock>(C, storage));
    h->push_back(blocks_.back());
  }
  auto ln_f = register_module("ln_f", layer_norm_params(C, storage));
  ln_f_w_ = ln_f->weight;
  ln_f_b_ = ln_f->bias;
  // Additive causal mask: position t attends to positions <= t.
  const int64_t T = config_.block_size;
  causal_bias_ = register_buffer(
      "causal_bias", torch::full({T, T}, -std::numeric_limits<float>::infinity()).triu(1));
  if (storage == ParameterStorage::allocated) init_weights();
}

void GptImpl::init_weights() {
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) init_named(item.key(), item.value());
}

void GptImpl::init_parameter(size_t index, at::Tensor values) const {
  init_named(named_parameters()[index].key(), std::move(values));
}

// The generator is drawn from by the normal weights only, in named_parameters() order: wte, wpe,
// then per block attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj.
void GptImpl::init_named(const std::string& name, at::Tensor values) const {
  torch::NoGradGuard no_grad;
  const double std = 0.02;
  const double residual_std = 0.02 / std::sqrt(2.0 * double(config_.n_layer));
  if (ends_with(name, ".bias")) {
    values.zero_();
  } else if (name.find("ln_") != std::string::npos) {  // ln_1, ln_2, ln_f weights
    values.fill_(1.0);
  } else if (ends_with(name, "c_proj.weight")) {  // attn.c_proj, mlp.c_proj: the residual
    values.normal_(0.0, residual_std);
  } else {  // wte, wpe, c_attn, c_fc
    values.normal_(0.0, std);
  }
}

torch::Tensor GptImpl::hidden(const torch::Tensor& idx) {
  const int64_t B = idx.size(0), T = idx.size(1);
  const int64_t C = config_.n_embd, H = config_.n_head, hs = C / H;
  TORCH_CHECK(T <= config_.block_size, "sequence length ", T, " exceeds block size ",
              config_.block_size);
  // x [B, T, C] = token embedding + position embedding
  if (hooks_) hooks_->before(0);
  // The lookup's gradient is sparse (the B*T rows it read): backward adds it into the head's
  // dense [V, C] gradient in place instead of forming a second [V, C] tensor beside it.
  torch::Tensor x = at::embedding(wte_, idx, /*padding_idx=*/-1, /*scale_grad_by_freq=*/false,
                                  /*sparse=*/true) +
                    wpe_.narrow(0, 0, T);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    auto& blk = blocks_[l];
    if (hooks_) hooks_->before(int(l) + 1);
    // --- attention: x += c_proj(softmax(q k^T / sqrt(hs) + mask) v) ---
    auto a = layer_norm(x, *blk->ln_1);                                            // [B, T, C]
    auto qkv = at::linear(a, blk->attn->c_attn->weight, blk->attn->c_attn->bias);  // [B, T, 3C]
    auto parts = qkv.split(C, 2);
    // q, k, v [B, H, T, hs]
    auto q = parts[0].view({B, T, H, hs}).transpose(1, 2);
    auto k = parts[1].view({B, T, H, hs}).transpose(1, 2);
    auto v = parts[2].view({B, T, H, hs}).transpose(1, 2);
    torch::Tensor y;
#if HPC_TORCH_AT_LEAST(2, 0)
    // Fused (flash / memory-efficient) attention where LibTorch has it.
    y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);  // [B, H, T, hs]
#else
    const double scale = 1.0 / std::sqrt(double(hs));
    auto q3 = q.reshape({B * H, T, hs});
    auto k3 = k.reshape({B * H, T, hs});
    auto v3 = v.reshape({B * H, T, hs});
    // att [B*H, T, T] = mask + scale * q k^T, then softmax over the last dimension
    auto att = at::baddbmm(causal_bias_.narrow(0, 0, T).narrow(1, 0, T), q3, k3.transpose(1, 2),
                           1.0, scale);
    att = at::softmax(att, -1);
    y = at::bmm(att, v3).view({B, H, T, hs});  // [B, H, T, hs]
#endif
    y = y.transpose(1, 2).reshape({B, T, C});  // [B, T, C]
    x = x + at::linear(y, blk->attn->c_proj->weight, blk->attn->c_proj->bias);
    // --- MLP: x += c_proj(gelu_tanh(c_fc(ln_2(x)))) ---
    auto m = layer_norm(x, *blk->ln_2);  // [B, T, C]
    auto f = at::gelu(at::linear(m, blk->mlp->c_fc->weight, blk->mlp->c_fc->bias),
                      "tanh");  // [B, T, 4C]
    x = x + at::linear(f, blk->mlp->c_proj->weight, blk->mlp->c_proj->bias);
    if (hooks_) x = hooks_->after(int(l) + 1, x, BackwardReads::values);
  }
  const int ln_f_unit = int(blocks_.size()) + 1;
  if (hooks_) hooks_->before(ln_f_unit);
  x = at::layer_norm(x, {C}, ln_f_w_, ln_f_b_, 1e-5);  // [B, T, C]
  return hooks_ ? hooks_->after(ln_f_unit, x, BackwardReads::values) : x;
}

torch::Tensor GptImpl::logits(const torch::Tensor& idx) {
  auto out = at::linear(hidden(idx), wte_);  // [B, T, V]
  return hooks_ ? hooks_->after(0, out, BackwardReads::values) : out;
}

int64_t head_chunk_rows_for(int64_t N, int64_t V) {
  const int64_t fit = std::max<int64_t>(1, kHeadChunkBudgetBytes / (V * int64_t(sizeof(float))));
  const int64_t chunks = (N + fit - 1) / fit;
  return std::max<int64_t>(1, (N + chunks - 1) / chunks);
}

torch::Tensor GptImpl::loss(const torch::Tensor& idx, const torch::Tensor& targets) {
  const int64_t B = idx.size(0), T = idx.size(1);
  auto x = hidden(idx).view({B * T, config_.n_embd});  // [B*T, C]
  auto y = targets.reshape({B * T});                   // [B*T]
  if (head_chunk_rows_ == 0) {
    auto logits = at::linear(x, wte_);  // [B*T, V]
    auto out = at::nll_loss(at::log_softmax(logits, -1, at::kFloat), y);
    return hooks_ ? hooks_->after(0, out, BackwardReads::values) : out;
  }
  // The chunked head keeps its gradients, not wte: backward reads nothing of unit 0 (the
  // embedding lookup's backward needs only the indices).
  const int64_t rows = head_chunk_rows_ > 0 ? head_chunk_rows_
                                            : head_chunk_rows_for(B * T, config_.vocab_size);
  auto out = chunked_head_loss(x, wte_, y, rows, head_matmul_dtype_);
  return hooks_ ? hooks_->after(0, out, BackwardReads::nothing) : out;
}

std::vector<std::vector<size_t>> GptImpl::parameter_units() {
  std::vector<std::vector<size_t>> units(blocks_.size() + 2);
  size_t i = 0;
  for (const auto& item : named_parameters()) {
    const std::string& name = item.key();
    size_t unit = 0;
    if (name.rfind("h.", 0) == 0) unit = 1 + std::stoul(name.substr(2, name.find('.', 2) - 2));
    if (name.rfind("ln_f.", 0) == 0) unit = blocks_.size() + 1;
    units.at(unit).push_back(i++);
  }
  return units;
}

// ---------------------------------------------------------------------------------------------
// The head and the cross-entropy, chunk by chunk.
//
// For rows i of a chunk: logits l_i = x_i w^T [V], loss_i = logsumexp(l_i) - l_i[t_i], and
//   d loss / d l_i = (softmax(l_i) - onehot(t_i)) / N        (mean over N rows)
//   d loss / d x_i = (d loss / d l_i) w                       [C]
//   d loss / d w  += (d loss / d l_i)^T x_i                   [V, C]
// so the chunk's log-softmax buffer turns into its gradient in place and is multiplied out
// before the next chunk reuses it.

namespace {

// CPU, fp32: one [rows, V] buffer per call; the softmax cross-entropy kernel turns each row of
// logits into its gradient while the row is in cache (softmax_xent.h), and the 1/N of the mean is
// folded in there, so the two products that follow need no extra pass.
torch::Tensor head_loss_cpu(const torch::Tensor& x, const torch::Tensor& w,
                            const torch::Tensor& targets, int64_t chunk_rows, torch::Tensor* dx,
                            torch::Tensor* dw) {
  const int64_t N = x.size(0), V = w.size(0);
  const auto xc_all = x.contiguous();            // [N, C]
  const auto wt = w.t();                         // [C, V]
  const auto tgt = targets.contiguous();         // [N]
  auto losses = torch::empty({N}, x.options());  // per-row loss
  auto buf = torch::empty({std::min(chunk_rows, N), V}, x.options());
  const float scale = dx ? float(1.0 / double(N)) : 0.0f;
  for (int64_t r0 = 0; r0 < N; r0 += chunk_rows) {
    const int64_t n = std::min(chunk_rows, N - r0);
    auto xc = xc_all.narrow(0, r0, n);  // [n, C]
    auto g = buf.narrow(0, 0, n);       // [n, V]
    at::mm_out(g, xc, wt);              // logits
    softmax_xent_rows(g.data_ptr<float>(), n, V, V, tgt.data_ptr<int64_t>() + r0,
                      losses.data_ptr<float>() + r0, scale);  // -> (softmax - onehot) / N
    if (!dx) continue;
    auto dxc = dx->narrow(0, r0, n);
    at::mm_out(dxc, g, w);  // [n, C] = [n, V] x [V, C]
    if (r0 == 0)
      at::mm_out(*dw, g.t(), xc);  // [V, C] = [V, n] x [n, C]
    else
      dw->addmm_(g.t(), xc);
  }
  return losses.mean();
}

// Any device or dtype: the same chunking with ATen's operators.
torch::Tensor head_loss_generic(const torch::Tensor& x, const torch::Tensor& w,
                                const torch::Tensor& targets, int64_t chunk_rows,
                                c10::ScalarType mdt, torch::Tensor* dx, torch::Tensor* dw) {
  const int64_t N = x.size(0);
  const torch::Tensor xm = x.to(mdt);  // [N, C]
  const torch::Tensor wm = w.to(mdt);  // [V, C]
  const double inv_n = 1.0 / double(N);
  auto losses = torch::empty({N}, x.options().dtype(at::kFloat));
  for (int64_t r0 = 0; r0 < N; r0 += chunk_rows) {
    const int64_t n = std::min(chunk_rows, N - r0);
    auto xc = xm.narrow(0, r0, n);                                              // [n, C]
    auto tc = targets.narrow(0, r0, n).unsqueeze(1);                            // [n, 1]
    auto logp = at::_log_softmax(at::mm(xc, wm.t()).to(at::kFloat), 1, false);  // [n, V]
    losses.narrow(0, r0, n).copy_(logp.gather(1, tc).squeeze(1).neg());
    if (!dx) continue;
    auto g = logp.exp_();                                            // softmax
    g.scatter_add_(1, tc, torch::full({n, 1}, -1.0f, g.options()));  // - onehot
    auto gm = g.to(mdt);
    dx->narrow(0, r0, n).copy_(at::mm(gm, wm).mul_(inv_n));
    dw->add_(at::mm(gm.t(), xc), inv_n);
  }
  return losses.mean();
}

// Mean loss; when dx/dw are given, also fills dx [N, C] and dw [V, C] (not yet scaled by the
// incoming gradient).
torch::Tensor head_loss_pass(const torch::Tensor& x, const torch::Tensor& w,
                             const torch::Tensor& targets, int64_t chunk_rows, c10::ScalarType mdt,
                             HeadKernel kernel, torch::Tensor* dx, torch::Tensor* dw) {
  // Autocast would re-cast each product; the dtypes here are chosen explicitly instead.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  if (kernel == HeadKernel::fastest && x.is_cpu() && x.scalar_type() == at::kFloat &&
      w.scalar_type() == at::kFloat && mdt == at::kFloat) {
    return head_loss_cpu(x, w, targets, chunk_rows, dx, dw);
  }
  if (dw) dw->zero_();
  return head_loss_generic(x, w, targets, chunk_rows, mdt, dx, dw);
}

class ChunkedHeadLossFn : public torch::autograd::Function<ChunkedHeadLossFn> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& targets,
                               int64_t chunk_rows, int64_t mdt, int64_t kernel) {
    auto dx = torch::empty(x.sizes(), x.options().dtype(at::kFloat));
    auto dw = torch::empty(w.sizes(), w.options().dtype(at::kFloat));
    auto loss = head_loss_pass(x, w, targets, chunk_rows, static_cast<c10::ScalarType>(mdt),
                               static_cast<HeadKernel>(kernel), &dx, &dw);
    ctx->saved_data["dx"] = dx.to(x.scalar_type());
    ctx->saved_data["dw"] = dw.to(w.scalar_type());
    return loss;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto& g = grad_out[0];  // scalar
    // Scaled in place and released: a second backward through this node fails loudly instead of
    // scaling twice.
    auto dx = ctx->saved_data["dx"].toTensor();
    auto dw = ctx->saved_data["dw"].toTensor();
    ctx->saved_data.erase("dx");
    ctx->saved_data.erase("dw");
    // A loss used as is (no accumulation) sends exactly 1: skip two passes over [V, C] and [N, C].
    const bool unit = g.is_cpu() && g.numel() == 1 && g.item<double>() == 1.0;
    if (!unit) {
      dx.mul_(g);
      dw.mul_(g);
    }
    return {dx, dw, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor chunked_head_loss(const torch::Tensor& x, const torch::Tensor& w,
                                const torch::Tensor& targets, int64_t chunk_rows,
                                c10::ScalarType matmul_dtype, HeadKernel kernel) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && targets.dim() == 1, "chunked_head_loss: shapes");
  if (chunk_rows <= 0) chunk_rows = x.size(0);
  const bool need_grad = torch::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad());
  if (!need_grad) {
    return head_loss_pass(x, w, targets, chunk_rows, matmul_dtype, kernel, nullptr, nullptr);
  }
  return ChunkedHeadLossFn::apply(x, w, targets, chunk_rows, static_cast<int64_t>(matmul_dtype),
                                  static_cast<int64_t>(kernel));
}

}  // namespace hpc::train
