#include "dist/node_check_verdict.h"

#include <catch2/catch.hpp>

#include "error.h"

using hpc::train::judge_nodes;
using hpc::train::median;
using hpc::train::NodeFigures;
using hpc::train::round_partner;
using hpc::train::slow_nodes;
using hpc::train::test_slowdown;
using hpc::train::verdict_line;

TEST_CASE("the median of an odd and an even count", "[node-check]") {
  CHECK(median({}) == 0);
  CHECK(median({3}) == 3);
  CHECK(median({5, 1, 3}) == 3);
  CHECK(median({4, 1, 3, 2}) == 2.5);
}

TEST_CASE("a node below the median by more than the margin is slow", "[node-check]") {
  // Four nodes, one at a quarter of the others' GEMM rate: median 100, threshold 80.
  std::vector<NodeFigures> nodes = {
      {"node01", 100, 10}, {"node02", 101, 10}, {"node03", 25, 10}, {"node04", 99, 10}};
  auto v = judge_nodes(nodes, 0.2);
  REQUIRE(v.size() == 4);
  CHECK(slow_nodes(v) == std::vector<std::string>{"node03"});
  CHECK(v[2].why == "gemm 25 GFLOP/s is 75% below the median 99.5");
  CHECK(verdict_line(v[0]) == "node01 gemm 100.0 GFLOP/s link 10.000 GB/s: ok");
  CHECK(verdict_line(v[2]).find(": SLOW (gemm 25 GFLOP") != std::string::npos);
}

TEST_CASE("within the margin nobody is slow, at the edge neither", "[node-check]") {
  // Median 100; 80 is exactly (1 - 0.2) of it: not below.
  auto v = judge_nodes({{"a", 100, -1}, {"b", 80, -1}, {"c", 120, -1}}, 0.2);
  CHECK(slow_nodes(v).empty());
  v = judge_nodes({{"a", 100, -1}, {"b", 79.9, -1}, {"c", 120, -1}}, 0.2);
  CHECK(slow_nodes(v) == std::vector<std::string>{"b"});
}

TEST_CASE("two nodes: the median is their mean", "[node-check]") {
  // 100 and 25: mean 62.5, threshold 50 -> the slow one is named, the fast one is not.
  auto v = judge_nodes({{"node01", 100, 1.0}, {"node02", 25, 1.0}}, 0.2);
  CHECK(slow_nodes(v) == std::vector<std::string>{"node02"});
  // 100 and 70: mean 85, threshold 68 -> neither.
  CHECK(slow_nodes(judge_nodes({{"node01", 100, -1}, {"node02", 70, -1}}, 0.2)).empty());
}

TEST_CASE("a slow link alone makes a node slow, unmeasured figures are not judged",
          "[node-check]") {
  auto v = judge_nodes({{"a", 100, 10}, {"b", 100, 2}, {"c", 100, 10}}, 0.25);
  CHECK(slow_nodes(v) == std::vector<std::string>{"b"});
  CHECK(v[1].why == "link 2 GB/s is 80% below the median 10");
  CHECK(verdict_line(judge_nodes({{"a", 5, -1}}, 0.2)[0]) == "a gemm 5.0 GFLOP/s: ok");
}

TEST_CASE("a margin outside (0, 1) is refused", "[node-check]") {
  CHECK_THROWS_AS(judge_nodes({{"a", 1, 1}}, 0), hpc::UserError);
  CHECK_THROWS_AS(judge_nodes({{"a", 1, 1}}, 1), hpc::UserError);
  CHECK_THROWS_AS(judge_nodes({{"a", 1, 1}}, -0.5), hpc::UserError);
}

TEST_CASE("the test-only slowdown needs both variables", "[node-check]") {
  CHECK(test_slowdown("node02", nullptr, "node02", nullptr) == 1);
  CHECK(test_slowdown("node02", "0", "node02", nullptr) == 1);
  CHECK(test_slowdown("node02", "1", "node02", nullptr) == 4);
  CHECK(test_slowdown("node02", "1", "node01,node02", "8") == 8);
  CHECK(test_slowdown("node03", "1", "node01,node02", "8") == 1);
  CHECK(test_slowdown("node02", "1", "node02", "0.5") == 1);
}

TEST_CASE("the round-robin schedule pairs every two ranks exactly once", "[node-check]") {
  for (int n = 2; n <= 9; ++n) {
    const int rounds = n + n % 2 - 1;
    std::vector<std::vector<int>> met(size_t(n), std::vector<int>(size_t(n), 0));
    for (int r = 0; r < rounds; ++r) {
      for (int i = 0; i < n; ++i) {
        const int p = round_partner(i, r, n);
        REQUIRE(p != i);
        if (p >= n) continue;                // a bye (odd n)
        CHECK(round_partner(p, r, n) == i);  // the pairing is mutual
        ++met[size_t(i)][size_t(p)];
      }
    }
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) CHECK(met[size_t(i)][size_t(j)] == (i == j ? 0 : 1));
    }
  }
}
