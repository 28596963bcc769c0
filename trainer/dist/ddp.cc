// DDP: every rank holds the whole model; gradients are averaged by all-reduce. ZeRO-1 and ZeRO-2
// are the same reducer with the optimiser sharded (dist/zero.h):
//  - zero1: gradients averaged whole as in DDP; each rank updates its 1/W shard of the flat
//    parameter vector with its shard of AdamW's moments, then the shards are all-gathered;
//  - zero2: as each bucket's all-reduce ends, only this rank's shard of it is kept (all-reduce +
//    narrow: Gloo in LibTorch 1.13 has no reduce_scatter); the bucket and the parameters' full
//    gradients are freed, so between steps a rank holds 1/W of the gradients and of the moments.
//
// Gradients are gathered into buckets in reverse parameter order (the order backward produces
// them): the first bucket ~1 MiB so communication starts early, the rest ~25 MiB. A post-hook on
// each parameter's gradient accumulator copies the gradient into its bucket (and drops the
// .grad tensor); when a bucket's last gradient arrives its all-reduce starts asynchronously,
// overlapping the rest of backward. An engine callback, run when backward ends, waits for the
// buckets, divides by the world size and makes each .grad a view of its piece of the bucket
// (PyTorch's gradient_as_bucket_view: no copy back), before the optimiser sees them. On micro-steps that
// only accumulate (all but the last of a step) the hooks do nothing.
#include <atomic>

#include <fmt/format.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include "dist/communicator.h"
#include "dist/fsdp.h"
#include "dist/strategy.h"
#include "dist/zero.h"
#include "error.h"

namespace hpc::train::dist {
namespace {

struct Bucket {
  std::vector<size_t> params;   // indices into the parameter list, in the order they fill
  std::vector<int64_t> offset;  // element offset of each in `flat`
  int64_t numel = 0;
  at::Tensor flat;              // [numel] gradients of this bucket, contiguous (zero2: only
                                // while a synchronising backward pass runs)
  size_t pending = 0;           // gradients still to arrive in this backward pass
  std::unique_ptr<Communicator::Pending> work;
};

// How much of the training state each rank keeps to itself.
enum class Stage { ddp = 0, zero1 = 1, zero2 = 2 };

class Ddp final : public Strategy {
 public:
  Ddp(std::unique_ptr<Communicator> comm, const StrategyOptions& o, Stage stage)
      : comm_(std::move(comm)), options_(o), stage_(stage) {}

  const char* name() const override {
    return stage_ == Stage::ddp ? "ddp" : stage_ == Stage::zero1 ? "zero1" : "zero2";
  }
  int rank() const override { return comm_->rank(); }
  int world() const override { return comm_->world(); }

