#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <future>
#include <thread>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "error.h"
#include "sha256.h"

namespace hpc::train {
namespace fs = std::filesystem;

size_t dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

uint64_t safetensors_header_length(const unsigned char* first8) {
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = hlen << 8 | first8[i];
  return hlen;
}

std::map<std::string, TensorEntry> parse_safetensors_header(std::string_view json,
                                                            uint64_t data_bytes,
                                                            const std::string& where) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json.begin(), json.end());
  } catch (const std::exception& e) {
    throw UserError(where, "header is not JSON", "not a safetensors file");
  }
  std::map<std::string, TensorEntry> out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    try {
      TensorEntry t;
      t.dtype = it.value().at("dtype").get<std::string>();
      t.shape = it.value().at("shape").get<std::vector<int64_t>>();
      auto off = it.value().at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_bytes) {
        throw UserError(where, fmt::format("tensor '{}' has offsets outside the file", it.key()),
                        "");
      }
      int64_t numel = 1;
      for (int64_t s : t.shape) numel *= s;
      const size_t es = dtype_size(t.dtype);
      if (es != 0 && size_t(numel) * es != off[1] - off[0]) {
        throw UserError(where,
                        fmt::format("tensor '{}' has {} bytes for shape of {} {} values", it.key(),
                                    off[1] - off[0], numel, t.dtype),
                        "");
      }
      t.begin = off[0];
      t.end = off[1];
      out.emplace(it.key(), std::move(t));
    } catch (const nlohmann::json::exception&) {
      throw UserError(where, fmt::format("tensor '{}' has a malformed header entry", it.key()), "");
    }
  }
  return out;
}

SafetensorsFile SafetensorsFile::open(const fs::path& path) {
  SafetensorsFile f;
  f.path_ = path;
  const std::string where = path.string();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(where, fmt::format("cannot open: {}", std::strerror(errno)), "");
  struct stat st {};
  ::fstat(fd, &st);
  f.map_bytes_ = size_t(st.st_size);
  if (f.map_bytes_ < 8) {
    ::close(fd);
    throw UserError(where, "too short for a safetensors file", "");
  }
  f.map_ = ::mmap(nullptr, f.map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (f.map_ == MAP_FAILED) {
    f.map_ = nullptr;
    throw UserError(where, "cannot map the file", "");
  }
  const auto* base = static_cast<const unsigned char*>(f.map_);
  const uint64_t hlen = safetensors_header_length(base);
  if (hlen > f.map_bytes_ - 8) {
    throw UserError(where, fmt::format("header length {} exceeds the file", hlen),
                    "not a safetensors file");
  }
  const unsigned char* data = base + 8 + hlen;
  const auto entries =
      parse_safetensors_header(std::string_view(reinterpret_cast<const char*>(base + 8), hlen),
                               f.map_bytes_ - 8 - hlen, where);
  for (const auto& [name, e] : entries) {
    f.tensors_.emplace(name, TensorBytes{e.dtype, e.shape, data + e.begin, e.end - e.begin});
  }
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(o.map_),
      map_bytes_(o.map_bytes_),
      tensors_(std::move(o.tensors_)) {
  o.map_ = nullptr;
  o.map_bytes_ = 0;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

size_t hash_lanes() {
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 2, kMaxHashLanes);
}

std::pair<std::vector<std::string>, double> sha256_chunks(
    const std::vector<std::string_view>& parts, uint64_t chunk_bytes) {
  uint64_t total = 0;
  for (std::string_view p : parts) total += p.size();
  const size_t chunks = size_t((total + chunk_bytes - 1) / chunk_bytes);
  std::vector<std::string> out(chunks);
  std::vector<double> seconds(chunks);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < chunks;) {
      const double t0 = thread_cpu_seconds();
      Sha256 sha;
      const uint64_t begin = k * chunk_bytes, end = std::min(total, begin + chunk_bytes);
      uint64_t at = 0;  // where the part starts in the file
      for (std::string_view p : parts) {
        const uint64_t from = std::max(begin, at), to = std::min(end, at + p.size());
        if (from < to) sha.update(p.substr(size_t(from - at), size_t(to - from)));
        at += p.size();
      }
      out[k] = sha.hex_digest();
      seconds[k] = thread_cpu_seconds() - t0;
    }
  };
  std::vector<std::thread> threads;
  const size_t lanes = std::min<size_t>(chunks, hash_lanes());
  for (size_t i = 1; i < lanes; ++i) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  double sum = 0;
  for (double s : seconds) sum += s;
  return {out, sum};
}

std::string sha256_of_chunks(const std::vector<std::string>& chunk_sha256) {
  Sha256 sha;
  for (const auto& c : chunk_sha256) sha.update(c);
  return sha.hex_digest();
}

WrittenFile write_safetensors(const fs::path& path,
                              const std::vector<std::pair<std::string, TensorBytes>>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string head;
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) head.push_back(char((n >> (8 * i)) & 0xff));
  head += h;

  // SHA-256 runs on other threads over the same bytes while this one writes them and waits for
  // the disk (fsync): the save waits for the hash only when the hash is the slower of the two.
  std::vector<std::string_view> parts = {head};
  for (const auto& [name, t] : tensors) {
    parts.emplace_back(static_cast<const char*>(t.data), t.bytes);
  }
  auto hashed =
      std::async(std::launch::async, [&parts] { return sha256_chunks(parts, kShardChunkBytes); });
  WrittenFile out;
  hpc::AtomicFileWriter file(path, 0644, hpc::AtomicFileWriter::Caching::kDirect);
  for (std::string_view p : parts) {
    file.write(p);
    out.bytes += p.size();
  }
  file.commit();
  out.page_cache = file.direct_refused();
  const auto w0 = std::chrono::steady_clock::now();
  std::tie(out.chunk_sha256, out.hash_seconds) = hashed.get();
  out.sha256 = sha256_of_chunks(out.chunk_sha256);
  out.hash_wait_seconds = seconds_since(w0);
  return out;
}

}  // namespace hpc::train
