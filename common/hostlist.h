// Slurm host lists: "node[01-03,7],gpu-a[1-2]" <-> node01 node02 node03 node7 gpu-a1 gpu-a2.
// Shared by the launcher and the trainer (which computes MASTER_ADDR from SLURM_JOB_NODELIST).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hpc {

struct HostList {
  // Expands a host list expression, keeping order and duplicates as `scontrol show hostnames`
  // does. Several bracket groups form a Cartesian product in Slurm's order: for groups G1..Gn,
  // G(n-1) varies slowest, then G(n-2) ... G1, and Gn fastest (left-most slowest for two
  // groups: a[1-2]b[3-4] -> a1b3 a1b4 a2b3 a2b4; a[1-2]b[1-2]c[1-2] -> a1b1c1 a1b1c2 a2b1c1 ...); a
  // range is zero-padded to the width of its low bound. Whatever `scontrol show hostnames`
  // rejects is rejected, text after an item's last bracket included ("n[1,2]x"). Throws
  // hpc::UserError naming the column on bad input (unbalanced brackets, lo > hi, empty range,
  // non-digits in a range, text after the last bracket).
  static std::vector<std::string> expand(std::string_view expr);

  // The inverse: a compact expression whose expansion is exactly `hosts`, in order.
  static std::string compress(const std::vector<std::string>& hosts);
};

}  // namespace hpc
