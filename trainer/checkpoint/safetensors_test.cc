#include "checkpoint/safetensors.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <vector>

#include <catch2/catch.hpp>

#include "error.h"

using namespace hpc::train;
namespace fs = std::filesystem;

namespace {
fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("hpctrain_st_" + std::to_string(::getpid()) + "_" + name);
}
}  // namespace

TEST_CASE("safetensors round trip keeps names, shapes and bytes", "[safetensors]") {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {7, 8, 9};
  TensorBytes ta{"F32", {2, 3}, a.data(), a.size() * 4};
  TensorBytes tb{"BF16", {3}, b.data(), b.size() * 2};
  const fs::path p = temp_path("rt.safetensors");
  write_safetensors(p, {{"h.0.w", ta}, {"b", tb}}, {{"format", "pt"}});
  {
    auto f = SafetensorsFile::open(p);
    REQUIRE(f.tensors().size() == 2);
    const auto& ra = f.tensors().at("h.0.w");
    CHECK(ra.dtype == "F32");
    CHECK(ra.shape == std::vector<int64_t>{2, 3});
    CHECK(std::memcmp(ra.data, a.data(), 24) == 0);
    CHECK(f.tensors().at("b").bytes == 6);
    // Data starts 8-byte aligned.
    std::ifstream in(p, std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    CHECK(n % 8 == 0);
  }
  fs::remove(p);
}

TEST_CASE("bad safetensors files are user errors", "[safetensors]") {
  CHECK_THROWS_AS(SafetensorsFile::open(temp_path("missing")), hpc::UserError);
  const fs::path p = temp_path("bad.safetensors");
  {
    std::ofstream out(p, std::ios::binary);
    uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  CHECK_THROWS_WITH(SafetensorsFile::open(p), Catch::Contains("exceeds the file"));
  fs::remove(p);
}
