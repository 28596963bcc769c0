// Reading a checkpoint shard in one pass: the file streams from the disk in order, every byte goes
// through SHA-256, and the byte ranges a caller asked for are handed over as they pass, so the
// shard is verified while it is loaded and never held whole in memory. No LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "sha256.h"

namespace hpc::train {

// Bytes [begin, end) of the data section (TensorEntry offsets) and what takes them: take(at, p, n)
// gets n bytes from `at` bytes into the range, in order, in pieces of whole elements when the
// range is (n is a multiple of 8 except perhaps for the range's last piece).
struct ByteRange {
  uint64_t begin = 0, end = 0;
  std::function<void(uint64_t at, const char* p, size_t n)> take;
};

// The whole file's SHA-256 (hex), its size, the seconds SHA-256 took (on a second thread, beside
// the reads) and the seconds the reader waited for it.
struct ShardDigest {
  std::string sha256;
  uint64_t bytes = 0;
  double hash_seconds = 0, hash_wait_seconds = 0;
};

class ShardReader {
 public:
  // Opens `path` and reads (and hashes) its header. Throws hpc::UserError naming the file for a
  // missing file or a header that is not a safetensors header.
  explicit ShardReader(const std::filesystem::path& path);
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;
  ~ShardReader();

  const std::map<std::string, TensorEntry>& tensors() const { return tensors_; }

  // Reads the rest of the file to its end, hashing every byte and handing each range (disjoint;
  // any order) to its taker. Once only. Throws hpc::UserError when the file ends before a range.
  ShardDigest read_all(std::vector<ByteRange> ranges);

  // One tensor's bytes read on their own, not hashed (the RNG state a rank needs from a file that
  // another rank verifies). Throws hpc::UserError when the file is shorter.
  std::string read_unverified(const TensorEntry& t) const;

 private:
  void read_exact(char* p, size_t n);
  size_t read_some(char* p, size_t n);  // up to n bytes, fewer only at the end of the file
  void hash(const char* p, size_t n);
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  uint64_t data_bytes_ = 0;
  std::map<std::string, TensorEntry> tensors_;
  Sha256 sha_;
  ShardDigest digest_;
};

}  // namespace hpc::train
