// The checkpoint pieces of the replicated strategies (none, ddp): see strategy.h. Views of the
// live tensors only: ATen's Tensor methods suffice (no <torch/torch.h>).
#include "dist/strategy.h"
#include "dist/zero.h"

namespace hpc::train::dist {

std::vector<StatePiece> replicated_pieces(const std::vector<at::Tensor>& params, AdamW& optimizer,
                                          int rank, int world, bool for_save) {
  auto flat = [](const at::Tensor& t, int64_t offset, int64_t length) {
    return t.detach().view({-1}).narrow(0, offset, length);
  };
  std::vector<StatePiece> out;
  auto add = [&](size_t i, int64_t offset, int64_t length) {
    out.push_back({i, offset, length, flat(params[i], offset, length),
                   flat(optimizer.exp_avg()[i], offset, length),
                   flat(optimizer.exp_avg_sq()[i], offset, length)});
  };
  if (!for_save) {
    for (size_t i = 0; i < params.size(); ++i) add(i, 0, params[i].numel());
    return out;
  }
  std::vector<int64_t> numels;
  for (const auto& p : params) numels.push_back(p.numel());
  const FlatShards shards(numels, world);
  for (const auto& s : shards.of_rank.at(size_t(rank))) add(s.param, s.param_offset, s.length);
  return out;
}

}  // namespace hpc::train::dist
