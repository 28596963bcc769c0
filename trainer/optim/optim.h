// The recipe's optimiser: AdamW with decoupled weight decay on tensors of 2+ dimensions only,
// and clipping of the global gradient norm. State is plain tensors so that checkpoints (and,
// later, sharded strategies) can hold and move it.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace hpc::train {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied to tensors of 2+ dimensions (matmul weights, embeddings)
};

class AdamW {
 public:
  AdamW(std::vector<at::Tensor> params, AdamWOptions options);

  // Grads become undefined: the next backward writes them without a zero-fill and an add.
  void zero_grad();
  // One update of every parameter that has a gradient, in PyTorch's single-tensor AdamW order:
  // p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
  void step(double lr);
  // The step through LibTorch's fused kernel (at::_fused_adamw_, one launch per weight-decay
  // group): on by default for CUDA parameters where LibTorch has it (2.4 on); the CPU keeps the
  // hand-written loop (optim_cpu.cc). A test turns it on for the CPU to compare the two.
  static bool fused_available();
  void use_fused(bool on) { fused_ = on && fused_available(); }
  bool fused() const { return fused_; }

  int64_t steps() const { return steps_; }
  const std::vector<at::Tensor>& params() const { return params_; }
  std::vector<at::Tensor>& exp_avg() { return m_; }
  std::vector<at::Tensor>& exp_avg_sq() { return v_; }
  const std::vector<at::Tensor>& exp_avg() const { return m_; }
  const std::vector<at::Tensor>& exp_avg_sq() const { return v_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  const std::vector<bool>& decayed() const { return decay_; }

 private:
  std::vector<at::Tensor> params_;
  std::vector<bool> decay_;
  std::vector<at::Tensor> m_, v_;
  AdamWOptions opt_;
  int64_t steps_ = 0;
  bool fused_ = false;
};

// Matching tensors for one AdamW update: p[k] (a parameter, or a 1-D piece of one), its gradient
// g[k] and moments m[k], v[k], all of p[k]'s shape; decayed[k]: whether p[k] gets weight decay.
// The sharded optimisers (dist/zero.cc, dist/fsdp.cc) list pieces of their shards here.
struct AdamWTensors {
  std::vector<at::Tensor> p, g, m, v;
  std::vector<bool> decayed;
  void add(at::Tensor param, at::Tensor grad, at::Tensor exp_avg, at::Tensor exp_avg_sq,
           bool decay);
};

// One AdamW update of `t` (AdamW::step's arithmetic); `steps` counts this update. With `fused`
// (only where AdamW::fused_available()) at::_fused_adamw_, one call per weight-decay group;
// else the loop: optim_cpu.cc's for plain CPU float tensors, LibTorch's operators for the rest.
void adamw_update_tensors(const AdamWTensors& t, const AdamWOptions& options, int64_t steps,
                          double lr, bool fused);

// Scales all gradients by min(1, max_norm / (norm + 1e-6)) where norm is the 2-norm of all of
// them together (torch.nn.utils.clip_grad_norm_); returns that norm, before clipping.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

// The sum of the squares of all elements of `tensors` (undefined ones skipped), in double. Plain
// CPU float tensors are summed here; the others (CUDA, bf16) on their device, with one
// synchronisation for all of them together, never one per tensor.
double sum_of_squares(const std::vector<at::Tensor>& tensors);

}  // namespace hpc::train
