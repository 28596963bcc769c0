// ZeRO's sharded optimiser: AdamW whose state covers only this rank's 1/W of the parameters.
//
// The parameters are cut into the strategy's gradient buckets (ddp.cc); each bucket, its
// parameters read one after another as a flat vector of n elements, is padded to W S_b elements
// with S_b = ceil(n / W), and rank r owns its elements [r S_b, r S_b + S_b). A rank's shard is its
// slice of every bucket, one after another: so a bucket's gradient is reduce-scattered straight
// into the shard as soon as backward has filled it (zero2), and after the step each bucket's
// parameters are all-gathered into one tensor. Nothing is copied into such a flat vector
// outside the collectives: a shard is a list of segments, each a piece of one parameter. A step
// clips the global gradient norm (sum of squares per shard, all-reduced), updates the shard's
// parameter segments with the shard's moments, then all-gathers each bucket in chunks of at most
// 1M elements per rank and copies each rank's chunk into its segments of the parameters.
// Used by the zero1 and zero2 strategies (ddp.cc); FlatShards alone by ReplicatedAdamW (the
// slices it saves) and fsdp (its units); only dist/ includes it.
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

// The buckets' layout: each bucket a FlatShards of its parameters, the ranks' slices of all
// buckets one after another in each rank's shard (plain arithmetic, no LibTorch work).
struct BucketShards {
  BucketShards() = default;
  // buckets: the parameter indices of each bucket, in the order they fill it; numels: of every
  // parameter (each in exactly one bucket).
  BucketShards(const std::vector<std::vector<size_t>>& buckets, const std::vector<int64_t>& numels,
               int world);
  struct Bucket {
    std::vector<size_t> params;  // its parameters, in fill order
    FlatShards layout;           // over `params`: its segments' `param` is an index into `params`
    int64_t shard_offset = 0;    // where its slice [S_b] starts in every rank's shard
  };
  std::vector<Bucket> buckets;
  int64_t shard_numel = 0;  // the sum of the buckets' S_b
  // [W] every segment of rank r's shard: `param` indexes all parameters, `shard_offset` the shard
  std::vector<std::vector<ShardSegment>> of_rank;
};

class ShardedAdamW final : public Optimizer {
 public:
  // buckets: as BucketShards'.
  ShardedAdamW(std::vector<at::Tensor> params, const std::vector<std::vector<size_t>>& buckets,
               AdamWOptions options, Communicator& comm);

  const BucketShards& shards() const { return shards_; }
  // zero2: the reduced gradient of this rank's shard, [S] (padding stays zero). zero1 leaves it
  // undefined and the step reads the shard's pieces of the parameters' .grad instead.
  at::Tensor& gradient_shard() { return grad_shard_; }
  void use_gradient_shard();
  // This rank's slice [S_b] of bucket b's gradient, a view of the gradient shard (zero2).
  at::Tensor gradient_slice(size_t bucket);
  // AdamW by at::_fused_adamw_ (AdamW::fused_available()); on by default for CUDA parameters,
  // as ReplicatedAdamW's. A test turns it on for the CPU.
  void use_fused(bool on) { fused_ = on && AdamW::fused_available(); }

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
  BucketShards shards_;
  at::Tensor m_, v_;       // [S] moments of this rank's shard
  at::Tensor grad_shard_;  // [S] zero2 only
  int64_t steps_ = 0;
  bool fused_ = false;
};

}  // namespace hpc::train::dist
