#include "byte_size.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "error.h"

namespace hpc {

int64_t parse_byte_size(const std::string& flag, const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return UserError(flag, "'" + text + "' " + why, "give bytes like 1024, 64K, 16M or 1G");
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

}  // namespace hpc
