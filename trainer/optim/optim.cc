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
  if (fused_) return step_fused(lr);
  torch::NoGradGuard no_grad;
  ++steps_;
  const double bc1 = 1.0 - std::pow(opt_.beta1, double(steps_));
  const double bc2 = 1.0 - std::pow(opt_.beta2, double(steps_));
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    const auto& g = p.grad();
    if (!g.defined()) continue;
    const double decay = decay_[i] ? 1.0 - lr * opt_.weight_decay : 1.0;
    if (plain_cpu_float(p) && plain_cpu_float(g) && plain_cpu_float(m_[i]) &&
        plain_cpu_float(v_[i])) {
      AdamWStep s{float(decay),    float(opt_.beta1), float(opt_.beta2),
                  float(bc2_sqrt), float(opt_.eps),   float(step_size)};
      adamw_update(p.data_ptr<float>(), g.data_ptr<float>(), m_[i].data_ptr<float>(),
                   v_[i].data_ptr<float>(), p.numel(), s);
      continue;
    }
    if (decay != 1.0) p.mul_(decay);
    m_[i].mul_(opt_.beta1).add_(g, 1.0 - opt_.beta1);
    v_[i].mul_(opt_.beta2).addcmul_(g, g, 1.0 - opt_.beta2);
    auto denom = (v_[i].sqrt() / bc2_sqrt).add_(opt_.eps);
    p.addcdiv_(m_[i], denom, -step_size);
  }
}

// The same update as step(), by at::_fused_adamw_ over each weight-decay group: the decayed
// tensors (2+ dimensions) with lr wd, the others with 0. Its step count is a tensor on the
// parameters' device (the kernel reads it there); bias corrections as in step().
void AdamW::step_fused(double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
#if HPC_TORCH_AT_LEAST(2, 4)
  for (bool decayed : {true, false}) {
    std::vector<at::Tensor> p, g, m, v, t;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (decay_[i] != decayed || !params_[i].grad().defined()) continue;
      p.push_back(params_[i]);
      g.push_back(params_[i].grad());
      m.push_back(m_[i]);
      v.push_back(v_[i]);
    }
    if (p.empty()) continue;
    const auto step = at::full({}, double(steps_), p[0].options().dtype(at::kFloat));
    t.assign(p.size(), step);
    at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, t, lr, opt_.beta1, opt_.beta2,
                      decayed ? opt_.weight_decay : 0.0, opt_.eps, /*amsgrad=*/false,
                      /*maximize=*/false);
  }
#else
  (void)lr;
  throw std::logic_error("AdamW::step_fused: this LibTorch has no _fused_adamw_");
#endif
}

double sum_of_squares(const std::vector<at::Tensor>& tensors) {
  double sumsq = 0;
  std::vector<at::Tensor> on_device;  // [] double each, summed where they are
  for (const auto& g : tensors) {
    if (!g.defined()) continue;
    if (plain_cpu_float(g))
      sumsq += sum_of_squares(g.data_ptr<float>(), g.numel());
    else
      on_device.push_back(g.to(at::kDouble).pow(2).sum());
  }
  if (!on_device.empty()) sumsq += at::stack(on_device).sum().item<double>();  // one sync
  return sumsq;
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  const double total = std::sqrt(sum_of_squares(grads));
  // torch.nn.utils.clip_grad_norm_'s coefficient; at 1 the multiplication is the identity.
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  if (coef < 1.0) {
    for (const auto& p : params) {
      if (p.grad().defined()) p.grad().mul_(coef);
    }
  }
  return total;
}

}  // namespace hpc::train
