#include <catch2/catch.hpp>

#include "dist/bench_allreduce.h"
#include "error.h"

using namespace hpc::train;

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
