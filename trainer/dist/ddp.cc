// DDP: every rank holds the whole model; gradients are averaged by all-reduce. ZeRO-1 and ZeRO-2
// are the same reducer with the optimiser sharded (dist/zero.h):
//  - zero1: gradients averaged whole as in DDP; each rank updates its 1/W shard of the flat
//    parameter vector with its shard of AdamW's moments, then the shards are all-gathered;
//  - zero2: each bucket is padded to W S_b elements and rank r owns its slice r (zero.h), so a
//    full bucket is reduce-scattered straight into this rank's gradient shard (NCCL; on Gloo an
//    all-reduce in place, then the slice is copied: communicator.cc says why); the
//    bucket and the parameters' full gradients are freed, so between steps a rank holds 1/W of
//    the gradients and of the moments. One bucket is in flight at a time (the one before is
//    reduced when the next starts), so during backward too at most two buckets exist, not the
//    whole model's gradients.
//
// Gradients are gathered into buckets in reverse parameter order (the order backward produces
// them): the first bucket ~1 MiB so communication starts early, the rest ~25 MiB. A post-hook on
// each parameter's gradient accumulator copies the gradient into its bucket (and drops the
// .grad tensor); when a bucket's last gradient arrives its all-reduce starts asynchronously,
// overlapping the rest of backward. An engine callback, run when backward ends, waits for the
// buckets, divides by the world size and makes each .grad a view of its piece of the bucket
// (PyTorch's gradient_as_bucket_view: no copy back), before the optimiser sees them. On micro-steps
// that only accumulate (all but the last of a step) the hooks do nothing.
#include <atomic>

#include <fmt/format.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include "torch_compat.h"

#include "dist/communicator_group.h"
#include "dist/strategies.h"
#include "dist/zero.h"

namespace hpc::train::dist {
namespace {

struct Bucket {
  std::vector<size_t> params;   // indices into the parameter list, in the order they fill
  std::vector<int64_t> offset;  // element offset of each in `flat`
  int64_t numel = 0;
  at::Tensor flat;     // [numel] gradients of this bucket, contiguous (zero2: [W S_b], the padding
                       // zero, only while a synchronising backward pass runs)
  size_t pending = 0;  // gradients still to arrive in this backward pass
  std::unique_ptr<Communicator::Pending> work;
};

class Ddp final : public Strategy {
 public:
  Ddp(std::unique_ptr<Communicator> comm, const StrategyOptions& o, Stage stage)
      : group_(std::move(comm), o.timeout_s, c10::Device(o.device)), options_(o), stage_(stage) {}

  const char* name() const override {
    return stage_ == Stage::ddp ? "ddp" : stage_ == Stage::zero1 ? "zero1" : "zero2";
  }
  ProcessGroup& group() override { return group_; }

  void attach(const std::vector<at::Tensor>& params, const std::vector<std::vector<size_t>>&,
              const ParameterInit& init) override {
    if (init) throw std::logic_error("ddp: only a sharding strategy materialises parameters");
    params_ = params;
    // Every rank starts from rank 0's parameters (unless a checkpoint fills every rank's).
    if (!options_.parameters_from_checkpoint) {
      torch::NoGradGuard no_grad;
      std::vector<at::Tensor> data;
      for (auto& p : params_) data.push_back(p.detach());
      group_.comm().broadcast(data, 0);
    }
    build_buckets();
    if (stage_ == Stage::ddp) {
      optimizer_ = std::make_unique<ReplicatedAdamW>(params_, options_.adamw, rank(), world());
    } else {
      std::vector<std::vector<size_t>> buckets;
      for (const auto& b : buckets_) buckets.push_back(b.params);
      auto sharded =
          std::make_unique<ShardedAdamW>(params_, buckets, options_.adamw, group_.comm());
      if (stage_ == Stage::zero2) {
        sharded->use_gradient_shard();
        zero2_shard_ = sharded.get();
      }
      optimizer_ = std::move(sharded);
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
      acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [this, i](const torch::autograd::variable_list& outputs,
                    const torch::autograd::variable_list&) {
            on_gradient(i);
            return outputs;
          }));
      accumulators_.push_back(std::move(acc));  // autograd holds them weakly
    }
  }
  bool shards_parameters() const override { return false; }
  UnitHooks* unit_hooks() override { return nullptr; }

