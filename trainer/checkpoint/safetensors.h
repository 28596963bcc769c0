// The safetensors file format (Hugging Face), read by mapping (or streamed: shard_reader.h) and
// written atomically, hashed as it is written. No LibTorch:
// tensors are named byte ranges with a dtype and a shape; checkpoint.cc turns them into tensors.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F32", "shape": [768, 2304], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"format": "pt"}}
// then the data; offsets count from the first byte after the header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpc::train {

struct TensorBytes {
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// A tensor's entry in the header: bytes [begin, end) of the data, which starts after the header.
struct TensorEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// The header's tensors (`json`: the N header bytes; `data_bytes`: the bytes after them). Throws
// hpc::UserError naming `where` for a header that is not JSON, a malformed entry, offsets outside
// the data, or a byte count that does not fit the shape and dtype.
std::map<std::string, TensorEntry> parse_safetensors_header(std::string_view json,
                                                            uint64_t data_bytes,
                                                            const std::string& where);
// N from the first 8 bytes (little-endian).
uint64_t safetensors_header_length(const unsigned char* first8);

class SafetensorsFile {
 public:
  // Throws hpc::UserError naming the file for a missing file, a header that is not JSON, or
  // offsets that do not fit the file.
  static SafetensorsFile open(const std::filesystem::path& path);
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) = delete;
  ~SafetensorsFile();

  const std::map<std::string, TensorBytes>& tensors() const { return tensors_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  std::map<std::string, TensorBytes> tensors_;
};

size_t dtype_size(const std::string& dtype);  // 0 for unknown

// The size of the chunks a checkpoint file is hashed in (each chunk its own SHA-256, so that
// chunks hash on several cores; the manifest records it).
constexpr uint64_t kShardChunkBytes = uint64_t(64) << 20;

// How many chunks hash at once: the cores, at least 2, at most kMaxHashLanes (8 chunks hash at
// over 10 GB/s, faster than a disk; a reader holds up to that many 64 MiB buffers).
constexpr size_t kMaxHashLanes = 8;
size_t hash_lanes();
// The CPU seconds of the calling thread so far: what hashing costs, which other processes on a
// busy machine do not inflate (they only make it wait, which the wait seconds show).
double thread_cpu_seconds();

// The SHA-256 (hex) of the file's bytes in chunks of chunk_bytes (the last one shorter), hashed
// on hash_lanes() threads; and the CPU seconds they took, summed over the threads.
std::pair<std::vector<std::string>, double> sha256_chunks(
    const std::vector<std::string_view>& parts, uint64_t chunk_bytes);
// The digest naming a chunked file as a whole: SHA-256 of its chunks' hex digests, concatenated.
std::string sha256_of_chunks(const std::vector<std::string>& chunk_sha256);

// What write_safetensors wrote: the SHA-256 (hex) of each chunk of kShardChunkBytes and of
// those (sha256_of_chunks), its size, the CPU seconds SHA-256 took (on other threads, summed) and
// the seconds the writer waited for it after the fsync.
struct WrittenFile {
  std::string sha256;
  std::vector<std::string> chunk_sha256;
  uint64_t bytes = 0;
  double hash_seconds = 0, hash_wait_seconds = 0;
  bool page_cache = false;  // the file system refused O_DIRECT: written through the page cache
};

// Writes the tensors (in the given order) straight from their memory to `path` via a temp file,
// fsync and rename, and hashes the same bytes meanwhile on other threads: no copy of the whole
// file, no second pass over it.
WrittenFile write_safetensors(const std::filesystem::path& path,
                              const std::vector<std::pair<std::string, TensorBytes>>& tensors,
                              const std::map<std::string, std::string>& metadata);

}  // namespace hpc::train
