// --strategy none: a world of one. Nothing to reduce; AdamW whole. ATen's Tensor suffices.
#include <optional>

#include "dist/optimizer.h"
#include "dist/strategies.h"

namespace hpc::train::dist {
namespace {

class SingleProcess final : public Strategy {
 public:
  explicit SingleProcess(const AdamWOptions& adamw) : adamw_(adamw) {}

  const char* name() const override { return "none"; }
  ProcessGroup& group() override { return group_; }
  void attach(const std::vector<at::Tensor>& params, const std::vector<std::vector<size_t>>&,
              const ParameterInit& init) override {
    if (init) throw std::logic_error("none: only a sharding strategy materialises parameters");
    optimizer_.emplace(params, adamw_, 0, 1);
  }
  bool shards_parameters() const override { return false; }
  UnitHooks* unit_hooks() override { return nullptr; }

  void set_gradient_sync(bool) override {}
  void finish_gradients() override {}
  double clip_and_step(double max_norm, double lr) override {
    return optimizer_->clip_and_step(max_norm, lr);
  }
  HeldBytes held_bytes() const override {
    HeldBytes h;
    h.optimizer = optimizer_->state_bytes();
    return h;
  }

  std::vector<StatePiece> pieces_to_save() override { return optimizer_->pieces_to_save(); }
  std::vector<StatePiece> pieces_to_load() override { return optimizer_->pieces_to_load(); }
  void after_load() override {}
  int64_t optimizer_steps() const override { return optimizer_->steps(); }
  void set_optimizer_steps(int64_t steps) override { optimizer_->set_steps(steps); }

 private:
  SingleProcessGroup group_;
  AdamWOptions adamw_;
  std::optional<ReplicatedAdamW> optimizer_;  // from attach
};

}  // namespace

std::unique_ptr<Strategy> make_single_process(const StrategyOptions& options) {
  return std::make_unique<SingleProcess>(options.adamw);
}

}  // namespace hpc::train::dist
