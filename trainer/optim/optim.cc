#include "optim/optim.h"

#include "optim/optim_cpu.h"

#include <cmath>

#include <torch/torch.h>

#include "torch_compat.h"

namespace hpc::train {

AdamW::AdamW(std::vector<at::Tensor> params, AdamWOptions options)
    : params_(std::move(params)), opt_(options) {
  for (const auto& p : params_) {
    decay_.push_back(p.dim() >= 2);
    m_.push_back(torch::zeros_like(p, at::MemoryFormat::Preserve));
    v_.push_back(torch::zeros_like(p, at::MemoryFormat::Preserve));
  }
  use_fused(!params_.empty() && params_[0].is_cuda());
}

bool AdamW::fused_available() { return HPC_TORCH_AT_LEAST(2, 4); }

void AdamW::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
}

namespace {

bool plain_cpu_float(const at::Tensor& t) {
  return t.is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous();
}

}  // namespace

void AdamW::step(double lr) {
  AdamWTensors t;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].grad().defined()) t.add(params_[i], params_[i].grad(), m_[i], v_[i], decay_[i]);
  }
  adamw_update_tensors(t, opt_, ++steps_, lr, fused_);
}

void AdamWTensors::add(at::Tensor param, at::Tensor grad, at::Tensor exp_avg, at::Tensor exp_avg_sq,
                       bool decay) {
  p.push_back(std::move(param));
  g.push_back(std::move(grad));
  m.push_back(std::move(exp_avg));
  v.push_back(std::move(exp_avg_sq));
  decayed.push_back(decay);
}

namespace {

// The update by at::_fused_adamw_ over each weight-decay group: the decayed tensors with lr wd,
// the others with 0. Its step count is a tensor on the parameters' device (the kernel reads it
// there); its bias corrections are the loop's.
void adamw_update_fused(const AdamWTensors& t, const AdamWOptions& o, int64_t steps, double lr) {
#if HPC_TORCH_AT_LEAST(2, 4)
  for (bool decayed : {true, false}) {
    std::vector<at::Tensor> p, g, m, v, s;
    for (size_t k = 0; k < t.p.size(); ++k) {
      if (t.decayed[k] != decayed) continue;
      p.push_back(t.p[k]);
      g.push_back(t.g[k]);
      m.push_back(t.m[k]);
      v.push_back(t.v[k]);
    }
    if (p.empty()) continue;
    const auto step = at::full({}, double(steps), p[0].options().dtype(at::kFloat));
    s.assign(p.size(), step);
    at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, s, lr, o.beta1, o.beta2,
                      decayed ? o.weight_decay : 0.0, o.eps, /*amsgrad=*/false,
                      /*maximize=*/false);
  }
#else
  (void)t, (void)o, (void)steps, (void)lr;
  throw std::logic_error("adamw_update_tensors: this LibTorch has no _fused_adamw_");
#endif
}

}  // namespace

void adamw_update_tensors(const AdamWTensors& t, const AdamWOptions& o, int64_t steps, double lr,
                          bool fused) {
  torch::NoGradGuard no_grad;
  if (fused) return adamw_update_fused(t, o, steps, lr);
  const double bc1 = 1.0 - std::pow(o.beta1, double(steps));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(o.beta2, double(steps)));
  const double step_size = lr / bc1;
  for (size_t k = 0; k < t.p.size(); ++k) {
    const auto &p = t.p[k], &g = t.g[k], &m = t.m[k], &v = t.v[k];
    const double decay = t.decayed[k] ? 1.0 - lr * o.weight_decay : 1.0;
    if (plain_cpu_float(p) && plain_cpu_float(g) && plain_cpu_float(m) && plain_cpu_float(v)) {
      AdamWStep s{float(decay),    float(o.beta1), float(o.beta2),
                  float(bc2_sqrt), float(o.eps),   float(step_size)};
      adamw_update(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(),
                   v.data_ptr<float>(), p.numel(), s);
      continue;
    }
    if (decay != 1.0) p.mul_(decay);
    m.mul_(o.beta1).add_(g, 1.0 - o.beta1);
    v.mul_(o.beta2).addcmul_(g, g, 1.0 - o.beta2);
    auto denom = (v.sqrt() / bc2_sqrt).add_(o.eps);
    p.addcdiv_(m, denom, -step_size);
  }
}

double sum_of_squares(const std::vector<at::Tensor>& tensors) {
  double sumsq = 0;
  std::vector<at::Tensor> on_device;
  for (const auto& g : tensors) {
    if (!g.defined()) continue;
    if (plain_cpu_float(g))
      sumsq += sum_of_squares(g.data_ptr<float>(), g.numel());
    else  // bf16 (fsdp's gathered gradients) is widened: its own norm would be rounded to bf16
      on_device.push_back(g.scalar_type() == at::kBFloat16 || g.scalar_type() == at::kHalf
                              ? g.to(at::kFloat)
                              : g);
  }
  if (on_device.empty()) return sumsq;
  // One multi-tensor kernel for all of them (torch.nn.utils.clip_grad_norm_'s way), each norm
  // accumulated in fp32 as there, their squares summed in double: a few kernels per step
  // instead of three per tensor (GPT-2 124M: 148 tensors).
  const auto norms = at::stack(at::_foreach_norm(on_device, 2)).to(at::kDouble);
  return sumsq + norms.pow(2).sum().item<double>();  // one device synchronisation
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  const double total = std::sqrt(sum_of_squares(grads));
  // torch.nn.utils.clip_grad_norm_'s coefficient; at 1 the multiplication is the identity.
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  if (coef < 1.0) {
    std::vector<at::Tensor> defined;
    for (const auto& g : grads) {
      if (g.defined()) defined.push_back(g);
    }
    at::_foreach_mul_(defined, coef);  // one multi-tensor kernel on CUDA
  }
  return total;
}

}  // namespace hpc::train
