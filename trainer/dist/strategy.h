// How gradients (and, for ZeRO, the optimiser state) are spread over ranks. The training loop
// talks only to this interface; the model knows nothing of it (torchtitan's "parallelism applied
// from outside"). DDP, ZeRO-1 and ZeRO-2 implement the same verbs.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "dist/rendezvous.h"
#include "optim.h"
#include "unit_hooks.h"

namespace hpc::train::dist {

// A piece of the training state held by this rank: elements [offset, offset + length) of
// parameter `param` (index in registration order, the parameter read as a flat vector), as 1-D
// views of the live tensors, so that filling them on load sets the state. exp_avg/exp_avg_sq
// are AdamW's moments for the same elements.
struct StatePiece {
  size_t param = 0;
  int64_t offset = 0;
  int64_t length = 0;
  at::Tensor value, exp_avg, exp_avg_sq;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual const char* name() const = 0;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Once, before training, with the model's parameters in registration order: DDP makes every
  // rank start from rank 0's values and hooks the gradients.
  virtual void attach(const std::vector<at::Tensor>& params) = 0;
  // Whether the next backward pass should reduce gradients: true only on the last micro-step of
  // gradient accumulation.
  virtual void set_gradient_sync(bool sync) = 0;
  // After the last backward of a step: when it returns, every gradient is the mean over ranks.
  virtual void finish_gradients() = 0;
  // Mean of a scalar over ranks (losses for the log and the validation loss).
  virtual double mean_over_ranks(double value) = 0;
  // True on every rank when it is true on any (a stop request seen by some ranks only).
  bool any_rank(bool value) { return mean_over_ranks(value ? 1.0 : 0.0) > 0.0; }
  virtual void barrier() = 0;

  // ZeRO: the strategy holds the optimiser state, each rank its 1/W shard. train.cc then builds
  // no AdamW of its own and calls clip_and_step instead of clip_grad_norm + AdamW::step.
  virtual bool shards_optimizer() const { return false; }
  // After finish_gradients: clips the global gradient norm (over all shards) to max_norm, updates
  // this rank's shard and gathers the parameters. Returns the norm before clipping.
  virtual double clip_and_step(double /*max_norm*/, double /*lr*/) {
    throw std::logic_error("clip_and_step on a strategy that does not shard the optimiser");
  }
  // Bytes this rank holds beyond the model's parameters and .grad tensors: gradient buffers
  // (DDP's buckets, ZeRO-2's gradient shard) and the sharded optimiser state.
  struct HeldBytes {
    int64_t parameters = -1;  // -1: the model's parameters, whole (all but fsdp)
    int64_t gradients = 0;
    int64_t optimizer = 0;
  };
  virtual HeldBytes held_bytes() const { return {}; }

  // fsdp: the model's parameters hold values only while their unit is gathered (unit_hooks.h).
  // train.cc passes the model's units before attach and installs the hooks; every forward pass
  // then involves every rank (validation, samples).
  virtual bool shards_parameters() const { return false; }
  virtual void set_units(const std::vector<std::vector<size_t>>& /*units*/) {}
  virtual UnitHooks* unit_hooks() { return nullptr; }

  // --- checkpoints (checkpoint.h) ---
  // Strategies that shard the optimiser (shards_optimizer()) describe their state as pieces:
  // pieces_to_save() over all ranks cover every parameter element exactly once, and
  // pieces_to_load() are what this rank must fill when resuming (the loader reads them from
  // whichever ranks' files hold them, so the world size may differ). after_load() then
  // restores what is derived (zero1/zero2: all-gather the parameters). Replicated strategies
  // (none, ddp) use replicated_pieces() below with the AdamW that train.cc owns.
  virtual std::vector<StatePiece> pieces_to_save() {
    throw std::logic_error("pieces_to_save on a strategy that does not shard the optimiser");
  }
  virtual std::vector<StatePiece> pieces_to_load() {
    throw std::logic_error("pieces_to_load on a strategy that does not shard the optimiser");
  }
  virtual void after_load() {}
  // AdamW's step count (bias correction) of a sharded optimiser.
  virtual int64_t optimizer_steps() const { return 0; }
  virtual void set_optimizer_steps(int64_t) {}
};

// A world of one: nothing to reduce.
class SingleProcess final : public Strategy {
 public:
  const char* name() const override { return "none"; }
  int rank() const override { return 0; }
  int world() const override { return 1; }
  void attach(const std::vector<at::Tensor>&) override {}
  void set_gradient_sync(bool) override {}
  void finish_gradients() override {}
  double mean_over_ranks(double v) override { return v; }
  void barrier() override {}
};

struct StrategyOptions {
  std::string name = "none";  // none, ddp, zero1, zero2, fsdp
  double timeout_s = 300;     // collectives and the rendezvous give up after this long
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;
  std::string device = "cpu";  // "cpu" or "cuda:N": selects Gloo or NCCL
  AdamWOptions adamw;          // zero1/zero2 build their sharded AdamW from it
};

// The names --strategy takes, and whether a name shards the optimiser state.
inline bool known_strategy(const std::string& name) {
  return name == "none" || name == "ddp" || name == "zero1" || name == "zero2" || name == "fsdp";
}
inline bool shards_optimizer(const std::string& name) {
  return name == "zero1" || name == "zero2" || name == "fsdp";
}

// none/ddp: parameters and AdamW are whole on every rank. To save, rank r writes the r-th of W
// equal slices of the flat parameter vector (FlatShards: the ranks write in parallel and nothing
// twice); to load, every rank fills every element.
std::vector<StatePiece> replicated_pieces(const std::vector<at::Tensor>& params, AdamW& optimizer,
                                          int rank, int world, bool for_save);

// Connects to the other ranks (TCPStore at the rendezvous' master, then the process group) and
// returns the strategy; "none" with a world of one returns SingleProcess. Throws UserError for an
// unknown name or a world > 1 without a distributed strategy.
std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options, const Rendezvous& rdv);

}  // namespace hpc::train::dist
