// The strategies make_strategy (make_strategy.cc) chooses from; only it includes this header.
#pragma once

#include <memory>

#include "dist/communicator.h"
#include "dist/make_strategy.h"
#include "dist/strategy.h"

namespace hpc::train::dist {

// none: a world of one, AdamW whole (single_process.cc).
std::unique_ptr<Strategy> make_single_process(const StrategyOptions& options);

// How much of the training state each rank of the bucketed reducer keeps to itself (ddp.cc).
enum class Stage { ddp = 0, zero1 = 1, zero2 = 2 };
std::unique_ptr<Strategy> make_ddp(std::unique_ptr<Communicator> comm,
                                   const StrategyOptions& options, Stage stage);

// Fully sharded data parallel (ZeRO-3) over the model's units (fsdp.cc).
std::unique_ptr<Strategy> make_fsdp(std::unique_ptr<Communicator> comm,
                                    const StrategyOptions& options);

}  // namespace hpc::train::dist
