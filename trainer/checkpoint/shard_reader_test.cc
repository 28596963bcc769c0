#include "checkpoint/shard_reader.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <catch2/catch.hpp>

#include "error.h"
#include "sha256.h"

using namespace hpc::train;
namespace fs = std::filesystem;

namespace {
fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("hpctrain_sr_" + std::to_string(::getpid()) + "_" + name);
}
std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

// The SHA-256 of each chunk of `bytes`.
std::vector<std::string> chunk_digests(const std::string& bytes, size_t chunk) {
  std::vector<std::string> out;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    out.push_back(hpc::sha256_hex(std::string_view(bytes).substr(at, chunk)));
  }
  return out;
}

TEST_CASE("shard reader: one pass gives the written digests and the ranges asked for",
          "[safetensors]") {
  // 20 MB: the ranges span several chunks of the odd chunk size, which splits elements.
  std::vector<float> a(5'000'000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 1000) * 0.5f;
  std::vector<uint8_t> rng(5056, 7);
  const fs::path p = temp_path("shard.safetensors");
  const WrittenFile w =
      write_safetensors(p,
                        {{"value.0", {"F32", {int64_t(a.size())}, a.data(), a.size() * 4}},
                         {"rng.cpu", {"U8", {int64_t(rng.size())}, rng.data(), rng.size()}}},
                        {{"format", "hpctrain-shard"}});
  const std::string bytes = file_bytes(p);
  CHECK(w.bytes == bytes.size());
  CHECK(w.chunk_sha256 == chunk_digests(bytes, kShardChunkBytes));
  CHECK(w.sha256 == sha256_of_chunks(w.chunk_sha256));
  const auto odd = sha256_chunks({bytes}, 3'000'001);
  CHECK(odd.first == chunk_digests(bytes, 3'000'001));

  for (const uint64_t chunk : {uint64_t(0), uint64_t(3'000'001), kShardChunkBytes}) {
    ShardReader r(p, chunk);
    const TensorEntry& v = r.tensors().at("value.0");
    const TensorEntry& g = r.tensors().at("rng.cpu");
    CHECK(r.read_unverified(g) == std::string(rng.begin(), rng.end()));
    // Elements [1'000'001, 4'500'000) of value.0 taken while streaming, [4'500'000, 4'900'000)
    // read straight into memory, and all of rng.cpu.
    std::vector<float> got(3'499'999), direct(400'000);
    std::string got_rng;
    std::vector<ByteRange> ranges;
    ranges.push_back(
        {g.begin, g.end, [&](uint64_t, const char* q, size_t n) { got_rng.append(q, n); }});
    ByteRange taken{v.begin + 4 * 1'000'001, v.begin + 4 * 4'500'000,
                    [&](uint64_t at, const char* q, size_t n) {
                      CHECK(n % 4 == 0);
                      std::memcpy(reinterpret_cast<char*>(got.data()) + at, q, n);
                    }};
    taken.unit = 4;
    ranges.push_back(taken);
    ByteRange into{v.begin + 4 * 4'500'000, v.begin + 4 * 4'900'000, nullptr};
    into.direct = reinterpret_cast<char*>(direct.data());
    ranges.push_back(into);
    const ShardDigest d = r.read_all(std::move(ranges));
    if (chunk == 0) {
      CHECK(d.sha256 == hpc::sha256_hex(bytes));  // a manifest before chunks
    } else {
      CHECK(d.chunk_sha256 == chunk_digests(bytes, chunk));
    }
    CHECK(d.bytes == bytes.size());
    CHECK(std::memcmp(got.data(), a.data() + 1'000'001, got.size() * 4) == 0);
    CHECK(std::memcmp(direct.data(), a.data() + 4'500'000, direct.size() * 4) == 0);
    CHECK(got_rng == std::string(rng.begin(), rng.end()));
  }

  // One byte changed: same size, another digest (of the first chunk only).
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4000);
    f.put(char(bytes[4000] + 1));
  }
  ShardReader changed(p, 3'000'001);
  const ShardDigest d = changed.read_all({});
  const auto want = chunk_digests(bytes, 3'000'001);
  REQUIRE(d.chunk_sha256.size() == want.size());
  CHECK(d.chunk_sha256[0] != want[0]);
  CHECK(std::vector<std::string>(d.chunk_sha256.begin() + 1, d.chunk_sha256.end()) ==
        std::vector<std::string>(want.begin() + 1, want.end()));
  CHECK(ShardReader(p).read_all({}).sha256 != hpc::sha256_hex(bytes));
  fs::remove(p);
}

TEST_CASE("shard reader: only the ranges asked for, from a file another rank verifies",
          "[safetensors]") {
  std::vector<float> a(3'000'000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 977) * 0.25f;
  std::vector<uint8_t> rng(5056, 9);
  const fs::path p = temp_path("ranges.safetensors");
  write_safetensors(p,
                    {{"value.0", {"F32", {int64_t(a.size())}, a.data(), a.size() * 4}},
                     {"rng.cpu", {"U8", {int64_t(rng.size())}, rng.data(), rng.size()}}},
                    {{"format", "hpctrain-shard"}});
  ShardReader r(p);
  const TensorEntry& v = r.tensors().at("value.0");
  const TensorEntry& g = r.tensors().at("rng.cpu");
  std::vector<float> got(1'000'000), direct(500'000);
  std::string got_rng;
  std::vector<ByteRange> ranges;
  ByteRange into{v.begin + 4 * 2'000'000, v.begin + 4 * 2'500'000, nullptr};
  into.direct = reinterpret_cast<char*>(direct.data());
  ranges.push_back(into);  // out of order: read_ranges sorts them
  ByteRange taken{v.begin + 4 * 123, v.begin + 4 * 1'000'123,
                  [&](uint64_t at, const char* q, size_t n) {
                    CHECK(n % 4 == 0);
                    std::memcpy(reinterpret_cast<char*>(got.data()) + at, q, n);
                  }};
  taken.unit = 4;
  ranges.push_back(taken);
  ranges.push_back(
      {g.begin, g.end, [&](uint64_t, const char* q, size_t n) { got_rng.append(q, n); }});
  r.read_ranges(std::move(ranges));
  CHECK(std::memcmp(got.data(), a.data() + 123, got.size() * 4) == 0);
  CHECK(std::memcmp(direct.data(), a.data() + 2'000'000, direct.size() * 4) == 0);
  CHECK(got_rng == std::string(rng.begin(), rng.end()));

  // Cut short after the header was read: a range past the end is a user error.
  fs::resize_file(p, v.begin + 1000);
  std::vector<char> sink(4 * 1000);
  ByteRange late{v.begin + 4 * 2'000'000, v.begin + 4 * 2'001'000, nullptr};
  late.direct = sink.data();
  CHECK_THROWS_AS(r.read_ranges({late}), hpc::UserError);
  fs::remove(p);
}

TEST_CASE("shard reader: missing and foreign files are user errors", "[safetensors]") {
  CHECK_THROWS_AS(ShardReader(temp_path("missing")), hpc::UserError);
  const fs::path p = temp_path("bad.safetensors");
  {
    std::ofstream out(p, std::ios::binary);
    uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  CHECK_THROWS_WITH(ShardReader(p), Catch::Contains("exceeds the file"));
  fs::remove(p);
}
