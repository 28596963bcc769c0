// The size arithmetic of bench-allreduce: no LibTorch.
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "dist/bench_allreduce.h"
#include "error.h"

namespace hpc::train {

int64_t parse_byte_size(const std::string& flag, const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return UserError(flag, fmt::format("'{}' {}", text, why),
                     "give bytes like 1024, 64K, 16M or 1G");
  };
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) throw bad("is not a size");
  errno = 0;
  const unsigned long long n = std::strtoull(text.substr(0, i).c_str(), nullptr, 10);
  if (errno != 0) throw bad("is too large");
  std::string suffix = text.substr(i);
  for (auto& c : suffix) c = char(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (!suffix.empty() && (suffix[0] == 'K' || suffix[0] == 'M' || suffix[0] == 'G')) {
    shift = suffix[0] == 'K' ? 10 : suffix[0] == 'M' ? 20 : 30;
    suffix.erase(0, 1);
    if (suffix == "IB") suffix = "B";
  }
  if (!suffix.empty() && suffix != "B") throw bad("has an unknown unit (K, M, G)");
  constexpr unsigned long long kMax = 1ULL << 40;
  if (n > (kMax >> shift)) throw bad("is larger than 1T");
  if (n == 0) throw bad("is zero");
  return int64_t(n << shift);
}

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