  std::string layout() const override {
    return fmt::format("{} gradient bucket{} of {} parameters (first {} MiB, then {} MiB){}",
                       buckets_.size(), buckets_.size() == 1 ? "" : "s", params_.size(),
                       options_.first_bucket_mb, options_.bucket_cap_mb,
                       stage_ == Stage::zero2 ? fmt::format(", each reduced to this rank's "
                                                            "shard and gathered by {}",
                                                            group_.comm().flat_collectives())
                                              : "");
  }

  void set_gradient_sync(bool sync) override { sync_ = sync; }

  void finish_gradients() override {
    if (!reduced_) {
      throw std::runtime_error("ddp: the last micro-step's backward did not reduce the gradients");
    }
    reduced_ = false;
  }

  // ddp: clip_grad_norm + AdamW::step, no collective; zero1/zero2: the sharded step.
  double clip_and_step(double max_norm, double lr) override {
    // The step's only failures are its collectives': say what that means for the job.
    return group_.checked(fmt::format("the {} step's collectives", name()),
                          [&] { return optimizer_->clip_and_step(max_norm, lr); });
  }

  HeldBytes held_bytes() const override {
    // ddp/zero1: between steps the gradients are views of the buckets, counted once by the
    // caller as the parameters' .grad; zero2 frees its buckets.
    HeldBytes h;
    h.gradients = optimizer_->gradient_bytes();
    h.optimizer = optimizer_->state_bytes();
    return h;
  }

  // Checkpoints: ddp every element (save: 1/W each), zero1/zero2 this rank's shard (load: and
  // the other shards' parameter values, read from the files instead of all-gathered).
  std::vector<StatePiece> pieces_to_save() override { return optimizer_->pieces_to_save(); }
  std::vector<StatePiece> pieces_to_load() override { return optimizer_->pieces_to_load(); }
  void after_load() override {
    group_.checked("the all-gather after loading a checkpoint", [&] { optimizer_->after_load(); });
  }
  int64_t optimizer_steps() const override { return optimizer_->steps(); }
  void set_optimizer_steps(int64_t steps) override { optimizer_->set_steps(steps); }

 private:
  int rank() const { return group_.rank(); }
  int world() const { return group_.world(); }

  at::TensorOptions flat_options() const { return params_.at(0).options().requires_grad(false); }

  void build_buckets() {
    const double first_cap = options_.first_bucket_mb * 1024 * 1024;
    const double cap = options_.bucket_cap_mb * 1024 * 1024;
    bucket_of_.assign(params_.size(), 0);
    slot_of_.assign(params_.size(), 0);
    Bucket current;
    double bytes = 0;
    int64_t numel = 0;
    auto close = [&]() {
      if (current.params.empty()) return;
      current.numel = numel;
      if (stage_ != Stage::zero2) current.flat = torch::zeros({numel}, flat_options());
      buckets_.push_back(std::move(current));
      current = Bucket();
      bytes = 0;
      numel = 0;
    };
    for (size_t k = params_.size(); k-- > 0;) {  // reverse registration order
      const auto& p = params_[k];
      bucket_of_[k] = buckets_.size();
      slot_of_[k] = current.params.size();
      current.params.push_back(k);
      current.offset.push_back(numel);
      numel += p.numel();
      bytes += double(p.numel() * p.element_size());
      if (bytes >= (buckets_.empty() ? first_cap : cap)) close();
    }
    close();
    for (auto& b : buckets_) b.pending = b.params.size();
  }

