// The learning-rate schedule and the batch arithmetic of the GPT-2 recipe. No LibTorch.
#pragma once

#include <cstdint>

namespace hpc::train {

struct LrSchedule {
  double max_lr = 6e-4;
  double min_lr_ratio = 0.1;  // cosine decays to max_lr * min_lr_ratio
  int64_t warmup_steps = 715;
  int64_t decay_steps =
      19073;  // step where the cosine reaches its floor (build-nanogpt: max_steps)

  // Linear warm-up over steps 0..warmup-1 reaching max_lr at step warmup-1, cosine decay from
  // step warmup to decay_steps, then the floor: build-nanogpt's get_lr.
  double at(int64_t step) const;
};

// Gradient accumulation: each optimiser step sees total_batch_tokens tokens, made of micro-batches
// of micro_batch x seq_len tokens on each of `world` ranks. Throws hpc::UserError naming the flags
// when total_batch_tokens is not a positive multiple of micro_batch * seq_len * world.
int64_t grad_accum_steps(int64_t total_batch_tokens, int64_t micro_batch, int64_t seq_len,
                         int world);

}  // namespace hpc::train
