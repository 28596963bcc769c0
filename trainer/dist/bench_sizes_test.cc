#include <catch2/catch.hpp>

#include "dist/bench_allreduce.h"
#include "error.h"

using namespace hpc::train;

TEST_CASE("bench-allreduce sizes parse with K/M/G suffixes", "[bench]") {
  CHECK(parse_byte_size("--min", "1024") == 1024);
  CHECK(parse_byte_size("--min", "1K") == 1024);
  CHECK(parse_byte_size("--min", "8k") == 8192);
  CHECK(parse_byte_size("--min", "4M") == 4 << 20);
  CHECK(parse_byte_size("--min", "1G") == int64_t(1) << 30);
  CHECK(parse_byte_size("--min", "2KB") == 2048);
  CHECK(parse_byte_size("--min", "16MiB") == 16 << 20);
  for (const char* bad :
       {"", "K", "1X", "-1", "1.5K", "0", "1K1", "2048G", "99999999999999999999999"}) {
    CHECK_THROWS_AS(parse_byte_size("--max", bad), hpc::UserError);
  }
}

TEST_CASE("bench-allreduce sizes go from min to max by the factor", "[bench]") {
  CHECK(bench_sizes(1024, 1 << 20, 2, 4).size() == 11);
  CHECK(bench_sizes(1024, 1024, 2, 4) == std::vector<int64_t>{1024});
  CHECK(bench_sizes(1024, 5000, 4, 4) == std::vector<int64_t>{1024, 4096});
  CHECK(bench_sizes(int64_t(1) << 30, int64_t(1) << 40, 2, 4).back() == int64_t(1) << 40);
  CHECK_THROWS_AS(bench_sizes(2048, 1024, 2, 4), hpc::UserError);
  CHECK_THROWS_AS(bench_sizes(1024, 4096, 1, 4), hpc::UserError);
  CHECK_THROWS_AS(bench_sizes(2, 4096, 2, 4), hpc::UserError);
}

TEST_CASE("busbw factor of an all-reduce is 2(n-1)/n", "[bench]") {
  CHECK(allreduce_bus_factor(1) == 0.0);
  CHECK(allreduce_bus_factor(2) == 1.0);
  CHECK(allreduce_bus_factor(4) == 1.5);
  CHECK(allreduce_bus_factor(8) == 1.75);
}
