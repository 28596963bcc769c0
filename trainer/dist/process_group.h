// What checkpoints and the training loop's reports need of the other ranks: who this rank is, how
// many there are, a barrier, and the mean of a number. No LibTorch: dist/ implements it over c10d
// (CommunicatorGroup), and a world of one needs nothing.
#pragma once

namespace hpc::train::dist {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Mean of a scalar over ranks (losses for the log and the validation loss).
  virtual double mean_over_ranks(double value) = 0;
  virtual void barrier() = 0;
  // True on every rank when it is true on any (a stop request seen by some ranks only).
  bool any_rank(bool value) { return mean_over_ranks(value ? 1.0 : 0.0) > 0.0; }
};

// A world of one: nothing to meet.
class SingleProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  double mean_over_ranks(double value) override { return value; }
  void barrier() override {}
};

}  // namespace hpc::train::dist
