// Saving and restoring state: the trainer's own checkpoints (for --resume) and Hugging Face GPT-2
// weights (model.safetensors + config.json, for --init-from and `hpctrain export`).
//
// A checkpoint is one safetensors file, DIR/ckpt_00001234.safetensors, written to a temp file
// and renamed. It holds every parameter ("model.<name>"), the AdamW moments ("adam.m.<name>",
// "adam.v.<name>"), the CPU generator's state ("rng.cpu") and, in the metadata, the step to run
// next, the optimiser's step count, the batches each rank has read, and the shapes that must
// match on resume (model config, micro-batch, sequence length, total batch, world size).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "config.h"

namespace hpc::train {

class GptImpl;
class AdamW;

struct CheckpointInfo {
  int64_t next_step = 0;      // the first step the resumed run executes
  int64_t optimizer_steps = 0;
  int64_t data_batches = 0;   // DataIterator::batches_read() of every rank
  GptConfig config;
  int64_t micro_batch = 0, seq_len = 0, total_batch_tokens = 0;
  int world = 1;
  uint64_t seed = 0;
};

// Writes DIR/ckpt_<next_step>.safetensors atomically and removes all but the newest `keep`
// checkpoints in DIR. Returns the path written.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const CheckpointInfo& info,
                                      GptImpl& model, AdamW& optimizer, int keep);

// The newest DIR/ckpt_*.safetensors, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

// Reads only the metadata of a checkpoint (to check it against the flags before loading).
CheckpointInfo read_checkpoint_info(const std::filesystem::path& file);

// Loads parameters, optimiser state and the RNG state. Throws UserError when names or shapes
// do not match the model.
void load_checkpoint(const std::filesystem::path& file, GptImpl& model, AdamW& optimizer);

// Hugging Face GPT-2: `path` is a directory holding model.safetensors and config.json, or the
// .safetensors file itself with config.json beside it.
GptConfig read_hf_config(const std::filesystem::path& path);
// Copies the weights into `model` (whose config must be read_hf_config(path)): F32, F16 or BF16;
// Conv1D weights [in, out] transposed; the "transformer." prefix, attention-mask buffers and a
// tied lm_head.weight are accepted and ignored.
void load_hf_weights(const std::filesystem::path& path, GptImpl& model);
// Writes DIR/model.safetensors (F32, HF names and layouts, no lm_head: it is tied) and
// DIR/config.json; creates DIR.
void export_hf(const std::filesystem::path& dir, GptImpl& model);
// Writes the parameters' current gradients to a safetensors file with the names and layouts of
// export_hf (for comparing with a reference implementation).
void export_gradients(const std::filesystem::path& file, GptImpl& model);

}  // namespace hpc::train
