#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "error.h"

namespace hpc::train {

double LrSchedule::at(int64_t step) const {
  const double min_lr = max_lr * min_lr_ratio;
  if (step < warmup_steps) return max_lr * double(step + 1) / double(warmup_steps);
  if (step > decay_steps) return min_lr;
  const double span = double(decay_steps - warmup_steps);
  const double ratio = span > 0 ? double(step - warmup_steps) / span : 1.0;
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));  // 1 -> 0
  return min_lr + coeff * (max_lr - min_lr);
}

int64_t grad_accum_steps(int64_t total_batch_tokens, int64_t micro_batch, int64_t seq_len,
                         int world) {
  if (micro_batch <= 0) throw UserError("--micro-batch", "must be positive", "");
  if (seq_len <= 0) throw UserError("--seq-len", "must be positive", "");
  const int64_t per_micro_step = micro_batch * seq_len * world;
  if (total_batch_tokens <= 0 || total_batch_tokens % per_micro_step != 0) {
    throw UserError(
        "--total-batch-tokens",
        fmt::format("{} is not a positive multiple of --micro-batch x --seq-len x world = "
                    "{} x {} x {} = {}",
                    total_batch_tokens, micro_batch, seq_len, world, per_micro_step),
        fmt::format("use a multiple of {}, e.g. {}", per_micro_step,
                    std::max<int64_t>(1, total_batch_tokens / per_micro_step) * per_micro_step));
  }
  return total_batch_tokens / per_micro_step;
}

}  // namespace hpc::train
