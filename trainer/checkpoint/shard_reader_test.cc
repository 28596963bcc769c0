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

TEST_CASE("shard reader: one pass gives the written digest and the ranges asked for",
          "[safetensors]") {
  // 20 MB: the ranges span several of the reader's 8 MiB pieces.
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
  CHECK(w.sha256 == hpc::sha256_hex(bytes));

  ShardReader r(p);
  const TensorEntry& v = r.tensors().at("value.0");
  const TensorEntry& g = r.tensors().at("rng.cpu");
  CHECK(r.read_unverified(g) == std::string(rng.begin(), rng.end()));
  // Elements [1'000'001, 4'500'000) of value.0, and all of rng.cpu, taken while streaming.
  std::vector<float> got(3'499'999);
  std::string got_rng;
  std::vector<ByteRange> ranges;
  ranges.push_back(
      {g.begin, g.end, [&](uint64_t, const char* q, size_t n) { got_rng.append(q, n); }});
  ranges.push_back(
      {v.begin + 4 * 1'000'001, v.begin + 4 * 4'500'000, [&](uint64_t at, const char* q, size_t n) {
         CHECK(n % 4 == 0);
         std::memcpy(reinterpret_cast<char*>(got.data()) + at, q, n);
       }});
  const ShardDigest d = r.read_all(std::move(ranges));
  CHECK(d.sha256 == w.sha256);
  CHECK(d.bytes == bytes.size());
  CHECK(std::memcmp(got.data(), a.data() + 1'000'001, got.size() * 4) == 0);
  CHECK(got_rng == std::string(rng.begin(), rng.end()));

  // One byte changed: same size, another digest.
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4000);
    f.put(char(bytes[4000] + 1));
  }
  ShardReader changed(p);
  CHECK(changed.read_all({}).sha256 != w.sha256);
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
