#include "data/data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>

#include <fmt/format.h>

#include "error.h"

namespace hpc::train {
namespace fs = std::filesystem;

namespace {

constexpr int32_t kLlmcMagic = 20240520;  // llm.c token shards
constexpr int32_t kLlmcVersion = 1;
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);
// Other llm.c files (model checkpoints 20240326/20240327, debug states 20240327): refuse them by
// name rather than reading their floats as tokens.
constexpr int32_t kLlmcOtherMagics[] = {20240326, 20240327};

int32_t read_i32le(const unsigned char* p) {
  return static_cast<int32_t>(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                              uint32_t(p[3]) << 24);
}

UserError bad(const fs::path& path, const std::string& what, const std::string& fix) {
  return UserError(path.string(), what, fix);
}

// Parses the header dict of a .npy file: {'descr': '<u2', 'fortran_order': False, 'shape': (N,), }
size_t parse_npy_header(const fs::path& path, const std::string& header) {
  std::smatch m;
  static const std::regex descr(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex fortran(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape(R"('shape'\s*:\s*\(\s*(\d+)\s*,?\s*\))");
  if (!std::regex_search(header, m, descr)) {
    throw bad(path, "NumPy header has no 'descr'", "write shards with np.save of a uint16 array");
  }
  const std::string d = m[1];
  if (d != "<u2" && d != "|u2" && d != "=u2") {
    throw bad(path, fmt::format("NumPy dtype '{}' is not uint16 ('<u2')", d),
              "save tokens as np.uint16 (build-nanogpt's format)");
  }
  if (std::regex_search(header, m, fortran) && m[1] == "True") {
    throw bad(path, "NumPy array is Fortran-ordered", "save a one-dimensional array");
  }
  if (!std::regex_search(header, m, shape)) {
    throw bad(path, "NumPy array is not one-dimensional", "save a flat array of tokens");
  }
  return static_cast<size_t>(std::stoull(m[1].str()));
}

TokenFormat format_from_name(const fs::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".npy") return TokenFormat::kNpy;
  if (ext == ".bin") return TokenFormat::kLlmc;  // or headerless: decided by the magic
  if (ext == ".txt" || ext == ".text") return TokenFormat::kText;
  if (ext == ".u16") return TokenFormat::kU16;
  throw bad(path, fmt::format("cannot tell the token format from the extension '{}'", ext),
            "name it .npy, .bin or .txt, or pass --data-format npy|llmc|u16|text");
}

}  // namespace

TokenFormat parse_token_format(const std::string& name) {
  if (name == "auto") return TokenFormat::kAuto;
  if (name == "npy") return TokenFormat::kNpy;
  if (name == "llmc") return TokenFormat::kLlmc;
  if (name == "u16") return TokenFormat::kU16;
  if (name == "text") return TokenFormat::kText;
  throw UserError("--data-format", fmt::format("unknown format '{}'", name),
                  "use auto, npy, llmc, u16 or text");
}

const char* token_format_name(TokenFormat f) {
  switch (f) {
    case TokenFormat::kAuto:
      return "auto";
    case TokenFormat::kNpy:
      return "npy";
    case TokenFormat::kLlmc:
      return "llmc";
    case TokenFormat::kU16:
      return "u16";
    case TokenFormat::kText:
      return "text";
  }
  return "?";
}

TokenFile TokenFile::open(const fs::path& path, TokenFormat format) {
  TokenFile f;
  f.path_ = path;
  const bool guessed = format == TokenFormat::kAuto;
  if (guessed) format = format_from_name(path);

  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw bad(path, fmt::format("cannot open token file: {}", std::strerror(errno)),
              "check --data");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw bad(path, "not a regular file", "point --data at a token file or a directory of shards");
  }
  f.map_bytes_ = static_cast<size_t>(st.st_size);
  if (f.map_bytes_ > 0) {
    void* p = ::mmap(nullptr, f.map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw bad(path, fmt::format("cannot map the file: {}", std::strerror(e)), "");
    }
    ::madvise(p, f.map_bytes_, MADV_SEQUENTIAL);
    f.map_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping keeps the file
  const size_t n = f.map_bytes_;
  // A .bin without llm.c's magic is headerless uint16, unless its header is laid out like an
  // llm.c shard's (version 1 and a token count that matches the size): then the magic is wrong.
  if (guessed && format == TokenFormat::kLlmc &&
      (n < 4 || (read_i32le(f.map_) != kLlmcMagic &&
                 std::find(std::begin(kLlmcOtherMagics), std::end(kLlmcOtherMagics),
                           read_i32le(f.map_)) == std::end(kLlmcOtherMagics)))) {
    const bool llmc_layout = n >= kLlmcHeaderBytes && read_i32le(f.map_ + 4) == kLlmcVersion &&
                             read_i32le(f.map_ + 8) >= 0 &&
                             kLlmcHeaderBytes + 2 * size_t(read_i32le(f.map_ + 8)) == n;
    if (!llmc_layout) format = TokenFormat::kU16;
  }

  switch (format) {
    case TokenFormat::kNpy: {
      // Magic "\x93NUMPY", major, minor, header length (uint16 in v1, uint32 in v2/v3), header.
      static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
      if (n < 10 || std::memcmp(f.map_, magic, 6) != 0) {
        throw bad(path, "not a NumPy .npy file (bad magic)",
                  "write shards with np.save, or pass --data-format for other formats");
      }
      const int major = f.map_[6];
      size_t hlen = 0, hstart = 0;
      if (major == 1) {
        hlen = size_t(f.map_[8]) | size_t(f.map_[9]) << 8;
        hstart = 10;
      } else if (major == 2 || major == 3) {
        if (n < 12) throw bad(path, "truncated NumPy header", "");
        hlen = uint32_t(read_i32le(f.map_ + 8));
        hstart = 12;
      } else {
        throw bad(path, fmt::format("unsupported NumPy format version {}", major), "");
      }
      if (hstart + hlen > n) throw bad(path, "truncated NumPy header", "the file is cut short");
      const std::string header(reinterpret_cast<const char*>(f.map_ + hstart), hlen);
      f.count_ = parse_npy_header(path, header);
      f.data_offset_ = hstart + hlen;
      f.width_ = 2;
      if (f.data_offset_ + 2 * f.count_ != n) {
        throw bad(
            path,
            fmt::format("size {} bytes does not match {} uint16 tokens after a {}-byte header", n,
                        f.count_, f.data_offset_),
            "the file is truncated or not a token shard");
      }
      break;
    }
    case TokenFormat::kLlmc: {
      const int32_t magic = n >= 4 ? read_i32le(f.map_) : 0;
      if (magic != kLlmcMagic) {
        for (int32_t other : kLlmcOtherMagics) {
          if (magic == other) {
            throw bad(path, fmt::format("llm.c file with magic {} is not a token shard", magic),
                      "llm.c token shards start with 20240520");
          }
        }
        throw bad(path,
                  fmt::format("bad magic {} (llm.c token shards start with {})", magic, kLlmcMagic),
                  "pass --data-format u16 for headerless uint16 tokens");
      }
      if (n < kLlmcHeaderBytes) throw bad(path, "truncated llm.c header (< 1024 bytes)", "");
      const int32_t version = read_i32le(f.map_ + 4);
      if (version != kLlmcVersion) {
        throw bad(path, fmt::format("llm.c shard version {} is not supported", version),
                  "version 1 (uint16 tokens) is");
      }
      const int32_t ntok = read_i32le(f.map_ + 8);
      if (ntok < 0 || kLlmcHeaderBytes + 2 * size_t(ntok) != n) {
        throw bad(path,
                  fmt::format("header says {} tokens but the file has {} bytes (expected {})", ntok,
                              n, kLlmcHeaderBytes + 2 * size_t(ntok)),
                  "the file is truncated or its header is wrong");
      }
      f.data_offset_ = kLlmcHeaderBytes;
      f.width_ = 2;
      f.count_ = size_t(ntok);
      break;
    }
    case TokenFormat::kU16:
      if (n % 2 != 0) {
        throw bad(path, fmt::format("odd size {} bytes for uint16 tokens", n),
                  "the file is truncated or not uint16 tokens");
      }
      f.data_offset_ = 0;
      f.width_ = 2;
      f.count_ = n / 2;
      break;
    case TokenFormat::kText:
      f.data_offset_ = 0;
      f.width_ = 1;
      f.count_ = n;
      break;
    case TokenFormat::kAuto:
      break;
  }
  f.format_ = format;
  return f;
}

TokenFile::TokenFile(TokenFile&& o) noexcept { *this = std::move(o); }

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
    path_ = std::move(o.path_);
    format_ = o.format_;
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    data_offset_ = o.data_offset_;
    width_ = o.width_;
    count_ = o.count_;
    o.map_ = nullptr;
    o.map_bytes_ = 0;
  }
  return *this;
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

