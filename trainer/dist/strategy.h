// How gradients, the optimiser's state and (fsdp) the parameters are spread over ranks. The
// training loop talks only to this interface; the model knows nothing of it (torchtitan's
// "parallelism applied from outside"). Every strategy owns the optimiser: none and ddp keep AdamW
// whole on each rank, zero1/zero2 and fsdp 1/W of it. make_strategy.h builds them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "dist/process_group.h"
#include "dist/state_piece.h"
#include "model/unit_hooks.h"

namespace hpc::train::dist {

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual const char* name() const = 0;
  // The ranks it spreads over: the loop's means and barriers, and the checkpoints' collectives.
  virtual ProcessGroup& group() = 0;

  // Once, before training, with the model's parameters in registration order and its units
  // (GptImpl::parameter_units, unit_hooks.h): every rank starts from rank 0's values, the
  // gradients are hooked and the optimiser is built. With `init` (only for a strategy that
  // shards_parameters(), on a model built with ParameterStorage::deferred) the parameters have
  // no storage yet: the strategy materialises them unit by unit, in parameter order, calling
  // init(i, values of parameter i) (GptImpl::init_parameter), and keeps only its shard.
  using ParameterInit = std::function<void(size_t param, at::Tensor values)>;
  virtual void attach(const std::vector<at::Tensor>& params,
                      const std::vector<std::vector<size_t>>& units, const ParameterInit& init) = 0;
  // fsdp: the model's parameters hold values only while their unit is gathered; the model calls
  // these hooks (installed by train.cc after attach) and every forward pass then involves every
  // rank (validation, samples). The others: false and nullptr.
  virtual bool shards_parameters() const = 0;
  virtual UnitHooks* unit_hooks() = 0;
  // How it cut the parameters for communication, for the log (ddp/zero1/zero2: "N gradient
  // buckets ..."); empty when there is nothing to say. Called after attach.
  virtual std::string layout() const { return {}; }

  // --- one step ---
  // Whether the next backward pass should reduce gradients: true only on the last micro-step of
  // gradient accumulation.
  virtual void set_gradient_sync(bool sync) = 0;
  // After the last backward of a step: when it returns, every gradient is the mean over ranks.
  virtual void finish_gradients() = 0;
  // Clips the global gradient norm (over all shards) to max_norm and updates the parameters with
  // AdamW at learning rate lr. Returns the norm before clipping.
  virtual double clip_and_step(double max_norm, double lr) = 0;

  // Bytes this rank holds beyond the model's parameters and .grad tensors: gradient buffers
  // (zero2's gradient shard, fsdp's) and the optimiser's moments (whole or sharded).
  struct HeldBytes {
    int64_t parameters = -1;  // -1: the model's parameters, whole (all but fsdp)
    int64_t gradients = 0;
    int64_t optimizer = 0;
  };
  virtual HeldBytes held_bytes() const = 0;

  // --- checkpoints (checkpoint.h) ---
  // The state as pieces: pieces_to_save() over all ranks cover every parameter element exactly
  // once, and pieces_to_load() are what this rank must fill when resuming (the loader reads them
  // from whichever ranks' files hold them, so the world size may differ). after_load() then
  // restores what is derived (zero1/zero2: all-gather the parameters).
  virtual std::vector<StatePiece> pieces_to_save() = 0;
  virtual std::vector<StatePiece> pieces_to_load() = 0;
  virtual void after_load() = 0;
  // AdamW's step count (bias correction).
  virtual int64_t optimizer_steps() const = 0;
  virtual void set_optimizer_steps(int64_t steps) = 0;
};

}  // namespace hpc::train::dist
