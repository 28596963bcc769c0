// Reading a checkpoint shard in one pass: the file streams from the disk in order, every byte goes
// through SHA-256, and the byte ranges a caller asked for are handed over as they pass (or read
// straight into their destination), so the shard is verified while it is loaded and never held
// whole in memory. The file is hashed in chunks of a fixed size (the manifest's chunk_bytes),
// each chunk's SHA-256 on its own thread while the next chunks are read, so that hashing uses
// every core; a file of an older manifest (one SHA-256 of the whole file) is hashed in order.
// No LibTorch.
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
// range is (n is a multiple of `unit` except perhaps for the range's last piece). With `direct`
// set, the bytes are read straight into direct[0, end - begin) instead, and `take` is not called.
struct ByteRange {
  uint64_t begin = 0, end = 0;
  std::function<void(uint64_t at, const char* p, size_t n)> take;
  char* direct = nullptr;
  size_t unit = 1;  // the element size: pieces handed to take are whole elements
};

// The file's SHA-256 (hex): of each chunk of chunk_bytes (the last one shorter), or, with
// chunk_bytes 0, of the whole file in `sha256`; its size, the CPU seconds SHA-256 took (on other
// threads, beside the reads; summed over them) and the seconds the reader waited for it.
struct ShardDigest {
  std::string sha256;
  std::vector<std::string> chunk_sha256;
  uint64_t bytes = 0;
  double hash_seconds = 0, hash_wait_seconds = 0;
};

class ShardReader {
 public:
  // Opens `path` and reads (and hashes) its header. Throws hpc::UserError naming the file for a
  // missing file or a header that is not a safetensors header. chunk_bytes: the size of the
  // chunks hashed on their own (the manifest's), or 0 for one SHA-256 of the whole file.
  explicit ShardReader(const std::filesystem::path& path, uint64_t chunk_bytes = 0);
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;
  ~ShardReader();

  const std::map<std::string, TensorEntry>& tensors() const { return tensors_; }

  // Reads the file to its end, hashing every byte (the header again: it must be the one parsed)
  // and handing each range (disjoint; any order) to its taker or reading it into its `direct`
  // memory. Once only. Throws hpc::UserError when the file ends before a range.
  ShardDigest read_all(std::vector<ByteRange> ranges);

  // Reads only the byte ranges (disjoint; any order), not hashed: the ranges a rank needs from a
  // file that another rank verifies whole (read_all). Ranges go to their `direct` memory or their
  // taker as in read_all. Throws hpc::UserError when the file ends before a range.
  void read_ranges(std::vector<ByteRange> ranges) const;

  // One tensor's bytes read on their own, not hashed (the RNG state a rank needs from a file that
  // another rank verifies). Throws hpc::UserError when the file is shorter.
  std::string read_unverified(const TensorEntry& t) const;

 private:
  // Up to n bytes from file offset `at`, fewer only at the end of the file.
  size_t read_at(char* p, size_t n, uint64_t at) const;
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t chunk_bytes_ = 0;
  std::string header_;  // the file's first data_start_ bytes, as parsed
  uint64_t data_start_ = 0;
  uint64_t data_bytes_ = 0;
  std::map<std::string, TensorEntry> tensors_;
};

}  // namespace hpc::train