uint32_t TokenFile::at(size_t i) const {
  const unsigned char* p = map_ + data_offset_ + i * width_;
  return width_ == 1 ? p[0] : uint32_t(p[0]) | uint32_t(p[1]) << 8;
}

void TokenFile::copy_to(size_t offset, size_t n, int64_t* out) const {
  const unsigned char* p = map_ + data_offset_ + offset * width_;
  if (width_ == 1) {
    for (size_t i = 0; i < n; ++i) out[i] = p[i];
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = int64_t(p[2 * i]) | int64_t(p[2 * i + 1]) << 8;
  }
}

uint32_t TokenFile::max_token() const {
  uint32_t m = 0;
  const unsigned char* p = map_ + data_offset_;
  if (width_ == 1) {
    for (size_t i = 0; i < count_; ++i) m = std::max<uint32_t>(m, p[i]);
  } else {
    for (size_t i = 0; i < count_; ++i) {
      m = std::max<uint32_t>(m, uint32_t(p[2 * i]) | uint32_t(p[2 * i + 1]) << 8);
    }
  }
  return m;
}

void TokenFile::check_vocab(int64_t vocab_size) const {
  if (count_ == 0) return;
  const uint32_t m = max_token();
  if (int64_t(m) >= vocab_size) {
    throw bad(path_,
              fmt::format("token id {} is outside the model's vocabulary of {}", m, vocab_size),
              fmt::format("use --vocab-size {} or more (GPT-2 tokens need 50257; 50304 is padded)",
                          int64_t(m) + 1));
  }
}

