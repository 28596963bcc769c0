#include "dist/make_strategy.h"

#include <chrono>

#include <fmt/format.h>

#include "dist/strategies.h"
#include "error.h"

namespace hpc::train::dist {

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options, const Rendezvous& rdv) {
  if (!known_strategy(options.name)) {
    throw UserError("--strategy", fmt::format("unknown strategy '{}'", options.name),
                    "use none, ddp, zero1, zero2 or fsdp");
  }
  if (options.name == "none") {
    if (rdv.world > 1) {
      throw UserError("--strategy",
                      fmt::format("{} ranks were launched but --strategy is none", rdv.world),
                      "pass --strategy ddp, zero1, zero2 or fsdp");
    }
    return make_single_process(options);
  }
  if (options.timeout_s <= 0) throw UserError("--dist-timeout", "must be positive", "");
  const auto timeout = std::chrono::milliseconds(int64_t(options.timeout_s * 1000));
  auto comm = connect(rdv, options.device, timeout);
  if (options.name == "fsdp") return make_fsdp(std::move(comm), options);
  const Stage stage = options.name == "ddp"     ? Stage::ddp
                      : options.name == "zero1" ? Stage::zero1
                                                : Stage::zero2;
  return make_ddp(std::move(comm), options, stage);
}

}  // namespace hpc::train::dist