  void attach(const std::vector<at::Tensor>& params) override {
    params_ = params;
    // Every rank starts from rank 0's parameters.
    {
      torch::NoGradGuard no_grad;
      std::vector<at::Tensor> data;
      for (auto& p : params_) data.push_back(p.detach());
      comm_->broadcast(data, 0);
    }
    build_buckets();
    if (stage_ != Stage::ddp) {
      sharded_ = std::make_unique<ShardedAdamW>(params_, options_.adamw, *comm_);
      if (stage_ == Stage::zero2) sharded_->use_gradient_shard();
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

  void set_gradient_sync(bool sync) override { sync_ = sync; }

  void finish_gradients() override {
    if (!reduced_) {
      throw std::runtime_error("ddp: the last micro-step's backward did not reduce the gradients");
    }
    reduced_ = false;
  }

  double mean_over_ranks(double value) override {
    try {
      return sum_over_ranks(*comm_, value, device()) / double(world());
    } catch (const std::exception& e) {
      throw std::runtime_error(collective_failure(*comm_, "loss all-reduce", options_.timeout_s, e));
    }
  }

  void barrier() override { comm_->barrier(); }

  bool shards_optimizer() const override { return sharded_ != nullptr; }

  double clip_and_step(double max_norm, double lr) override {
    try {
      return sharded_->clip_and_step(max_norm, lr);
    } catch (const std::exception& e) {  // Gloo rethrows its own errors (gloo::IoException)
      // The step's only failures are its collectives': say what that means for the job.
      throw std::runtime_error(collective_failure(*comm_, fmt::format("the {} step's collectives", name()),
                                                  options_.timeout_s, e));
    }
  }

  // Checkpoints. zero1/zero2: this rank's shard; ddp: pieces come from replicated_pieces().
  std::vector<StatePiece> pieces_to_save() override { return sharded_state().pieces(); }
  std::vector<StatePiece> pieces_to_load() override { return sharded_state().pieces(); }
  void after_load() override {
    if (!sharded_) return;
    try {
      sharded_->all_gather_parameters();
    } catch (const std::exception& e) {
      throw std::runtime_error(collective_failure(*comm_, "the all-gather after loading a checkpoint",
                                                  options_.timeout_s, e));
    }
  }
  int64_t optimizer_steps() const override { return sharded_ ? sharded_->steps() : 0; }
  void set_optimizer_steps(int64_t steps) override {
    if (sharded_) sharded_->set_steps(steps);
  }

  HeldBytes held_bytes() const override {
    // ddp/zero1: between steps the gradients are views of the buckets, counted once by the
    // caller as the parameters' .grad; zero2 frees its buckets.
    HeldBytes h;
    if (sharded_) {
      h.gradients += sharded_->gradient_bytes();
      h.optimizer = sharded_->state_bytes();
    }
    return h;
  }

 private:
  // c10d's errors name a socket; say what it means for the job.
  void wait_for(Communicator::Pending& work, const char* what) {
    try {
      work.wait();
    } catch (const std::exception& e) {
      throw std::runtime_error(collective_failure(*comm_, what, options_.timeout_s, e));
    }
  }

  ShardedAdamW& sharded_state() {
    if (!sharded_) throw std::logic_error("ddp: pieces of a strategy that does not shard the optimiser");
    return *sharded_;
  }

  at::TensorOptions flat_options() const { return params_.at(0).options().requires_grad(false); }

  at::Device device() const { return params_.empty() ? at::Device(at::kCPU) : params_[0].device(); }

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
    if (!b.flat.defined()) b.flat = torch::empty({b.numel}, flat_options());  // zero2
    b.flat.narrow(0, b.offset[slot_of_[i]], n).copy_(g.reshape({n}));
    params_[i].mutable_grad() = at::Tensor();  // finalize points it at the bucket
    if (--b.pending == 0) b.work = comm_->all_reduce_sum(b.flat);
  }

  // Runs once at the end of a synchronising backward pass.
  void finalize() {
    callback_queued_ = false;
    const double inv_world = 1.0 / double(world());
    for (auto& b : buckets_) {
      if (b.pending != 0) {
        throw std::runtime_error(fmt::format(
            "ddp: {} parameter(s) got no gradient in this backward pass (unused parameters are "
            "not supported)", b.pending));
      }
      wait_for(*b.work, "gradient all-reduce");
      b.work.reset();
      b.flat.mul_(inv_world);
      if (stage_ == Stage::zero2) {
        keep_shard_of(b);
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

  // zero2: this rank's shard of a reduced bucket goes to the gradient shard; the bucket and the
  // full gradients of its parameters are freed.
  void keep_shard_of(Bucket& b) {
    const auto& sh = sharded_->shards();
    const int64_t lo = rank() * sh.shard_numel, hi = lo + sh.shard_numel;
    auto& shard = sharded_->gradient_shard();
    for (size_t s = 0; s < b.params.size(); ++s) {
      const size_t i = b.params[s];
      const int64_t begin = sh.flat_offset[i], end = begin + params_[i].numel();
      const int64_t a = std::max(lo, begin), z = std::min(hi, end);
      if (a < z) shard.narrow(0, a - lo, z - a).copy_(b.flat.narrow(0, b.offset[s] + (a - begin), z - a));
      params_[i].mutable_grad() = at::Tensor();
    }
    b.flat = at::Tensor();
  }

  std::unique_ptr<Communicator> comm_;
  StrategyOptions options_;
  std::vector<at::Tensor> params_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, slot_of_;
  bool sync_ = true;
  bool callback_queued_ = false;
  bool reduced_ = false;
  Stage stage_;
  std::unique_ptr<ShardedAdamW> sharded_;  // zero1, zero2
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options, const Rendezvous& rdv) {
  if (options.name == "none") {
    if (rdv.world > 1) {
      throw UserError("--strategy",
                      fmt::format("{} ranks were launched but --strategy is none", rdv.world),
                      "pass --strategy ddp, zero1, zero2 or fsdp");
    }
    return std::make_unique<SingleProcess>();
  }
  if (options.name == "fsdp") {
    if (options.timeout_s <= 0) throw UserError("--dist-timeout", "must be positive", "");
    return make_fsdp(connect(rdv, options.device, std::chrono::milliseconds(int64_t(options.timeout_s * 1000))),
                     options);
  }
  const Stage stage = options.name == "ddp"     ? Stage::ddp
                      : options.name == "zero1" ? Stage::zero1
                      : options.name == "zero2" ? Stage::zero2
                                                : throw UserError("--strategy",
                                                                  fmt::format("unknown strategy '{}'", options.name),
                                                                  "use none, ddp, zero1, zero2 or fsdp");
  if (options.timeout_s <= 0) throw UserError("--dist-timeout", "must be positive", "");
  const auto timeout = std::chrono::milliseconds(int64_t(options.timeout_s * 1000));
  return std::make_unique<Ddp>(connect(rdv, options.device, timeout), options, stage);
}

}  // namespace hpc::train::dist
