// The ProcessGroup of the distributed strategies (ddp, zero1, zero2, fsdp) over a Communicator,
// and the one way their collectives' failures are told: c10d's own errors name a socket, so each
// becomes collective_failure's line (what failed, which ranks are gone). Only dist/ includes it.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include <c10/core/Device.h>

#include "dist/communicator.h"
#include "dist/process_group.h"

namespace hpc::train::dist {

class CommunicatorGroup final : public ProcessGroup {
 public:
  // `timeout_s` is what collectives wait (--dist-timeout), for the messages; `device` is where
  // mean_over_ranks reduces (the model's).
  CommunicatorGroup(std::unique_ptr<Communicator> comm, double timeout_s, c10::Device device)
      : comm_(std::move(comm)), timeout_s_(timeout_s), device_(device) {}

  int rank() const override { return comm_->rank(); }
  int world() const override { return comm_->world(); }
  double mean_over_ranks(double value) override {
    return checked("loss all-reduce",
                   [&] { return sum_over_ranks(*comm_, value, device_) / double(world()); });
  }
  void barrier() override { comm_->barrier(); }

  Communicator& comm() { return *comm_; }
  const Communicator& comm() const { return *comm_; }
  const c10::Device& device() const { return device_; }

  // Runs `collectives` (a callable); an exception from them becomes a std::runtime_error with
  // collective_failure's line for `what`.
  template <typename F>
  auto checked(const std::string& what, F&& collectives) -> decltype(collectives()) {
    try {
      return collectives();
    } catch (const std::exception& e) {  // Gloo rethrows its own errors (gloo::IoException)
      throw std::runtime_error(failure(what, e));
    }
  }
  // Waits for a collective in flight, as checked() tells its failure.
  void wait(Communicator::Pending& work, const std::string& what) {
    checked(what, [&] { work.wait(); });
  }

 private:
  std::string failure(const std::string& what, const std::exception& error) {
    return collective_failure(*comm_, what, timeout_s_, error);
  }

  std::unique_ptr<Communicator> comm_;
  double timeout_s_;
  c10::Device device_;
};

}  // namespace hpc::train::dist
