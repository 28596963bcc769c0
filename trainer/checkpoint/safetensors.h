// The safetensors file format (Hugging Face), read by mapping and written atomically. No LibTorch:
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
#include <vector>

namespace hpc::train {

struct TensorBytes {
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

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

// Writes the tensors (in the given order) to `path` via a temp file and rename. Returns the
// SHA-256 (hex) of the bytes written.
std::string write_safetensors(const std::filesystem::path& path,
                              const std::vector<std::pair<std::string, TensorBytes>>& tensors,
                              const std::map<std::string, std::string>& metadata);

}  // namespace hpc::train
