// Saving and restoring state: the trainer's own sharded checkpoints (for --resume and
// `hpctrain export`) and Hugging Face GPT-2 weights (model.safetensors + config.json, for
// --init-from and `hpctrain export`).
//
// A checkpoint is a directory DIR/step_00001234 (checkpoint/manifest.h has the layout): every rank
// writes its pieces of the state (parameters and AdamW moments, dist::StatePiece) to its own
// safetensors file, rank 0 writes manifest.json, all of it into DIR/step_00001234.tmp, renamed
// whole once every rank's file is there. Loading fills any ranks' pieces from whichever files
// hold them, so the world size and the strategy may change between save and resume.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "model/config.h"

namespace hpc::train {

class GptImpl;
namespace dist {
class ProcessGroup;
struct StatePiece;
}  // namespace dist

// The model's parameters as a checkpoint records them (registration order).
std::vector<ParamShape> param_layout(GptImpl& model);

// Collective over `group`: every rank calls it with its own pieces (Strategy::pieces_to_save())
// and data position. `info` has everything but the files; the world
// size and the files are filled here. Writes DIR/step_<info.next_step> (replacing one of that
// name), then removes all but the newest `keep` checkpoints in DIR (keep <= 0: none). Returns the
// checkpoint's directory and (on rank 0) the bytes of all its files.
struct SavedCheckpoint {
  std::filesystem::path dir;
  uint64_t bytes = 0;
  // This rank's CPU seconds in SHA-256 (on other threads, beside the writes) and seconds waiting
  // for it.
  double hash_seconds = 0, hash_wait_seconds = 0;
  // This rank's shard went through the page cache: its file system refused O_DIRECT.
  bool page_cache = false;
};
SavedCheckpoint save_checkpoint(const std::filesystem::path& dir, Manifest info,
                                const std::vector<dist::StatePiece>& pieces,
                                const DataPosition& data, dist::ProcessGroup& group, int keep);

// The checkpoints in DIR (step_<digits> directories holding a manifest.json), newest first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir);
// What --resume PATH / export --from PATH names: a checkpoint directory (itself only) or a
// directory of checkpoints (all of them, newest first). Empty when it names none.
std::vector<std::filesystem::path> checkpoints_at(const std::filesystem::path& path);

// Whether DIR holds checkpoints of the earlier single-file format (ckpt_<step>.safetensors),
// which are not read (a resume says so instead of starting afresh in silence).
bool has_single_file_checkpoints(const std::filesystem::path& dir);

// Reads and checks DIR/manifest.json; throws UserError naming the file.
Manifest read_manifest(const std::filesystem::path& checkpoint_dir);

struct Checkpoint {
  std::filesystem::path dir;
  Manifest manifest;
  // This rank's seconds reading the files, its CPU seconds in SHA-256 (on other threads, beside
  // the reads; summed over them) and seconds waiting for it; the CPU seconds (user + system, all
  // threads) the process spent meanwhile, which a busy machine's other processes do not change.
  double read_seconds = 0, hash_seconds = 0, hash_wait_seconds = 0, read_cpu_seconds = 0;
};

// What a rank fills from a checkpoint, decided once its manifest is read: the strategy's
// pieces_to_load(), or whole parameters without moments (export). It may throw UserError to
// refuse the checkpoint (another model, another batch shape): the same on every rank.
using PiecesFor = std::function<std::vector<dist::StatePiece>(const Checkpoint&)>;

// Collective over `group`: loads the first of `candidates` (newest first) that is whole into the
// pieces `pieces_for` gives, and restores the CPU generator's state. Whole: the manifest reads,
// every file is there with its size (checked before anything is read), and every file's SHA-256,
// computed while it is read, is the manifest's. File i is verified by rank i mod W, which names it
// when it is damaged: it streams the whole file from the disk, hashes it on the way
// (checkpoint/shard_reader.h) and reads its own pieces straight from the stream; a rank that
// needs pieces of a file another rank verifies reads only their bytes, after its own files. Every
// rank agrees on the choice. For each checkpoint skipped, one warning line on stderr per bad file
// names it and what is wrong with it. Nothing when none is whole.
std::optional<Checkpoint> load_checkpoint(const std::vector<std::filesystem::path>& candidates,
                                          const PiecesFor& pieces_for, dist::ProcessGroup& group);

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
