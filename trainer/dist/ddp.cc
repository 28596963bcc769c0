// Strategies over c10d. (DDP lands in a following change; for now a world of one.)
#include <fmt/format.h>

#include "dist/strategy.h"
#include "error.h"

namespace hpc::train::dist {

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options, const Rendezvous& rdv) {
  if (options.name == "none") {
    if (rdv.world > 1) {
      throw UserError("--strategy", fmt::format("{} ranks were launched but --strategy is none", rdv.world),
                      "pass --strategy ddp");
    }
    return std::make_unique<SingleProcess>();
  }
  throw UserError("--strategy", fmt::format("unknown strategy '{}'", options.name), "use none or ddp");
}

}  // namespace hpc::train::dist
