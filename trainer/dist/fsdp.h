// Fully sharded data parallel (ZeRO-3) over the model's units; built by make_strategy (ddp.cc).
#pragma once

#include <memory>

#include "dist/communicator.h"
#include "dist/strategy.h"

namespace hpc::train::dist {

std::unique_ptr<Strategy> make_fsdp(std::unique_ptr<Communicator> comm, const StrategyOptions& options);

}  // namespace hpc::train::dist
