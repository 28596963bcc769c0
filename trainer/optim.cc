#include "optim.h"

#include <cmath>

#include <torch/torch.h>

namespace hpc::train {

AdamW::AdamW(std::vector<at::Tensor> params, AdamWOptions options)
    : params_(std::move(params)), opt_(options) {
  for (const auto& p : params_) {
    decay_.push_back(p.dim() >= 2);
    m_.push_back(torch::zeros_like(p, at::MemoryFormat::Preserve));
    v_.push_back(torch::zeros_like(p, at::MemoryFormat::Preserve));
  }
}

void AdamW::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
}

void AdamW::step(double lr) {
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
    if (decay_[i] && opt_.weight_decay != 0) p.mul_(1.0 - lr * opt_.weight_decay);
    m_[i].mul_(opt_.beta1).add_(g, 1.0 - opt_.beta1);
    v_[i].mul_(opt_.beta2).addcmul_(g, g, 1.0 - opt_.beta2);
    auto denom = (v_[i].sqrt() / bc2_sqrt).add_(opt_.eps);
    p.addcdiv_(m_[i], denom, -step_size);
  }
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  for (const auto& p : params) {
    if (p.grad().defined()) norms.push_back(at::linalg_vector_norm(p.grad(), 2));
  }
  if (norms.empty()) return 0.0;
  auto total = at::linalg_vector_norm(at::stack(norms), 2);
  auto coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (const auto& p : params) {
    if (p.grad().defined()) p.grad().mul_(coef);
  }
  return total.item<double>();
}

}  // namespace hpc::train
