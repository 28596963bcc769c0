#include "data/data.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <numeric>

#include <catch2/catch.hpp>

#include "error.h"

using namespace hpc::train;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("hpctrain_data_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string u16_bytes(const std::vector<uint16_t>& t) {
  std::string s;
  for (uint16_t v : t) {
    s.push_back(char(v & 0xff));
    s.push_back(char(v >> 8));
  }
  return s;
}

// What np.save writes for a 1-D uint16 array (format 1.0, header padded to 64 bytes).
std::string npy_bytes(const std::vector<uint16_t>& t, const std::string& descr = "<u2") {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(t.size()) + ",), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::string s = "\x93NUMPY";
  s.push_back(1);
  s.push_back(0);
  s.push_back(char(dict.size() & 0xff));
  s.push_back(char(dict.size() >> 8));
  return s + dict + u16_bytes(t);
}

std::string llmc_bytes(const std::vector<uint16_t>& t, int32_t magic = 20240520,
                       int32_t version = 1, int32_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count >= 0 ? count : int32_t(t.size());
  std::string s(reinterpret_cast<const char*>(header.data()), 1024);
  return s + u16_bytes(t);
}

std::vector<uint16_t> iota_tokens(size_t n, uint16_t start = 0) {
  std::vector<uint16_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

}  // namespace

TEST_CASE("the four formats read the same tokens", "[data]") {
  TempDir d;
  auto tokens = iota_tokens(100, 1000);
  write_bytes(d.path / "a.npy", npy_bytes(tokens));
  write_bytes(d.path / "a.bin", llmc_bytes(tokens));
  write_bytes(d.path / "raw.bin", u16_bytes(tokens));
  write_bytes(d.path / "t.txt", "hello");
  for (const char* name : {"a.npy", "a.bin", "raw.bin"}) {
    auto f = TokenFile::open(d.path / name);
    REQUIRE(f.size() == 100);
    CHECK(f.at(0) == 1000);
    CHECK(f.at(99) == 1099);
    CHECK(f.max_token() == 1099);
    std::vector<int64_t> out(3);
    f.copy_to(10, 3, out.data());
    CHECK(out == std::vector<int64_t>{1010, 1011, 1012});
  }
  CHECK(TokenFile::open(d.path / "a.bin").format() == TokenFormat::kLlmc);
  CHECK(TokenFile::open(d.path / "raw.bin").format() == TokenFormat::kU16);
  auto t = TokenFile::open(d.path / "t.txt");
  CHECK(t.size() == 5);
  CHECK(t.at(0) == 'h');
  CHECK(t.format() == TokenFormat::kText);
}

TEST_CASE("bad token files are one-line user errors", "[data]") {
  TempDir d;
  auto tokens = iota_tokens(10);
  std::string npy = npy_bytes(tokens);
  npy[1] = 'X';
  write_bytes(d.path / "badmagic.npy", npy);
  CHECK_THROWS_WITH(TokenFile::open(d.path / "badmagic.npy"), Catch::Contains("bad magic"));

  write_bytes(d.path / "f32.npy", npy_bytes(tokens, "<f4"));
  CHECK_THROWS_WITH(TokenFile::open(d.path / "f32.npy"), Catch::Contains("not uint16"));

  std::string cut = npy_bytes(tokens);
  cut.pop_back();
  write_bytes(d.path / "cut.npy", cut);
  CHECK_THROWS_WITH(TokenFile::open(d.path / "cut.npy"), Catch::Contains("does not match"));

  write_bytes(d.path / "wrong.bin", llmc_bytes(tokens, 12345));
  CHECK_THROWS_WITH(TokenFile::open(d.path / "wrong.bin"), Catch::Contains("bad magic 12345"));
  CHECK_THROWS_WITH(TokenFile::open(d.path / "wrong.bin", TokenFormat::kLlmc),
                    Catch::Contains("bad magic"));
  write_bytes(d.path / "v2.bin", llmc_bytes(tokens, 20240520, 2));
  CHECK_THROWS_WITH(TokenFile::open(d.path / "v2.bin"), Catch::Contains("version 2"));
  write_bytes(d.path / "count.bin", llmc_bytes(tokens, 20240520, 1, 11));
  CHECK_THROWS_WITH(TokenFile::open(d.path / "count.bin"), Catch::Contains("header says 11"));
  write_bytes(d.path / "model.bin", llmc_bytes(tokens, 20240326));
  CHECK_THROWS_WITH(TokenFile::open(d.path / "model.bin"), Catch::Contains("not a token shard"));

  write_bytes(d.path / "odd.bin", "abc");
  CHECK_THROWS_WITH(TokenFile::open(d.path / "odd.bin"), Catch::Contains("odd size"));
  write_bytes(d.path / "x.dat", "abcd");
  CHECK_THROWS_WITH(TokenFile::open(d.path / "x.dat"), Catch::Contains("--data-format"));
  CHECK_THROWS_WITH(TokenFile::open(d.path / "missing.npy"), Catch::Contains("missing.npy"));

  write_bytes(d.path / "big.npy", npy_bytes({1, 2, 50256}));
  auto f = TokenFile::open(d.path / "big.npy");
  CHECK_THROWS_WITH(f.check_vocab(256),
                    Catch::Contains("50256") && Catch::Contains("--vocab-size 50257"));
  CHECK_NOTHROW(f.check_vocab(50257));
}

