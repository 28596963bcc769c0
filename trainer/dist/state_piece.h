// The unit in which checkpoints save and load the training state (checkpoint.h): a piece of one
// parameter with its AdamW moments, as views of the live tensors.
#pragma once

#include <cstddef>
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace hpc::train::dist {

// Elements [offset, offset + length) of parameter `param` (index in registration order, the
// parameter read as a flat vector), as 1-D views of the live tensors, so that filling them on load
// sets the state. exp_avg/exp_avg_sq are AdamW's moments for the same elements (undefined when
// only the values are wanted: `hpctrain export`).
struct StatePiece {
  size_t param = 0;
  int64_t offset = 0;
  int64_t length = 0;
  at::Tensor value, exp_avg, exp_avg_sq;
};

}  // namespace hpc::train::dist
