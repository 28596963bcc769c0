// FSDP, full shard (ZeRO-3). Each unit of the model (unit_hooks.h: the embedding/head group, then
// one per block) is a flat vector of its parameters, padded to W S elements; rank r keeps only
// elements [r S, r S + S): the fp32 master values, their AdamW moments and their reduced gradient.
//
//  forward   before(u): all-gather unit u into its flat buffer (the model's parameters are views of
//            it), and start the next unit's all-gather (prefetch) so it overlaps u's compute;
//            after(u): free the buffer; with gradients enabled, hook u's output so that backward
//            gathers the unit again just before it runs (and prefetches the unit before it).
//            Unit 0 (wte, tied to the head; wpe) is used at both ends of the pass: it stays
//            gathered through forward; the chunked head keeps its gradients, not wte, so the
//            unit is freed when the loss is out (the model says so: BackwardReads::nothing);
//            under a head that reads wte in backward it stays until its gradients are in.
//  backward  a post-hook on each parameter's gradient accumulator copies the gradient into the
//            unit's fp32 gradient buffer; when the unit's last gradient is in, the buffer is
//            reduce-scattered (NCCL natively; Gloo in 1.13 has none: all-reduce + this rank's
//            slice), the unit's parameters are freed, and the full gradients dropped. The slice,
//            divided by W, is added to the gradient shard: every micro-step reduces (memory stays
//            1/W), so gradient accumulation needs no full-size buffers. Unit 0, which is mostly
//            wte, reduces each gradient where it lies instead (all-reduce in place, keep the
//            slice): no second [V, C] buffer beside the embedding's gradient.
//  step      the global gradient norm from each rank's sum of squares over its shards, clipping,
//            AdamW on the shards only. Nothing is gathered after the step: the next forward does.
//
// Memory is freed by swapping the buffer's storage for an empty one and allocated again in place
// (what PyTorch's FSDP does with storage resize): the parameters, and autograd's saved references
// to them, share that storage, so they see the values again when the unit is gathered for
// backward. Writes go through the collectives, not through the parameters, so autograd's version
// counters are untouched. Under --precision bf16 (the default on CUDA) the buffer is bf16 (the
// mixed-precision policy: parameters gathered in bf16; master weights, gradient reductions and
// the optimiser in fp32).

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include "torch_compat.h"

#include "dist/communicator_group.h"
#include "dist/storage_bytes.h"
#include "dist/strategies.h"
#include "dist/zero.h"

namespace hpc::train::dist {
namespace {

void free_storage(const at::Tensor& t) {
  auto* impl = t.storage().unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  impl->set_nbytes(0);
}

void allocate_storage(const at::Tensor& t) {
  auto* impl = t.storage().unsafeGetStorageImpl();
  const size_t bytes = size_t(t.numel()) * t.element_size();
  if (impl->nbytes() == bytes) return;
  impl->set_data_ptr_noswap(impl->allocator()->allocate(bytes));
  impl->set_nbytes(bytes);
}

struct Unit {
  std::vector<size_t> params;   // indices into the model's parameters
  std::vector<int64_t> offset;  // of each in the flat vector
  FlatShards layout;            // its of_rank segments' `param` index into `params`
  int64_t S = 0;                // shard elements
  at::Tensor full;        // [W S] the parameters are views of it; storage freed when not gathered
  at::Tensor send;        // what this rank contributes to a gather (shard, cast on CUDA)
  at::Tensor shard;       // [S] fp32 master values
  at::Tensor grad_shard;  // [S] fp32 mean gradient, summed over the step's micro-steps
  at::Tensor m, v;        // [S] AdamW moments
  at::Tensor grad_full;   // [W S] fp32, while the unit's gradients arrive and are reduced
  at::Tensor reduced;     // [S] this rank's slice of the reduced gradient
  // A unit that is mostly one parameter (unit 0: wte is 98% of it) reduces each gradient where
  // it lies (all-reduce in place, then this rank's slice), instead of copying them into
  // grad_full: a second buffer of the embedding's size would be alive with its gradient.
  bool reduce_each_parameter = false;
  struct ParameterReduction {
    size_t slot;      // into params
    at::Tensor grad;  // the parameter's gradient, summed over ranks in place
    std::unique_ptr<Communicator::Pending> work;
  };
  std::vector<ParameterReduction> parameter_reductions;
  bool gathered = false;
  std::unique_ptr<Communicator::Pending> gathering, reducing;
  size_t pending = 0;  // gradients still to arrive in this backward pass
};

class Fsdp final : public Strategy, public UnitHooks {
 public:
  Fsdp(std::unique_ptr<Communicator> comm, const StrategyOptions& o)
      : group_(std::move(comm), o.timeout_s, c10::Device(o.device)), options_(o) {}