TEST_CASE("shards of a directory are listed by split, sorted", "[data]") {
  TempDir d;
  for (const char* n : {"edufineweb_train_000002.npy", "edufineweb_val_000000.npy",
                        "edufineweb_train_000001.npy"}) {
    write_bytes(d.path / n, npy_bytes(iota_tokens(8)));
  }
  auto train = list_shards(d.path, "train");
  REQUIRE(train.size() == 2);
  CHECK(train[0].filename() == "edufineweb_train_000001.npy");
  CHECK(list_shards(d.path, "val").size() == 1);
  CHECK_THROWS_WITH(list_shards(d.path, "test"), Catch::Contains("no shard"));
  CHECK_THROWS_WITH(list_shards(d.path / "nope", "train"), Catch::Contains("no such file"));
}

namespace {

// The workshop's DataLoaderLite, written out plainly, for comparison.
struct ReferenceLoader {
  std::vector<std::vector<uint16_t>> shards;
  int64_t B, T, rank, world;
  size_t shard = 0;
  int64_t pos;
  ReferenceLoader(std::vector<std::vector<uint16_t>> s, int64_t B_, int64_t T_, int64_t r,
                  int64_t w)
      : shards(std::move(s)), B(B_), T(T_), rank(r), world(w), pos(B_ * T_ * r) {}
  std::vector<int64_t> next() {
    std::vector<int64_t> buf(shards[shard].begin() + pos, shards[shard].begin() + pos + B * T + 1);
    pos += B * T * world;
    if (pos + (B * T * world + 1) > int64_t(shards[shard].size())) {
      shard = (shard + 1) % shards.size();
      pos = B * T * rank;
    }
    return buf;
  }
};

}  // namespace

TEST_CASE("DataIterator follows the workshop's DataLoaderLite", "[data]") {
  TempDir d;
  std::vector<std::vector<uint16_t>> shards = {iota_tokens(101, 0), iota_tokens(57, 1000),
                                               iota_tokens(80, 2000)};
  std::vector<fs::path> paths;
  for (size_t i = 0; i < shards.size(); ++i) {
    paths.push_back(d.path / ("s_train_" + std::to_string(i) + ".npy"));
    write_bytes(paths.back(), npy_bytes(shards[i]));
  }
  for (int world : {1, 2, 3}) {
    for (int rank = 0; rank < world; ++rank) {
      DataIterator it(paths, TokenFormat::kAuto, 2, 4, rank, world, 50304);
      ReferenceLoader ref(shards, 2, 4, rank, world);
      std::vector<int64_t> w;
      for (int i = 0; i < 40; ++i) {
        it.next(w);
        INFO("world " << world << " rank " << rank << " batch " << i);
        REQUIRE(w == ref.next());
      }
    }
  }
}

