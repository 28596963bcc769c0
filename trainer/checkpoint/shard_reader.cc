#include "checkpoint/shard_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "error.h"

namespace hpc::train {
namespace fs = std::filesystem;

namespace {
// Bytes per hash job when the file has one SHA-256 (an older manifest): hashed in order.
constexpr uint64_t kSequentialPiece = uint64_t(64) << 20;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Span {
  const char* p;
  size_t n;
};
struct Hashed {  // what one hash job gives: its chunk's digest (chunked) and its seconds
  std::string hex;
  double seconds = 0;
};

// Faults in the pages of the `direct` destinations, in file order, on a thread of its own, ahead
// of the reader: the memory a resume reads into is fresh (the model is not initialised first), and
// faulting it in (zeroing each page) cost the reading thread about as much as the copy from the
// page cache. madvise(MADV_POPULATE_WRITE) (Linux 5.14) changes no byte, so it may run beside the
// reads into the same pages; on an older kernel it fails and the reader faults them in as before.
class PopulateAhead {
 public:
  explicit PopulateAhead(const std::vector<ByteRange>& ranges) {
    for (const auto& r : ranges) {
      if (r.direct && r.end > r.begin) spans_.push_back({r.direct, size_t(r.end - r.begin)});
    }
    if (!spans_.empty()) thread_ = std::thread([this] { run(); });
  }
  PopulateAhead(const PopulateAhead&) = delete;
  PopulateAhead& operator=(const PopulateAhead&) = delete;
  ~PopulateAhead() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
#ifdef MADV_POPULATE_WRITE
    const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
    constexpr uintptr_t kStep = uintptr_t(8) << 20;  // so that the reader gains from the start
    for (const Span& s : spans_) {
      // Whole pages inside the span only: a page it shares with other memory is left alone.
      uintptr_t at = (uintptr_t(s.p) + page - 1) & ~(page - 1);
      const uintptr_t end = (uintptr_t(s.p) + s.n) & ~(page - 1);
      for (; at < end && !stop_; at += kStep) {
        const size_t n = size_t(std::min(kStep, end - at));
        if (::madvise(reinterpret_cast<void*>(at), n, MADV_POPULATE_WRITE) != 0) return;
      }
    }
#endif
  }
  std::vector<Span> spans_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Hands n bytes at `at` in range r to its taker in whole elements, keeping a split element's
// first bytes in `carry`; `last`: these are the range's last bytes.
void hand(const ByteRange& r, std::string& carry, uint64_t at, const char* p, size_t n, bool last) {
  if (!carry.empty()) {
    const size_t k = std::min(n, r.unit - carry.size());
    carry.append(p, k);
    p += k, n -= k, at += k;
    if (carry.size() == r.unit || (last && n == 0)) {
      r.take(at - carry.size(), carry.data(), carry.size());
      carry.clear();
    }
  }
  const size_t whole = last ? n : n - n % r.unit;
  if (whole > 0) r.take(at, p, whole);
  if (n > whole) carry.assign(p + whole, n - whole);
}
}  // namespace

ShardReader::ShardReader(const fs::path& path, uint64_t chunk_bytes)
    : path_(path), chunk_bytes_(chunk_bytes) {
  const std::string where = path.string();
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw UserError(where, fmt::format("cannot open: {}", std::strerror(errno)), "");
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // a larger read-ahead
  struct stat st {};
  ::fstat(fd_, &st);
  const uint64_t size = uint64_t(st.st_size);
  if (size < 8) throw UserError(where, "too short for a safetensors file", "");
  unsigned char first8[8];
  if (read_at(reinterpret_cast<char*>(first8), 8, 0) < 8) {
    throw UserError(where, "ends early (truncated while read)", "");
  }
  const uint64_t hlen = safetensors_header_length(first8);
  if (hlen > size - 8) {
    throw UserError(where, fmt::format("header length {} exceeds the file", hlen),
                    "not a safetensors file");
  }
  std::string json(hlen, '\0');
  if (read_at(json.data(), hlen, 8) < hlen) {
    throw UserError(where, "ends early (truncated while read)", "");
  }
  header_.assign(reinterpret_cast<const char*>(first8), 8);
  header_ += json;
  data_start_ = 8 + hlen;
  data_bytes_ = size - data_start_;
  tensors_ = parse_safetensors_header(json, data_bytes_, where);
}

ShardReader::~ShardReader() {
  if (fd_ >= 0) ::close(fd_);
}

size_t ShardReader::read_at(char* p, size_t n, uint64_t at) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, p + done, n - done, off_t(at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw UserError(path_.string(), fmt::format("cannot read: {}", std::strerror(errno)), "");
    }
    if (got == 0) break;
    done += size_t(got);
  }
  return done;
}

