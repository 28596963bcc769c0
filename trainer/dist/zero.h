// ZeRO's sharded optimiser: AdamW whose state covers only this rank's 1/W of the parameters.
//
// The parameters, in registration order, are read as one flat vector of N elements, padded to
// W * S with S = ceil(N / W); rank r owns elements [r S, r S + S). Nothing is copied into such a
// vector: a shard is a list of segments, each a piece of one parameter. A step clips the global
// gradient norm (sum of squares per shard, all-reduced), updates the shard's parameter segments
// with the shard's moments, then all-gathers the shards in chunks of 1M elements per rank (list
// all-gather: Gloo in LibTorch 1.13 has no _allgather_base) and copies each rank's chunk into
// its segments of the parameters.
// Used by the zero1 and zero2 strategies (ddp.cc) and, for FlatShards, by ReplicatedAdamW and
// fsdp; only dist/ includes it.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "dist/communicator.h"
#include "dist/optimizer.h"
#include "optim/optim.h"

namespace hpc::train::dist {

// A piece of parameter `param`: its elements [param_offset, param_offset + length) are the
// shard's elements [shard_offset, shard_offset + length).
struct ShardSegment {
  size_t param;
  int64_t param_offset;
  int64_t shard_offset;
  int64_t length;
};

// Which parameter elements each rank owns (plain arithmetic, no LibTorch work).
struct FlatShards {
  FlatShards() = default;
  FlatShards(const std::vector<int64_t>& numels, int world);
  int64_t total = 0;        // N
  int64_t shard_numel = 0;  // S = ceil(N / W); the last shards hold W S - N padding elements
  std::vector<int64_t> flat_offset;                // of each parameter in the flat vector
  std::vector<std::vector<ShardSegment>> of_rank;  // [W] segments, in flat order
};

class ShardedAdamW final : public Optimizer {
 public:
  ShardedAdamW(std::vector<at::Tensor> params, AdamWOptions options, Communicator& comm);

  const FlatShards& shards() const { return shards_; }
  // zero2: the reduced gradient of this rank's shard, [S] (padding stays zero). zero1 leaves it
  // undefined and the step reads the shard's pieces of the parameters' .grad instead.
  at::Tensor& gradient_shard() { return grad_shard_; }
  void use_gradient_shard();

  // Clip to max_norm (the norm over all ranks' shards), update the shard, gather the parameters.
  // Returns the norm before clipping.
  double clip_and_step(double max_norm, double lr) override;
  int64_t state_bytes() const override;     // the moments: 2 S elements
  int64_t gradient_bytes() const override;  // the gradient shard, when used

  // Checkpoints: this rank's segments as pieces (views of the parameters and of the shard's
  // moments) to save; to load, also the other ranks' segments of the parameters without moments,
  // so that every rank reads the whole parameters from the files and no all-gather follows.
  std::vector<StatePiece> pieces_to_save() override { return pieces(); }
  std::vector<StatePiece> pieces_to_load() override;
  void after_load() override {}
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

 private:
  std::vector<StatePiece> pieces();
  void all_gather_parameters();
  at::Tensor gradient_piece(const ShardSegment& s);

  std::vector<at::Tensor> params_;
  AdamWOptions opt_;
  Communicator& comm_;
  FlatShards shards_;
  at::Tensor m_, v_;       // [S] moments of this rank's shard
  at::Tensor grad_shard_;  // [S] zero2 only
  int64_t steps_ = 0;
};

}  // namespace hpc::train::dist