std::vector<fs::path> list_shards(const fs::path& data, const std::string& split) {
  std::error_code ec;
  if (!fs::exists(data, ec)) {
    throw UserError(data.string(), "no such file or directory", "check --data");
  }
  if (!fs::is_directory(data, ec)) return {data};
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(data, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (name.find(split) != std::string::npos) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) {
    throw UserError(data.string(), fmt::format("no shard whose name contains '{}'", split),
                    "build-nanogpt names them edufineweb_train_000001.npy, ..._val_000000.npy");
  }
  return out;
}

DataIterator::DataIterator(std::vector<fs::path> shards, TokenFormat format, int64_t B, int64_t T,
                           int rank, int world, int64_t vocab_size)
    : paths_(std::move(shards)),
      format_(format),
      B_(B),
      T_(T),
      rank_(rank),
      world_(world),
      vocab_size_(vocab_size) {
  const size_t need = size_t(B * T * world + 1);
  for (const auto& p : paths_) {
    TokenFile f = TokenFile::open(p, format_);
    if (f.size() < need) {
      throw UserError(p.string(),
                      fmt::format("{} tokens are fewer than one step of the world needs "
                                  "(B*T*world+1 = {}*{}*{}+1 = {})",
                                  f.size(), B, T, world, need),
                      "use more data or a smaller --micro-batch/--seq-len");
    }
    sizes_.push_back(f.size());
  }
  reset();
  map_current();  // the first shard's tokens are checked before any training starts
}

void DataIterator::reset() {
  shard_ = 0;
  position_ = B_ * T_ * rank_;
  batches_ = 0;
}

void DataIterator::advance() {
  position_ += B_ * T_ * world_;
  if (position_ + (B_ * T_ * world_ + 1) > int64_t(sizes_[size_t(shard_)])) {
    shard_ = (shard_ + 1) % int64_t(sizes_.size());
    position_ = B_ * T_ * rank_;
  }
  ++batches_;
}

void DataIterator::skip(int64_t batches) {
  for (int64_t i = 0; i < batches; ++i) advance();
}

void DataIterator::seek(int64_t shard, int64_t position) {
  if (shard < 0 || shard >= int64_t(sizes_.size()) || position < 0 ||
      position >= int64_t(sizes_[size_t(shard)])) {
    throw UserError(
        shard >= 0 && shard < int64_t(paths_.size()) ? paths_[size_t(shard)].string() : "--data",
        fmt::format("the checkpoint's data position (shard {}, token {}) is not in the {} "
                    "training shard(s) given",
                    shard, position, sizes_.size()),
        "resume with the same --data");
  }
  shard_ = shard;
  position_ = position;
  if (position_ + (B_ * T_ * world_ + 1) > int64_t(sizes_[size_t(shard_)])) {
    shard_ = (shard_ + 1) % int64_t(sizes_.size());
    position_ = B_ * T_ * rank_;
  }
}

void DataIterator::map_current() {
  if (mapped_shard_ == shard_) return;
  current_.reset();
  auto f = std::make_unique<TokenFile>(TokenFile::open(paths_[size_t(shard_)], format_));
  f->check_vocab(vocab_size_);
  current_ = std::move(f);
  mapped_shard_ = shard_;
}

void DataIterator::next(std::vector<int64_t>& window) {
  map_current();
  const size_t n = size_t(B_ * T_ + 1);
  window.resize(n);
  current_->copy_to(size_t(position_), n, window.data());
  advance();
}

}  // namespace hpc::train