TEST_CASE("skip() lands where next() would", "[data]") {
  TempDir d;
  std::vector<fs::path> paths = {d.path / "a_train.npy", d.path / "b_train.npy"};
  write_bytes(paths[0], npy_bytes(iota_tokens(50, 0)));
  write_bytes(paths[1], npy_bytes(iota_tokens(70, 500)));
  DataIterator a(paths, TokenFormat::kAuto, 1, 8, 1, 2, 1000);
  DataIterator b(paths, TokenFormat::kAuto, 1, 8, 1, 2, 1000);
  std::vector<int64_t> wa, wb;
  for (int i = 0; i < 13; ++i) a.next(wa);
  b.skip(13);
  CHECK(b.batches_read() == 13);
  for (int i = 0; i < 10; ++i) {
    a.next(wa);
    b.next(wb);
    REQUIRE(wa == wb);
  }
}

TEST_CASE("seek() to a saved position lands where next() would, another world continues the tokens",
          "[data]") {
  TempDir d;
  std::vector<fs::path> paths = {d.path / "a_train.npy", d.path / "b_train.npy"};
  write_bytes(paths[0], npy_bytes(iota_tokens(50, 0)));
  write_bytes(paths[1], npy_bytes(iota_tokens(70, 500)));
  // Same world: each rank's own (shard, position) reproduces its next batches.
  for (int rank = 0; rank < 2; ++rank) {
    DataIterator a(paths, TokenFormat::kAuto, 1, 8, rank, 2, 1000);
    std::vector<int64_t> wa, wb;
    for (int i = 0; i < 5; ++i) a.next(wa);  // across the first shard's end
    DataIterator b(paths, TokenFormat::kAuto, 1, 8, rank, 2, 1000);
    b.seek(a.shard(), a.position());
    for (int i = 0; i < 10; ++i) {
      a.next(wa);
      b.next(wb);
      REQUIRE(wa == wb);
    }
  }
  // World 2 -> 1: rank 0's position is where the world stood; the single rank reads on from there
  // (its two micro-batches are the two ranks' next batches).
  DataIterator r0(paths, TokenFormat::kAuto, 1, 8, 0, 2, 1000),
      r1(paths, TokenFormat::kAuto, 1, 8, 1, 2, 1000);
  std::vector<int64_t> w0, w1, ws;
  r0.next(w0);
  r1.next(w1);
  DataIterator single(paths, TokenFormat::kAuto, 1, 8, 0, 1, 1000);
  single.seek(r0.shard(), r0.position());
  r0.next(w0);
  r1.next(w1);
  single.next(ws);
  CHECK(ws == w0);
  single.next(ws);
  CHECK(ws == w1);
  // A position these shards do not have is refused.
  CHECK_THROWS_WITH(single.seek(2, 0), Catch::Contains("resume with the same --data"));
  CHECK_THROWS_WITH(single.seek(0, 50), Catch::Contains("(shard 0, token 50)"));
}

TEST_CASE("a shard too small for one world step is refused", "[data]") {
  TempDir d;
  write_bytes(d.path / "s.npy", npy_bytes(iota_tokens(16)));
  CHECK_THROWS_WITH(DataIterator({d.path / "s.npy"}, TokenFormat::kAuto, 2, 4, 0, 2, 100),
                    Catch::Contains("B*T*world+1"));
  CHECK_NOTHROW(DataIterator({d.path / "s.npy"}, TokenFormat::kAuto, 1, 15, 0, 1, 100));
}

TEST_CASE("tokens outside the vocabulary are refused before training", "[data]") {
  TempDir d;
  write_bytes(d.path / "t.txt", std::string(64, 'a'));
  CHECK_THROWS_WITH(DataIterator({d.path / "t.txt"}, TokenFormat::kAuto, 1, 8, 0, 1, 64),
                    Catch::Contains("outside the model's vocabulary of 64"));
}