ShardDigest ShardReader::read_all(std::vector<ByteRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  uint64_t needed = data_start_;  // the file must reach this far
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ByteRange& r = ranges[i];
    if ((i > 0 && r.begin < ranges[i - 1].end) || r.end < r.begin || r.end > data_bytes_ ||
        r.unit == 0) {
      throw std::logic_error("ShardReader::read_all: overlapping or outside ranges");
    }
    needed = std::max(needed, data_start_ + r.end);
  }
  // The file goes by in pieces (its chunks, or kSequentialPiece), read on this thread; each
  // piece is hashed on a thread of its own while the next ones are read, at most `lanes` at a
  // time (so at most lanes + 1 buffers, for the bytes not read straight into a tensor).
  // Chunks hash independently; one whole-file SHA-256 takes the pieces in order.
  const bool chunked = chunk_bytes_ > 0;
  const uint64_t piece = chunked ? chunk_bytes_ : kSequentialPiece;
  const size_t lanes = hash_lanes();
  Sha256 whole;
  struct Job {
    std::unique_ptr<char[]> buf;  // the piece's bytes outside `direct` ranges (may be null)
    std::shared_future<Hashed> done;
  };
  std::deque<Job> jobs;
  struct WaitAll {  // on the way out, also by an exception: no job outlives its bytes
    std::deque<Job>& jobs;
    ~WaitAll() {
      for (auto& j : jobs) j.done.wait();
    }
  } wait_all{jobs};
  std::vector<std::unique_ptr<char[]>> spare;
  ShardDigest out;
  auto finish_front = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const Hashed h = jobs.front().done.get();
    out.hash_wait_seconds += seconds_since(t0);
    out.hash_seconds += h.seconds;
    if (chunked) out.chunk_sha256.push_back(h.hex);
    if (jobs.front().buf) spare.push_back(std::move(jobs.front().buf));
    jobs.pop_front();
  };
  auto submit = [&](std::vector<Span> spans, std::unique_ptr<char[]> buf) {
    while (jobs.size() >= lanes) finish_front();
    std::shared_future<Hashed> prev;
    if (!chunked && !jobs.empty()) prev = jobs.back().done;
    auto job = [spans = std::move(spans), prev, chunked, &whole] {
      if (prev.valid()) prev.wait();
      const double t0 = thread_cpu_seconds();
      Sha256 own;
      Sha256& sha = chunked ? own : whole;
      for (const Span& s : spans) sha.update(s.p, s.n);
      return Hashed{chunked ? own.hex_digest() : std::string(), thread_cpu_seconds() - t0};
    };
    jobs.push_back({std::move(buf), std::async(std::launch::async, std::move(job)).share()});
  };
  PopulateAhead populate(ranges);
  std::vector<std::string> carry(ranges.size());
  size_t ri = 0;
  uint64_t off = 0, pos = 0;
  for (bool eof = false; !eof; off += piece) {
    ::posix_fadvise(fd_, off_t(off + piece), off_t(piece), POSIX_FADV_WILLNEED);
    std::unique_ptr<char[]> buf;
    std::vector<Span> spans;
    const uint64_t end = off + piece;
    for (pos = off; pos < end && !eof;) {
      while (ri < ranges.size() && data_start_ + ranges[ri].end <= pos) ++ri;
      const ByteRange* r = nullptr;
      uint64_t seg_end = end, rb = 0;
      if (ri < ranges.size()) {
        rb = data_start_ + ranges[ri].begin;
        if (rb <= pos) r = &ranges[ri];
        seg_end = std::min(end, r ? data_start_ + r->end : rb);
      }
      char* dst = nullptr;
      if (r && r->direct) {
        dst = r->direct + (pos - rb);
      } else {
        if (!buf && !spare.empty()) buf = std::move(spare.back()), spare.pop_back();
        if (!buf) buf.reset(new char[piece]);  // not zeroed: only what is read is touched
        dst = buf.get() + (pos - off);
      }
      const size_t want = size_t(seg_end - pos), got = read_at(dst, want, pos);
      eof = got < want;
      if (pos < data_start_ &&
          std::memcmp(dst, header_.data() + pos, std::min<uint64_t>(got, data_start_ - pos))) {
        throw UserError(path_.string(), "its header changed while it was read", "");
      }
      if (r && !r->direct && got > 0) {
        hand(*r, carry[ri], pos - rb, dst, got, pos + got == data_start_ + r->end);
      }
      if (got > 0) spans.push_back({dst, got});
      pos += got;
    }
    out.bytes += pos - off;
    if (!spans.empty()) submit(std::move(spans), std::move(buf));
  }
  while (!jobs.empty()) finish_front();
  if (out.bytes < needed) {
    throw UserError(path_.string(), "ends early (truncated while read)", "");
  }
  if (!chunked) out.sha256 = whole.hex_digest();
  return out;
}

void ShardReader::read_ranges(std::vector<ByteRange> ranges) const {
  std::sort(ranges.begin(), ranges.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  std::unique_ptr<char[]> buf;  // for the ranges handed to a taker
  PopulateAhead populate(ranges);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ByteRange& r = ranges[i];
    if ((i > 0 && r.begin < ranges[i - 1].end) || r.end < r.begin || r.end > data_bytes_ ||
        r.unit == 0) {
      throw std::logic_error("ShardReader::read_ranges: overlapping or outside ranges");
    }
    ::posix_fadvise(fd_, off_t(data_start_ + r.begin), off_t(r.end - r.begin), POSIX_FADV_WILLNEED);
    std::string carry;
    for (uint64_t at = r.begin; at < r.end;) {
      const size_t want = size_t(std::min<uint64_t>(r.end - at, kSequentialPiece));
      char* dst = r.direct ? r.direct + (at - r.begin) : nullptr;
      if (!dst) {
        if (!buf) buf.reset(new char[kSequentialPiece]);
        dst = buf.get();
      }
      if (read_at(dst, want, data_start_ + at) < want) {
        throw UserError(path_.string(), "ends early (truncated while read)", "");
      }
      if (!r.direct) hand(r, carry, at - r.begin, dst, want, at + want == r.end);
      at += want;
    }
  }
}

std::string ShardReader::read_unverified(const TensorEntry& t) const {
  std::string out(t.end - t.begin, '\0');
  if (read_at(out.data(), out.size(), data_start_ + t.begin) < out.size()) {
    throw UserError(path_.string(), "ends early (truncated while read)", "");
  }
  return out;
}

}  // namespace hpc::train
