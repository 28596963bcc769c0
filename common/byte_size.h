// Byte sizes as people write them on a command line: "1024", "64K", "16M", "1G".
#pragma once

#include <cstdint>
#include <string>

namespace hpc {

// "1024", "1K", "4M", "1G", "2KB", "8MiB" -> bytes (K = 1024). Throws UserError naming `flag`
// for anything else (a sign, a blank, a fraction), zero, or more than 2^40. hpclaunch tune checks
// its --min and --max with it before submitting anything; hpctrain bench-allreduce parses them.
int64_t parse_byte_size(const std::string& flag, const std::string& text);

}  // namespace hpc
