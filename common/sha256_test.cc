#include "sha256.h"

#include <string>

#include <catch2/catch.hpp>

// The NIST vectors of the one-shot function are in common/shell_test.cc; here, the
// incremental hasher gives the same digest whatever the pieces.
TEST_CASE("sha256: updates in pieces give the one-shot digest", "[sha256]") {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(char(i * 7919 % 251));
  const std::string whole = hpc::sha256_hex(data);
  for (size_t piece : {size_t(1), size_t(63), size_t(64), size_t(4097), data.size()}) {
    hpc::Sha256 h;
    for (size_t at = 0; at < data.size(); at += piece) {
      h.update(std::string_view(data).substr(at, piece));
    }
    CHECK(h.hex_digest() == whole);
  }
  hpc::Sha256 empty;
  CHECK(empty.hex_digest() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK_THROWS_AS(empty.update("x"), std::logic_error);
}
