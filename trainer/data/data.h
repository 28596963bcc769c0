// Token data: memory-mapped shards and the workshops' DataIterator over them.
//
// Formats (chosen by --data-format, or by the file name when "auto"):
//   .npy   build-nanogpt shards: NumPy array, dtype '<u2', one dimension (np.save of uint16
//   tokens). .bin   llm.c shards: 256 x int32 little-endian header (magic 20240520, version 1,
//   token
//          count), then the tokens as uint16. A .bin without that magic is read as headerless
//          uint16 tokens (size must be even).
//   .txt   plain text; the byte-level tokenizer maps each byte to one token (vocabulary 256).
// No LibTorch here; the training loop wraps the int64 window it gets in a tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace hpc::train {

enum class TokenFormat { kAuto, kNpy, kLlmc, kU16, kText };

// "auto", "npy", "llmc", "u16", "text"; throws UserError for anything else.
TokenFormat parse_token_format(const std::string& name);
const char* token_format_name(TokenFormat f);

// One shard, checked (header, size) when opened and mapped read-only; no copy of the tokens.
class TokenFile {
 public:
  // Throws hpc::UserError "PATH: what was wrong; what to do" for a missing file, an unknown
  // extension under kAuto, a bad magic/version/dtype/shape, or a size that does not match.
  static TokenFile open(const std::filesystem::path& path, TokenFormat format = TokenFormat::kAuto);

  TokenFile(TokenFile&&) noexcept;
  TokenFile& operator=(TokenFile&&) noexcept;
  ~TokenFile();

  const std::filesystem::path& path() const { return path_; }
  TokenFormat format() const { return format_; }
  size_t size() const { return count_; }  // tokens
  uint32_t at(size_t i) const;
  // Copies tokens [offset, offset + n) widened to int64; the range must be inside the file.
  void copy_to(size_t offset, size_t n, int64_t* out) const;
  // Largest token id in the file (one pass over the mapping).
  uint32_t max_token() const;
  // Throws UserError when some token is >= vocab_size.
  void check_vocab(int64_t vocab_size) const;

 private:
  TokenFile() = default;
  std::filesystem::path path_;
  TokenFormat format_ = TokenFormat::kAuto;
  const unsigned char* map_ = nullptr;  // whole file
  size_t map_bytes_ = 0;
  size_t data_offset_ = 0;  // bytes before the first token
  size_t width_ = 2;        // bytes per token: 2 (uint16) or 1 (text)
  size_t count_ = 0;
};

// The shards under `data`: the file itself, or the files of a directory whose names contain
// `split` ("train", "val"), sorted by name. Throws UserError when there are none.
std::vector<std::filesystem::path> list_shards(const std::filesystem::path& data,
                                               const std::string& split);

// build-nanogpt's DataLoaderLite, in C++: rank r reads B*T+1 tokens at offset B*T*r of the current
// shard, then every rank advances by B*T*world; when the next read of the whole world would pass
// the end of the shard, it moves to the next shard (wrapping) and starts again at B*T*r.
class DataIterator {
 public:
  // Opens (checks) every shard; each must hold at least B*T*world + 1 tokens. Tokens are checked
  // against vocab_size when a shard is mapped for reading (the first one here).
  DataIterator(std::vector<std::filesystem::path> shards, TokenFormat format, int64_t B, int64_t T,
               int rank, int world, int64_t vocab_size);

  // Fills `window` with the B*T+1 tokens of the next batch: inputs are window[0, B*T), targets
  // window[1, B*T+1), both read as [B, T].
  void next(std::vector<int64_t>& window);

  // Back to shard 0, offset B*T*rank.
  void reset();
  // Moves as if next() had been called `batches` more times, without reading tokens (resume).
  void skip(int64_t batches);
  // Resume: the next read starts at token `position` of shard `shard` (a position a checkpoint
  // recorded; with another world size or micro-batch, rank 0's position + B*T*rank), moving on
  // to the next shard when the world's next read would pass its end, as next() does. Throws
  // UserError when the shard or position does not exist in these shards.
  void seek(int64_t shard, int64_t position);

  int64_t batches_read() const { return batches_; }
  int64_t shard() const { return shard_; }
  int64_t position() const { return position_; }
  size_t shard_count() const { return sizes_.size(); }

 private:
  void advance();  // the position update of one batch
  void map_current();

  std::vector<std::filesystem::path> paths_;
  std::vector<size_t> sizes_;
  TokenFormat format_;
  int64_t B_, T_;
  int rank_, world_;
  int64_t vocab_size_;
  int64_t shard_ = 0;
  int64_t position_ = 0;
  int64_t batches_ = 0;
  std::unique_ptr<TokenFile> current_;  // mapped lazily: next() maps, skip() only counts
  int64_t mapped_shard_ = -1;
};

}  // namespace hpc::train
