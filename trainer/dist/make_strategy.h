// Which strategy --strategy names, built over the rendezvous' process group.
#pragma once

#include <memory>
#include <string>

#include "dist/rendezvous.h"
#include "dist/strategy.h"
#include "optim/optim.h"

namespace hpc::train::dist {

struct StrategyOptions {
  std::string name = "none";  // none, ddp, zero1, zero2, fsdp
  double timeout_s = 300;     // collectives and the rendezvous give up after this long
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;
  std::string device = "cpu";  // "cpu" or "cuda:N": selects Gloo or NCCL
  bool bf16_params = false;    // fsdp: gather the parameters in bf16 (--precision)
  AdamWOptions adamw;          // the optimiser every strategy builds
  // A checkpoint fills the parameters (a resume): ddp, zero1 and zero2 do not broadcast rank 0's
  // parameters when they attach (the load overwrites them on every rank).
  bool parameters_from_checkpoint = false;
};

// The names --strategy takes.
inline bool known_strategy(const std::string& name) {
  return name == "none" || name == "ddp" || name == "zero1" || name == "zero2" || name == "fsdp";
}

// Connects to the other ranks (TCPStore at the rendezvous' master, then the process group) and
// returns the strategy; "none" with a world of one needs no connection. Throws UserError for an
// unknown name or a world > 1 without a distributed strategy.
std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options, const Rendezvous& rdv);

}  // namespace hpc::train::dist
