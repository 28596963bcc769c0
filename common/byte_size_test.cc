#include "byte_size.h"

#include <catch2/catch.hpp>

#include "error.h"

using hpc::parse_byte_size;

TEST_CASE("byte sizes parse with K/M/G suffixes", "[byte-size]") {
  CHECK(parse_byte_size("--min", "1024") == 1024);
  CHECK(parse_byte_size("--min", "1K") == 1024);
  CHECK(parse_byte_size("--min", "8k") == 8192);
  CHECK(parse_byte_size("--min", "4M") == 4 << 20);
  CHECK(parse_byte_size("--min", "1G") == int64_t(1) << 30);
  CHECK(parse_byte_size("--min", "2KB") == 2048);
  CHECK(parse_byte_size("--min", "16MiB") == 16 << 20);
  CHECK(parse_byte_size("--min", "1024G") == int64_t(1) << 40);
  for (const char* bad : {"", "K", "1X", "-1", "+1", " 1", "1 ", "1.5K", "0", "0K", "1K1", "2048G",
                          "99999999999999999999999", "18446744073709551616"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_byte_size("--max", bad), hpc::UserError);
  }
  CHECK_THROWS_WITH(
      parse_byte_size("--max", "1X"),
      Catch::Contains("--max: '1X' has an unknown unit") && Catch::Contains("give bytes like"));
}
