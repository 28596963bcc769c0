// The size arithmetic of bench-allreduce: no LibTorch (sizes are parsed by common/byte_size.h).
#include <fmt/format.h>

#include "dist/bench_allreduce.h"
#include "error.h"

namespace hpc::train {

std::vector<int64_t> bench_sizes(int64_t min, int64_t max, int64_t factor, int64_t element_size) {
  if (factor < 2) throw UserError("--factor", fmt::format("{} is less than 2", factor), "");
  if (min > max) {
    throw UserError("--min", fmt::format("{} bytes is more than --max {} bytes", min, max), "");
  }
  if (min < element_size) {
    throw UserError(
        "--min", fmt::format("{} bytes is less than one {}-byte element", min, element_size), "");
  }
  std::vector<int64_t> sizes;
  for (int64_t s = min; s <= max; s *= factor) {
    sizes.push_back(s);
    if (s > max / factor) break;  // the next one would pass max (or overflow)
  }
  return sizes;
}

double allreduce_bus_factor(int world) { return world > 0 ? 2.0 * (world - 1) / world : 0.0; }

}  // namespace hpc::train
