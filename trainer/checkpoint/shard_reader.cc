#include "checkpoint/shard_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
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
  if (read_some(p, n) < n) {
    throw UserError(path_.string(), "ends early (truncated while read)", "");
  }
}

size_t ShardReader::read_some(char* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::read(fd_, p + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw UserError(path_.string(), fmt::format("cannot read: {}", std::strerror(errno)), "");
    }
    if (got == 0) break;
    done += size_t(got);
  }
  digest_.bytes += done;
  return done;
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
  // Two buffers: this thread reads the next piece into one and copies its ranges out while a
  // second thread hashes the other; the hashes run in file order, each after the one before.
  std::unique_ptr<char[]> buf[2] = {std::make_unique<char[]>(kPiece),
                                    std::make_unique<char[]>(kPiece)};
  std::shared_future<void> hashed[2];  // the hash of the piece last read into each buffer
  std::shared_future<void> last;       // the hash of the latest piece
  int cur = 0;
  auto wait = [&](const std::shared_future<void>& f) {
    if (!f.valid()) return;
    const auto t0 = std::chrono::steady_clock::now();
    f.get();  // rethrows what the hash threw
    digest_.hash_wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Reads n bytes into the free buffer, hands them to `r` (when given) and queues their hash.
  auto next = [&](size_t n, uint64_t pos, const ByteRange* r) {
    wait(hashed[cur]);
    char* p = buf[cur].get();
    n = read_some(p, n);
    if (n == 0) return n;
    if (r) r->take(pos - r->begin, p, n);
    last = std::async(std::launch::async, [this, prev = last, p, n] {
             if (prev.valid()) prev.get();
             hash(p, n);
           }).share();
    hashed[cur] = last;
    cur ^= 1;
    return n;
  };
  uint64_t pos = 0;  // in the data section
  // Bytes [pos, to) of the data, handed to `r` (when given) piece by piece.
  auto pump = [&](uint64_t to, const ByteRange* r) {
    while (pos < to) {
      const size_t n = next(size_t(std::min<uint64_t>(kPiece, to - pos)), pos, r);
      if (n == 0) throw UserError(path_.string(), "ends early (truncated while read)", "");
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
  while (next(kPiece, pos, nullptr) > 0) {}
  wait(last);
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
