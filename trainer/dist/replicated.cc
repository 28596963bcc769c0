// The optimiser of the replicated strategies (none, ddp): see optimizer.h. Views of the live
// tensors and calls into optim.h only: ATen's Tensor methods suffice (no <torch/torch.h>).
#include "dist/optimizer.h"
#include "dist/zero.h"

namespace hpc::train::dist {

ReplicatedAdamW::ReplicatedAdamW(std::vector<at::Tensor> params, AdamWOptions options, int rank,
                                 int world)
    : adamw_(std::move(params), options), rank_(rank), world_(world) {}

double ReplicatedAdamW::clip_and_step(double max_norm, double lr) {
  const double norm = clip_grad_norm(adamw_.params(), max_norm);
  adamw_.step(lr);
  return norm;
}

int64_t ReplicatedAdamW::state_bytes() const {
  auto bytes = [](const at::Tensor& t) {
    return t.defined() ? t.numel() * int64_t(t.element_size()) : 0;
  };
  int64_t sum = 0;
  for (size_t i = 0; i < adamw_.params().size(); ++i) {
    sum += bytes(adamw_.exp_avg()[i]) + bytes(adamw_.exp_avg_sq()[i]);
  }
  return sum;
}

std::vector<StatePiece> ReplicatedAdamW::pieces(bool for_save) {
  const auto& params = adamw_.params();
  auto flat = [](const at::Tensor& t, int64_t offset, int64_t length) {
    return t.detach().view({-1}).narrow(0, offset, length);
  };
  std::vector<StatePiece> out;
  auto add = [&](size_t i, int64_t offset, int64_t length) {
    out.push_back({i, offset, length, flat(params[i], offset, length),
                   flat(adamw_.exp_avg()[i], offset, length),
                   flat(adamw_.exp_avg_sq()[i], offset, length)});
  };
  if (!for_save) {
    for (size_t i = 0; i < params.size(); ++i) add(i, 0, params[i].numel());
    return out;
  }
  std::vector<int64_t> numels;
  for (const auto& p : params) numels.push_back(p.numel());
  const FlatShards shards(numels, world_);
  for (const auto& s : shards.of_rank.at(size_t(rank_))) add(s.param, s.param_offset, s.length);
  return out;
}

}  // namespace hpc::train::dist
