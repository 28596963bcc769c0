// The optimiser a strategy owns: AdamW, whole on every rank (ReplicatedAdamW: none, ddp) or 1/W of
// it per rank (ShardedAdamW, dist/zero.h: zero1, zero2). fsdp keeps its own, unit by unit.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "dist/state_piece.h"
#include "optim/optim.h"

namespace hpc::train::dist {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Once the gradients are the mean over ranks: clips their global norm (over all ranks' shards)
  // to max_norm, updates the parameters (sharded: this rank's shard, then gathers them). Returns
  // the norm before clipping.
  virtual double clip_and_step(double max_norm, double lr) = 0;
  // Checkpoints (Strategy::pieces_to_save, pieces_to_load, after_load).
  virtual std::vector<StatePiece> pieces_to_save() = 0;
  virtual std::vector<StatePiece> pieces_to_load() = 0;
  virtual void after_load() = 0;
  // AdamW's step count (bias correction).
  virtual int64_t steps() const = 0;
  virtual void set_steps(int64_t steps) = 0;
  virtual int64_t state_bytes() const = 0;     // the moments this rank holds
  virtual int64_t gradient_bytes() const = 0;  // gradient buffers of its own (zero2's shard)
};

// none/ddp: parameters and AdamW are whole on every rank. To save, rank r writes the r-th of W
// equal slices of the flat parameter vector (FlatShards: the ranks write in parallel and nothing
// twice); to load, every rank fills every element.
class ReplicatedAdamW final : public Optimizer {
 public:
  ReplicatedAdamW(std::vector<at::Tensor> params, AdamWOptions options, int rank, int world);

  double clip_and_step(double max_norm, double lr) override;  // clip_grad_norm, AdamW::step
  std::vector<StatePiece> pieces_to_save() override { return pieces(true); }
  std::vector<StatePiece> pieces_to_load() override { return pieces(false); }
  void after_load() override {}
  int64_t steps() const override { return adamw_.steps(); }
  void set_steps(int64_t steps) override { adamw_.set_steps(steps); }
  int64_t state_bytes() const override;
  int64_t gradient_bytes() const override { return 0; }

 private:
  std::vector<StatePiece> pieces(bool for_save);

  AdamW adamw_;
  int rank_, world_;
};

}  // namespace hpc::train::dist
