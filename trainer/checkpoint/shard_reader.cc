#include "checkpoint/shard_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "error.h"

namespace hpc::train {
namespace fs = std::filesystem;

namespace {
constexpr size_t kPiece = size_t(8) << 20;  // bytes per read(): whole elements of any dtype
}  // namespace

ShardReader::ShardReader(const fs::path& path) : path_(path) {
  const std::string where = path.string();
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw UserError(where, fmt::format("cannot open: {}", std::strerror(errno)), "");
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // a larger read-ahead
  struct stat st {};
  ::fstat(fd_, &st);
  const uint64_t size = uint64_t(st.st_size);
  if (size < 8) throw UserError(where, "too short for a safetensors file", "");
  unsigned char first8[8];
  read_exact(reinterpret_cast<char*>(first8), 8);
  hash(reinterpret_cast<const char*>(first8), 8);
  const uint64_t hlen = safetensors_header_length(first8);
  if (hlen > size - 8) {
    throw UserError(where, fmt::format("header length {} exceeds the file", hlen),
                    "not a safetensors file");
  }
  std::string json(hlen, '\0');
  read_exact(json.data(), hlen);
  hash(json.data(), hlen);
  data_start_ = 8 + hlen;
  data_bytes_ = size - data_start_;
  tensors_ = parse_safetensors_header(json, data_bytes_, where);
}

ShardReader::~ShardReader() {
  if (fd_ >= 0) ::close(fd_);
}

void ShardReader::read_exact(char* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::read(fd_, p + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw UserError(path_.string(), fmt::format("cannot read: {}", std::strerror(errno)), "");
    }
    if (got == 0) throw UserError(path_.string(), "ends early (truncated while read)", "");
    done += size_t(got);
  }
  digest_.bytes += n;
}

void ShardReader::hash(const char* p, size_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  sha_.update(p, n);
  digest_.hash_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

ShardDigest ShardReader::read_all(std::vector<ByteRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  std::unique_ptr<char[]> buf(new char[kPiece]);
  uint64_t pos = 0;  // in the data section
  // Bytes [pos, to) of the data, handed to `r` (when given) piece by piece.
  auto pump = [&](uint64_t to, const ByteRange* r) {
    while (pos < to) {
      const size_t n = size_t(std::min<uint64_t>(kPiece, to - pos));
      read_exact(buf.get(), n);
      hash(buf.get(), n);
      if (r) r->take(pos - r->begin, buf.get(), n);
      pos += n;
    }
  };
  for (const auto& r : ranges) {
    if (r.begin < pos || r.end < r.begin || r.end > data_bytes_) {
      throw std::logic_error("ShardReader::read_all: overlapping or outside ranges");
    }
    pump(r.begin, nullptr);
    pump(r.end, &r);
  }
  pump(data_bytes_, nullptr);
  // Whatever follows (the file grew since it was opened) counts too: the size will not match.
  for (;;) {
    const ssize_t got = ::read(fd_, buf.get(), kPiece);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    hash(buf.get(), size_t(got));
    digest_.bytes += uint64_t(got);
  }
  digest_.sha256 = sha_.hex_digest();
  return digest_;
}

std::string ShardReader::read_unverified(const TensorEntry& t) const {
  std::string out(t.end - t.begin, '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t got =
        ::pread(fd_, out.data() + done, out.size() - done, off_t(data_start_ + t.begin + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw UserError(path_.string(), "ends early (truncated while read)", "");
    done += size_t(got);
  }
  return out;
}

}  // namespace hpc::train
