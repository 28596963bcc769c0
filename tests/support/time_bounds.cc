#include "support/time_bounds.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace hpc::test {

double slowdown_factor() {
  const char* text = std::getenv("HPC_TEST_SLOWDOWN");
  if (!text || !*text) return 1.0;
  char* end = nullptr;
  const double f = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(f >= 1.0)) return 1.0;
  return std::min(f, 100.0);
}

std::chrono::milliseconds scaled(std::chrono::milliseconds bound) {
  return std::chrono::milliseconds(static_cast<long long>(bound.count() * slowdown_factor()));
}

}  // namespace hpc::test
