// The manifest of a sharded checkpoint and the arithmetic of its pieces. No LibTorch here:
// checkpoint.cc does the tensor work; this is what the unit tests reach in seconds.
//
// A checkpoint is a directory DIR/step_00001234 (1234: the step the resumed run executes first):
//   manifest.json          this struct as JSON (format "hpctrain-checkpoint-2")
//   rank00000.safetensors  the pieces saved by rank 0: "value.K", "exp_avg.K", "exp_avg_sq.K" for
//   rank00001.safetensors  the K-th entry of that file's piece list, F32 1-D; rank 0's file also
//   ...                    holds the CPU generator state ("rng.cpu")
// A piece is elements [offset, offset + length) of parameter `param` (registration order) read as
// a flat vector. Over all files the pieces cover every element of every parameter exactly once,
// whatever the world size that wrote them, so a run with another world size reads its own pieces
// from whichever files overlap them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"

namespace hpc::train {

struct PieceRef {
  size_t param = 0;
  int64_t offset = 0;
  int64_t length = 0;
  bool operator==(const PieceRef& o) const {
    return param == o.param && offset == o.offset && length == o.length;
  }
};

struct ParamShape {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel() const;
  bool operator==(const ParamShape& o) const { return name == o.name && shape == o.shape; }
};

// Where one rank's DataIterator stood (its next read): shard index and token offset.
struct DataPosition {
  int64_t shard = 0;
  int64_t position = 0;
};

// One rank's file: what it holds and how to check that it is whole.
struct ShardFile {
  std::string name;  // rank00003.safetensors, relative to the checkpoint directory
  int rank = 0;
  uint64_t bytes = 0;
  // SHA-256, hex: with chunk_bytes > 0, chunk_sha256[k] is that of bytes [k, k + 1) *
  // chunk_bytes (the last chunk shorter) and sha256 that of the chunk digests concatenated
  // (sha256_of_chunks); with chunk_bytes 0 (manifests before chunks) sha256 is the whole file's.
  std::string sha256;
  uint64_t chunk_bytes = 0;
  std::vector<std::string> chunk_sha256;
  std::vector<PieceRef> pieces;
  DataPosition data;  // the writing rank's data position
};

struct Manifest {
  int64_t next_step = 0;        // the first step the resumed run executes
  int64_t optimizer_steps = 0;  // AdamW's step count (bias correction)
  std::string strategy;         // that wrote it (information: any strategy may load it)
  int world = 1;
  GptConfig config;
  int64_t micro_batch = 0, seq_len = 0, total_batch_tokens = 0;
  uint64_t seed = 0;
  int64_t tokens_consumed = 0;       // global: next_step * total_batch_tokens
  std::string rng_file, rng_tensor;  // the CPU generator's state: a U8 tensor in one of the files
  std::vector<ParamShape> params;
  std::vector<ShardFile> files;  // one per rank, by rank
};

inline constexpr const char* kCheckpointFormat = "hpctrain-checkpoint-2";

std::string checkpoint_dir_name(int64_t step);  // step_00001234
// The step of a checkpoint directory's name, or nothing when the name is not step_<digits>.
std::optional<int64_t> checkpoint_step(const std::string& dir_name);
std::string shard_file_name(int rank);  // rank00003.safetensors

std::string manifest_to_json(const Manifest& m);
// Throws hpc::UserError naming `where` (the file) and the key for malformed JSON, missing keys,
// pieces outside their parameter, or pieces that do not cover every element exactly once.
Manifest parse_manifest(const std::string& text, const std::string& where);

// A rank's description of its file (the sidecar rank 0 collects into the manifest).
std::string shard_file_to_json(const ShardFile& f);
ShardFile parse_shard_file(const std::string& text, const std::string& where);

// Elements [src_offset, src_offset + length) of piece `piece` of file `file` are elements
// [dst_offset, dst_offset + length) of the requested range.
struct Overlap {
  size_t file = 0;
  size_t piece = 0;
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  int64_t length = 0;
};
// The saved pieces holding elements [offset, offset + length) of parameter `param`, ordered by
// dst_offset. Throws hpc::UserError naming `where` when some element is in none of them.
std::vector<Overlap> overlaps(const Manifest& m, const PieceRef& want, const std::string& where);

// Every element of every parameter in exactly one piece; throws hpc::UserError otherwise.
void check_coverage(const Manifest& m, const std::string& where);

}  // namespace hpc::train