  const char* name() const override { return "fsdp"; }
  ProcessGroup& group() override { return group_; }
  bool shards_parameters() const override { return true; }
  UnitHooks* unit_hooks() override { return this; }
  std::string layout() const override {
    return fmt::format("{} units, each gathered and its gradients reduced by {}", units_.size(),
                       group_.comm().flat_collectives());
  }

  void attach(const std::vector<at::Tensor>& params, const std::vector<std::vector<size_t>>& units,
              const ParameterInit& init) override {
    if (units.empty()) throw std::logic_error("fsdp: the model has no units");
    unit_params_ = units;
    torch::NoGradGuard no_grad;
    params_ = params;
    // Deferred parameters (init) are on the CPU without storage; each unit is initialised
    // there (the CPU generator, as the unsharded model) and moved to the strategy's device.
    const auto device = init ? group_.device() : params_.at(0).device();
    param_dtype_ = options_.bf16_params ? at::kBFloat16 : at::kFloat;
    if (init) {  // every rank draws the same values: the same seed, the same order
      check_parameter_order(units);
    } else {  // every rank starts from rank 0's values
      std::vector<at::Tensor> data;
      for (auto& p : params_) data.push_back(p.detach());
      group_.comm().broadcast(data, 0);
    }
    const int W = world(), r = rank();
    unit_of_.assign(params_.size(), 0);
    slot_of_.assign(params_.size(), 0);
    const auto f32 = torch::TensorOptions().dtype(at::kFloat).device(device);
    for (size_t u = 0; u < unit_params_.size(); ++u) {
      Unit unit;
      unit.params = unit_params_[u];
      std::vector<int64_t> numels;
      for (size_t k = 0; k < unit.params.size(); ++k) {
        const size_t i = unit.params[k];
        if (!params_[i].is_contiguous()) {
          throw std::runtime_error("fsdp: parameters must be contiguous");
        }
        unit_of_[i] = u;
        slot_of_[i] = k;
        numels.push_back(params_[i].numel());
      }
      unit.layout = FlatShards(numels, W);
      unit.reduce_each_parameter =
          2 * *std::max_element(numels.begin(), numels.end()) > unit.layout.total;
      unit.offset = unit.layout.flat_offset;
      unit.S = unit.layout.shard_numel;
      auto flat = torch::zeros({W * unit.S}, init ? f32.device(at::kCPU) : f32);
      for (size_t k = 0; k < unit.params.size(); ++k) {
        auto values = flat.narrow(0, unit.offset[k], numels[k]);
        if (init)
          init(unit.params[k], values.view(params_[unit.params[k]].sizes()));
        else
          values.copy_(params_[unit.params[k]].detach().reshape({-1}));
      }
      flat = flat.to(device);
      unit.shard = flat.narrow(0, r * unit.S, unit.S).clone();
      unit.grad_shard = torch::zeros({unit.S}, f32);
      unit.m = torch::zeros({unit.S}, f32);
      unit.v = torch::zeros({unit.S}, f32);
      unit.full = flat.to(param_dtype_);
      for (size_t k = 0; k < unit.params.size(); ++k) {
        auto& p = params_[unit.params[k]];
        p.set_data(unit.full.narrow(0, unit.offset[k], numels[k]).view(p.sizes()));
      }
      unit.pending = unit.params.size();
      units_.push_back(std::move(unit));
      free_storage(units_.back().full);
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

  // Deferred initialisation draws the generator unit after unit: the units must list the
  // parameters in their registration order for the values to be the unsharded model's.
  static void check_parameter_order(const std::vector<std::vector<size_t>>& units) {
    size_t next = 0;
    for (const auto& unit : units) {
      for (size_t i : unit) {
        if (i != next++) {
          throw std::logic_error("fsdp: deferred initialisation needs units in parameter order");
        }
      }
    }
  }

  // ------------------------------------------------------------------- the model's hooks
  void before(int u) override {
    gather(size_t(u));
    if (size_t(u) + 1 < units_.size()) start_gather(size_t(u) + 1);  // prefetch
  }

  at::Tensor after(int u, const at::Tensor& out, BackwardReads reads) override {
    const bool backward = at::GradMode::is_enabled() && out.requires_grad();
    if (!backward || reads == BackwardReads::nothing) {
      release(size_t(u));
      return out;
    }
    // Unit 0 under a head that reads wte in backward: the first thing backward needs, so it
    // stays gathered until its gradients are in.
    if (u == 0) return out;
    release(size_t(u));
    out.register_hook([this, u](const at::Tensor& grad) {
      gather(size_t(u));
      // Prefetch the unit before; not unit 0, which backward reads only when still gathered.
      if (u > 1) start_gather(size_t(u) - 1);
      return grad;
    });
    return out;
  }

  // --------------------------------------------------------------------- Strategy verbs
  void set_gradient_sync(bool) override {}  // every backward reduce-scatters (see the top)

  void finish_gradients() override {
    if (!reduced_) {
      throw std::runtime_error("fsdp: the last micro-step's backward did not reduce the gradients");
    }
    reduced_ = false;
  }

  double clip_and_step(double max_norm, double lr) override {
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> grad_shards;
    for (auto& u : units_) {
      if (u.gathering || u.reducing) {
        throw std::logic_error("fsdp: a collective is still in flight at the step");
      }
      grad_shards.push_back(u.grad_shard);
    }
    const double sumsq = sum_of_squares(grad_shards);  // one device synchronisation
    const double total = std::sqrt(group_.checked("fsdp gradient norm all-reduce", [&] {
      return sum_over_ranks(group_.comm(), sumsq, group_.device());
    }));
    const double coef = std::min(1.0, max_norm / (total + 1e-6));  // as clip_grad_norm (optim.cc)
    // AdamW on the shards' pieces: AdamW::step's arithmetic (optim.cc).
    AdamWTensors pieces;
    for (auto& u : units_) {
      if (coef < 1.0) u.grad_shard.mul_(coef);
      for (const auto& s : u.layout.of_rank[size_t(rank())]) {
        pieces.add(u.shard.narrow(0, s.shard_offset, s.length),
                   u.grad_shard.narrow(0, s.shard_offset, s.length),
                   u.m.narrow(0, s.shard_offset, s.length), u.v.narrow(0, s.shard_offset, s.length),
                   params_[u.params[s.param]].dim() >= 2);
      }
    }
    adamw_update_tensors(pieces, options_.adamw, ++steps_, lr,
                         device().is_cuda() && AdamW::fused_available());
    for (auto& u : units_) u.grad_shard.zero_();
    return total;
  }

  // Measured on the storages (storage_bytes.h): a unit whose free left its buffer allocated
  // counts it whole.
  HeldBytes held_bytes() const override {
    StorageBytes parameters, gradients, optimizer;
    for (const auto& u : units_) {
      parameters.add(u.shard).add(u.full).add(u.send);
      gradients.add(u.grad_shard).add(u.grad_full).add(u.reduced);
      for (const auto& r : u.parameter_reductions) gradients.add(r.grad);
      optimizer.add(u.m).add(u.v);
    }
    for (const auto& p : params_) parameters.add(p);
    HeldBytes h;
    h.parameters = parameters.bytes();
    h.gradients = gradients.bytes();
    h.optimizer = optimizer.bytes();
    return h;
  }

  // The shards are the whole state: saved and loaded piece by piece, nothing derived.
  std::vector<StatePiece> pieces_to_save() override {
    std::vector<StatePiece> out;
    for (auto& u : units_) {
      for (const auto& s : u.layout.of_rank[size_t(rank())]) {
        StatePiece p;
        p.param = u.params[s.param];
        p.offset = s.param_offset;
        p.length = s.length;
        p.value = u.shard.narrow(0, s.shard_offset, s.length);
        p.exp_avg = u.m.narrow(0, s.shard_offset, s.length);
        p.exp_avg_sq = u.v.narrow(0, s.shard_offset, s.length);
        out.push_back(std::move(p));
      }
    }
    return out;
  }
  std::vector<StatePiece> pieces_to_load() override { return pieces_to_save(); }
  void after_load() override {
    for (size_t u = 0; u < units_.size(); ++u) release(u);  // values come with the next gather
  }
  int64_t optimizer_steps() const override { return steps_; }
  void set_optimizer_steps(int64_t steps) override { steps_ = steps; }

 private:
  int rank() const { return group_.rank(); }
  int world() const { return group_.world(); }
  const at::Device& device() const { return group_.device(); }

  void start_gather(size_t u) {
    Unit& unit = units_[u];
    if (unit.gathered || unit.gathering) return;
    allocate_storage(unit.full);
    unit.send = param_dtype_ == at::kFloat ? unit.shard : unit.shard.to(param_dtype_);
    unit.gathering = group_.comm().all_gather_flat(unit.full, unit.send);
  }

  void gather(size_t u) {
    Unit& unit = units_[u];
    if (unit.gathered) return;
    start_gather(u);
    group_.wait(*unit.gathering, "fsdp parameter all-gather");
    unit.gathering.reset();
    unit.send = at::Tensor();
    unit.gathered = true;
  }

  void release(size_t u) {
    Unit& unit = units_[u];
    if (unit.gathering) gather(u);  // a prefetch still writing into the buffer
    if (!unit.gathered) return;
    free_storage(unit.full);
    unit.gathered = false;
  }

  // Runs on the autograd thread right after parameter i's gradient was accumulated.
  void on_gradient(size_t i) {
    if (!callback_queued_) {
      callback_queued_ = true;
      torch::autograd::Engine::get_default_engine().queue_callback([this] { finalize(); });
    }
    const size_t u = unit_of_[i];
    Unit& unit = units_[u];
    auto& p = params_[i];
    if (unit.reduce_each_parameter) {
      // Reduced in fp32 (bf16 parameters' gradients too: the mixed-precision policy; 1.13's
      // Gloo has no bf16 all-reduce). .to() returns an fp32 gradient itself: no copy.
      auto grad = p.grad().to(at::kFloat).contiguous();
      p.mutable_grad() = at::Tensor();
      auto work = group_.comm().all_reduce_sum(grad);
      unit.parameter_reductions.push_back({slot_of_[i], std::move(grad), std::move(work)});
      if (--unit.pending != 0) return;
      unit.pending = unit.params.size();
      release(u);
      return;
    }
    if (!unit.grad_full.defined()) {
      unit.grad_full = torch::zeros({world() * unit.S},
                                    torch::TensorOptions().dtype(at::kFloat).device(device()));
    }
    const int64_t n = p.numel();
    unit.grad_full.narrow(0, unit.offset[slot_of_[i]], n).copy_(p.grad().reshape({n}));
    p.mutable_grad() = at::Tensor();
    if (--unit.pending != 0) return;
    // The unit's backward is done: free its parameters, reduce its gradients.
    unit.pending = unit.params.size();
    release(u);
    if (last_reducing_ >= 0) finish_reduce(size_t(last_reducing_));  // one in flight at a time
    unit.reduced = torch::empty({unit.S}, unit.grad_full.options());
    unit.reducing = group_.comm().reduce_scatter_flat(unit.reduced, unit.grad_full);
    last_reducing_ = int(u);
  }

  void finish_reduce(size_t u) {
    Unit& unit = units_[u];
    for (auto& r : unit.parameter_reductions) {
      group_.wait(*r.work, "fsdp gradient all-reduce");
      const auto flat = r.grad.view({-1});
      for (const auto& s : unit.layout.of_rank[size_t(rank())]) {
        if (s.param != r.slot) continue;
        unit.grad_shard.narrow(0, s.shard_offset, s.length)
            .add_(flat.narrow(0, s.param_offset, s.length), 1.0 / double(world()));
      }
    }
    unit.parameter_reductions.clear();
    if (!unit.reducing) return;
    group_.wait(*unit.reducing, "fsdp gradient reduce-scatter");
    unit.reducing.reset();
    unit.grad_shard.add_(unit.reduced, 1.0 / double(world()));
    unit.reduced = at::Tensor();
    unit.grad_full = at::Tensor();
  }

  // Runs once when a backward pass ends.
  void finalize() {
    callback_queued_ = false;
    for (size_t u = 0; u < units_.size(); ++u) {
      if (units_[u].pending != units_[u].params.size()) {
        throw std::runtime_error(
            fmt::format("fsdp: {} parameter(s) of unit {} got no gradient in this backward pass "
                        "(unused parameters "
                        "are not supported)",
                        units_[u].pending, u));
      }
      finish_reduce(u);
      release(u);
    }
    last_reducing_ = -1;
    reduced_ = true;
  }

  CommunicatorGroup group_;
  StrategyOptions options_;
  std::vector<std::vector<size_t>> unit_params_;
  std::vector<at::Tensor> params_;
  std::vector<size_t> unit_of_, slot_of_;
  std::vector<Unit> units_;
  std::vector<compat::GradAccumulatorPtr> accumulators_;
  c10::ScalarType param_dtype_ = at::kFloat;
  bool callback_queued_ = false;
  bool reduced_ = false;
  int last_reducing_ = -1;
  int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_fsdp(std::unique_ptr<Communicator> comm,
                                    const StrategyOptions& options) {
  return std::make_unique<Fsdp>(std::move(comm), options);
}

}  // namespace hpc::train::dist