  // Runs on the autograd thread right after parameter i's gradient was accumulated.
  void on_gradient(size_t i) {
    if (!sync_) return;
    if (!callback_queued_) {
      callback_queued_ = true;
      torch::autograd::Engine::get_default_engine().queue_callback([this] { finalize(); });
    }
    Bucket& b = buckets_[bucket_of_[i]];
    const auto& g = params_[i].grad();
    const int64_t n = params_[i].numel();
    if (!b.flat.defined()) {  // zero2: [W S_b], the padding after the gradients zero
      const int64_t padded =
          world() * zero2_shard_->shards().buckets[bucket_of_[i]].layout.shard_numel;
      b.flat = torch::empty({padded}, flat_options());
      b.flat.narrow(0, b.numel, padded - b.numel).zero_();
    }
    b.flat.narrow(0, b.offset[slot_of_[i]], n).copy_(g.reshape({n}));
    params_[i].mutable_grad() = at::Tensor();  // finalize points it at the bucket
    if (--b.pending != 0) return;
    if (stage_ != Stage::zero2) {
      b.work = group_.comm().all_reduce_sum(b.flat);
      return;
    }
    auto slice = zero2_shard_->gradient_slice(bucket_of_[i]);
    b.work = group_.comm().reduce_scatter_flat(slice, b.flat);
    // zero2 keeps one bucket in flight: the one before is reduced to its shard and freed now, so
    // that at most two buckets exist at once instead of the whole model's gradients.
    if (last_reducing_ >= 0) reduce_bucket(size_t(last_reducing_));
    last_reducing_ = int(bucket_of_[i]);
  }

  // Waits for a bucket's reduction and makes it the mean: ddp/zero1 the whole bucket, zero2 this
  // rank's slice in the gradient shard (the bucket is freed).
  void reduce_bucket(size_t index) {
    Bucket& b = buckets_[index];
    group_.wait(*b.work,
                stage_ == Stage::zero2 ? "gradient reduce-scatter" : "gradient all-reduce");
    b.work.reset();
    if (stage_ != Stage::zero2) {
      b.flat.mul_(1.0 / double(world()));
      return;
    }
    zero2_shard_->gradient_slice(index).mul_(1.0 / double(world()));
    b.flat = at::Tensor();
  }

  // Runs once at the end of a synchronising backward pass.
  void finalize() {
    callback_queued_ = false;
    last_reducing_ = -1;
    for (size_t index = 0; index < buckets_.size(); ++index) {
      Bucket& b = buckets_[index];
      if (b.pending != 0) {
        throw std::runtime_error(fmt::format(
            "ddp: {} parameter(s) got no gradient in this backward pass (unused parameters are "
            "not supported)",
            b.pending));
      }
      if (b.work) reduce_bucket(index);  // zero2: all but the last were reduced in backward
      if (stage_ == Stage::zero2) {
        b.pending = b.params.size();
        continue;
      }
      // The means stay in the bucket: each gradient becomes a view of its piece (no copy back;
      // the next step's backward writes fresh .grad tensors before the bucket is reused).
      for (size_t s = 0; s < b.params.size(); ++s) {
        auto& p = params_[b.params[s]];
        p.mutable_grad() = b.flat.narrow(0, b.offset[s], p.numel()).view(p.sizes());
      }
      b.pending = b.params.size();
    }
    reduced_ = true;
  }

  CommunicatorGroup group_;
  StrategyOptions options_;
  std::vector<at::Tensor> params_;
  std::vector<compat::GradAccumulatorPtr> accumulators_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, slot_of_;
  bool sync_ = true;
  bool callback_queued_ = false;
  bool reduced_ = false;
  int last_reducing_ = -1;  // zero2: the bucket whose all-reduce is in flight
  Stage stage_;
  std::unique_ptr<Optimizer> optimizer_;  // from attach
  ShardedAdamW* zero2_shard_ = nullptr;   // zero2: optimizer_, which holds the gradient shard
};

}  // namespace

std::unique_ptr<Strategy> make_ddp(std::unique_ptr<Communicator> comm,
                                   const StrategyOptions& options, Stage stage) {
  return std::make_unique<Ddp>(std::move(comm), options, stage);
}

}  // namespace hpc::train::dist
