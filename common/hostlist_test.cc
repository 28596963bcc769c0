// HostList::expand and HostList::compress against `scontrol show hostnames` / `show hostlist`
// of Slurm 22.05 (shared/SLURM-TESTBED.md, "Hostlist ground truth"): what Slurm rejects, text
// after the last bracket included, is rejected. Every literal expansion with 3 or more bracket
// groups below was printed by `scontrol show hostnames` of Slurm 22.05.8.
#include "hostlist.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "error.h"

using hpc::HostList;
using Hosts = std::vector<std::string>;

namespace {

// The message expand() throws for `expr`; fails the test when it does not throw.
std::string expand_error(const std::string& expr) {
  try {
    const Hosts hosts = HostList::expand(expr);
    FAIL("expected hpc::UserError for \"" << expr << "\", got " << hosts.size() << " hosts");
  } catch (const hpc::UserError& e) {
    return e.what();
  }
  return {};
}

// Checks the parts every error message must have: the expression, the column, one line.
void require_error_at(const std::string& expr, int column, const std::string& what) {
  const std::string message = expand_error(expr);
  INFO(message);
  CHECK(message.rfind("hostlist \"", 0) == 0);
  CHECK(message.find("column " + std::to_string(column) + ":") != std::string::npos);
  CHECK(message.find(what) != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

// Slurm 22.05 accepts a ']' only at the end of an item.
bool nothing_after_brackets(const std::string& expr) {
  for (std::size_t i = 0; i < expr.size(); ++i) {
    if (expr[i] == ']' && i + 1 < expr.size() && expr[i + 1] != ',') return false;
  }
  return true;
}

}  // namespace

TEST_CASE("hostlist: ground truth from scontrol show hostnames (Slurm 22.05)", "[hostlist]") {
  CHECK(HostList::expand("node[01-03,7],gpu-a[1-2]") ==
        Hosts{"node01", "node02", "node03", "node7", "gpu-a1", "gpu-a2"});
  CHECK(HostList::expand("a[1-2]b[3-4]") == Hosts{"a1b3", "a1b4", "a2b3", "a2b4"});
  CHECK(HostList::expand("node[1-3]x[1]") == Hosts{"node1x1", "node2x1", "node3x1"});
  CHECK(HostList::expand("x[3,1-2]") == Hosts{"x3", "x1", "x2"});
  CHECK(HostList::expand("node[1-3],node2") == Hosts{"node1", "node2", "node3", "node2"});
  CHECK(HostList::expand("node[009-011]") == Hosts{"node009", "node010", "node011"});
  CHECK(HostList::compress({"node01", "node03", "node02"}) == "node[01,03,02]");
  // `scontrol show hostlist` leaves names with text after their number literal.
  CHECK(HostList::compress({"node01i", "node02i"}) == "node01i,node02i");
  CHECK(HostList::compress({"a1b", "a1b"}) == "a1b,a1b");
  CHECK(HostList::compress({"node1", "node2", "node3x"}) == "node[1-2],node3x");
  CHECK(HostList::compress({"c1-ib", "c2-ib"}) == "c1-ib,c2-ib");
}

TEST_CASE("hostlist: plain names and comma lists", "[hostlist]") {
  CHECK(HostList::expand("login") == Hosts{"login"});
  CHECK(HostList::expand("node01") == Hosts{"node01"});
  CHECK(HostList::expand("node1,node2,node1") == Hosts{"node1", "node2", "node1"});
  CHECK(HostList::expand("node-1") == Hosts{"node-1"});  // '-' outside brackets is text
  CHECK(HostList::expand("[1-3]") == Hosts{"1", "2", "3"});
  CHECK(HostList::expand("n[1,3],m") == Hosts{"n1", "n3", "m"});
  CHECK(HostList::expand("n[5]") == Hosts{"n5"});
  CHECK(HostList::expand("n[2-2]") == Hosts{"n2"});
}

TEST_CASE("hostlist: empty items are skipped as Slurm does", "[hostlist]") {
  CHECK(HostList::expand("a,,b") == Hosts{"a", "b"});
  CHECK(HostList::expand(",a,") == Hosts{"a"});
  CHECK(HostList::expand("n[1-2],,,m[3]") == Hosts{"n1", "n2", "m3"});
}

TEST_CASE("hostlist: zero padding is the width of the low bound", "[hostlist]") {
  CHECK(HostList::expand("n[1-10]") ==
        Hosts{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"});
  CHECK(HostList::expand("n[01-10]") ==
        Hosts{"n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10"});
  CHECK(HostList::expand("n[001-5]") == Hosts{"n001", "n002", "n003", "n004", "n005"});
  CHECK(HostList::expand("n[0]") == Hosts{"n0"});
  CHECK(HostList::expand("n[00]") == Hosts{"n00"});
  CHECK(HostList::expand("n[007]") == Hosts{"n007"});
  CHECK(HostList::expand("n[98-101]") == Hosts{"n98", "n99", "n100", "n101"});

  SECTION("low and high of different widths: Slurm pads to strlen(low) and never cuts") {
    const Hosts wide = HostList::expand("n[08-100]");
    REQUIRE(wide.size() == 93);
    CHECK(wide.front() == "n08");
    CHECK(wide[1] == "n09");
    CHECK(wide[2] == "n10");
    CHECK(wide[91] == "n99");
    CHECK(wide.back() == "n100");
    CHECK(HostList::expand("n[8-010]") == Hosts{"n8", "n9", "n10"});
  }
  SECTION("each range in a group has its own width") {
    CHECK(HostList::expand("n[01-02,3,004]") == Hosts{"n01", "n02", "n3", "n004"});
  }
}

TEST_CASE("hostlist: two bracket groups form a product, left-most slowest", "[hostlist]") {
  CHECK(HostList::expand("r[1-2]n[01-03]") ==
        Hosts{"r1n01", "r1n02", "r1n03", "r2n01", "r2n02", "r2n03"});
  CHECK(HostList::expand("[1-2][3-4]") == Hosts{"13", "14", "23", "24"});
  CHECK(HostList::expand("a[1-2]b[3-4],z") == Hosts{"a1b3", "a1b4", "a2b3", "a2b4", "z"});
  CHECK(HostList::expand("x[3,1]y[2-3,2]") ==
        Hosts{"x3y2", "x3y3", "x3y2", "x1y2", "x1y3", "x1y2"});
}

// Slurm nests the loops as G(n-1), G(n-2), ..., G1 (outermost first), then Gn innermost.
TEST_CASE("hostlist: three bracket groups in Slurm's order: G2 slowest, then G1, G3 fastest",
          "[hostlist]") {
  CHECK(HostList::expand("a[1-2]b[1-2]c[1-2]") ==
        Hosts{"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"});
  CHECK(HostList::expand("a[1-3]b[1-2]c[1-2]") == Hosts{"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2",
                                                        "a3b1c1", "a3b1c2", "a1b2c1", "a1b2c2",
                                                        "a2b2c1", "a2b2c2", "a3b2c1", "a3b2c2"});
  CHECK(HostList::expand("a[1-3]b[1-2]c[1]") ==
        Hosts{"a1b1c1", "a2b1c1", "a3b1c1", "a1b2c1", "a2b2c1", "a3b2c1"});
  CHECK(HostList::expand("x[1,3]y[7-8,2]z[0-1]") == Hosts{"x1y7z0", "x1y7z1", "x3y7z0", "x3y7z1",
                                                          "x1y8z0", "x1y8z1", "x3y8z0", "x3y8z1",
                                                          "x1y2z0", "x1y2z1", "x3y2z0", "x3y2z1"});
  CHECK(HostList::expand("[1-2][3-4][5-6]") ==
        Hosts{"135", "136", "235", "236", "145", "146", "245", "246"});
  CHECK(HostList::expand("r[1-2]n[1-2]-[1-2],z") ==
        Hosts{"r1n1-1", "r1n1-2", "r2n1-1", "r2n1-2", "r1n2-1", "r1n2-2", "r2n2-1", "r2n2-2", "z"});
  CHECK(HostList::expand("a[1,3]b[2]c[5-6]") == Hosts{"a1b2c5", "a1b2c6", "a3b2c5", "a3b2c6"});
}

TEST_CASE("hostlist: four and five bracket groups in Slurm's order", "[hostlist]") {
  // G3 slowest, then G2, then G1, G4 fastest.
  CHECK(HostList::expand("a[1-2]b[3-4]c[5-6]d[7-8]") ==
        Hosts{"a1b3c5d7", "a1b3c5d8", "a2b3c5d7", "a2b3c5d8", "a1b4c5d7", "a1b4c5d8", "a2b4c5d7",
              "a2b4c5d8", "a1b3c6d7", "a1b3c6d8", "a2b3c6d7", "a2b3c6d8", "a1b4c6d7", "a1b4c6d8",
              "a2b4c6d7", "a2b4c6d8"});
  CHECK(HostList::expand("w[1,3]x[1-2]y[05-06]z[9]") == Hosts{"w1x1y05z9", "w3x1y05z9", "w1x2y05z9",
                                                              "w3x2y05z9", "w1x1y06z9", "w3x1y06z9",
                                                              "w1x2y06z9", "w3x2y06z9"});
  CHECK(HostList::expand("p[1]q[1-3]r[1-2]s[1-2]") ==
        Hosts{"p1q1r1s1", "p1q1r1s2", "p1q2r1s1", "p1q2r1s2", "p1q3r1s1", "p1q3r1s2", "p1q1r2s1",
              "p1q1r2s2", "p1q2r2s1", "p1q2r2s2", "p1q3r2s1", "p1q3r2s2"});
  // G4 slowest, then G3, G2, G1, G5 fastest.
  CHECK(HostList::expand("a[1-2]b[1-2]c[1]d[1-2]e[1]") ==
        Hosts{"a1b1c1d1e1", "a2b1c1d1e1", "a1b2c1d1e1", "a2b2c1d1e1", "a1b1c1d2e1", "a2b1c1d2e1",
              "a1b2c1d2e1", "a2b2c1d2e1"});
}

namespace {

// The numbers of one bracket group's inside ("1-2,05"), as written, zero-padded to each low
// bound's width. Test inputs only: no error handling.
Hosts group_numbers(const std::string& inside) {
  Hosts numbers;
  std::size_t begin = 0;
  while (begin <= inside.size()) {
    const std::size_t comma = std::min(inside.find(',', begin), inside.size());
    const std::string range = inside.substr(begin, comma - begin);
    const std::size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const int hi = std::stoi(dash == std::string::npos ? lo : range.substr(dash + 1));
    for (int n = std::stoi(lo); n <= hi; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      numbers.push_back(digits);
    }
    begin = comma + 1;
  }
  return numbers;
}

// An independent model of how Slurm 22.05 expands one item ending in a bracket group, by
// rewriting text: set the last group aside; while the prefix holds a group, substitute each of
// the right-most group's numbers in turn and recurse; at the bottom, append the last group's.
void slurm_model(const std::string& prefix, const Hosts& last, Hosts& out) {
  const std::size_t open = prefix.rfind('[');
  if (open == std::string::npos) {
    for (const std::string& n : last) out.push_back(prefix + n);
    return;
  }
  const std::size_t close = prefix.find(']', open);
  for (const std::string& n : group_numbers(prefix.substr(open + 1, close - open - 1))) {
    slurm_model(prefix.substr(0, open) + n + prefix.substr(close + 1), last, out);
  }
}

Hosts slurm_model(const std::string& item) {
  const std::size_t open = item.rfind('[');
  Hosts out;
  slurm_model(item.substr(0, open), group_numbers(item.substr(open + 1, item.size() - open - 2)),
              out);
  return out;
}

}  // namespace

TEST_CASE("hostlist: expand agrees with a model of Slurm's recursion on random items",
          "[hostlist]") {
  std::mt19937 rng(20240521);
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int by_groups[6] = {};
  for (int trial = 0; trial < 2000; ++trial) {
    const int groups = pick(1, 5);
    std::string item = pick(0, 4) == 0 ? "" : "n";
    for (int g = 0; g < groups; ++g) {
      if (g > 0 && pick(0, 4) != 0) item += std::string(1, static_cast<char>('a' + g)) + "-";
      item += '[';
      const int ranges = pick(1, 3);
      for (int r = 0; r < ranges; ++r) {
        const int lo = pick(0, 12);
        item += (r ? "," : "") + std::string(pick(0, 2) == 0 ? "0" : "") + std::to_string(lo);
        if (pick(0, 1)) item += "-" + std::to_string(lo + pick(0, 2));
      }
      item += ']';
    }
    INFO(item);
    REQUIRE(HostList::expand(item) == slurm_model(item));
    ++by_groups[groups];
  }
  CHECK(by_groups[3] > 300);
  CHECK(by_groups[4] > 300);
  CHECK(by_groups[5] > 300);
}

TEST_CASE("hostlist: text after the last bracket is refused, as Slurm 22.05 refuses it",
          "[hostlist]") {
  // Each of these is "Invalid hostlist" to `scontrol show hostnames` of Slurm 22.05.8: the
  // expression, the column of the text, what the message quotes.
  struct Refused {
    const char* expr;
    int column;
    const char* text;
  };
  for (const Refused& r : {Refused{"n[1,2]x", 7, "\"x\""},
                           {"n[1-2]-", 7, "\"-\""},
                           {"n[1-2]1", 7, "\"1\""},
                           {"bask-pg0309u[05-06]a", 20, "\"a\""},
                           {"jwb[0001-0002]i,login", 15, "\"i\""},
                           {"login,jwb[0001-0002]i", 21, "\"i\""},
                           {"a[1-2]b[1-2]c[1-2]-ib", 19, "\"-ib\""},
                           {"n[1-2].x", 7, "\".x\""},
                           {"[1-2]x", 6, "\"x\""},
                           {"n[1-2]x[3-4]y", 13, "\"y\""}}) {
    require_error_at(r.expr, r.column, std::string("text ") + r.text + " after the last ']'");
  }
  CHECK(expand_error("n[1,2]x").find("end the name with its brackets") != std::string::npos);
  // Text between groups, or before the first one, is fine, as it is to Slurm.
  CHECK(HostList::expand("n[1-2]x[3-4]") == Hosts{"n1x3", "n1x4", "n2x3", "n2x4"});
  CHECK(HostList::expand("[1-2]") == Hosts{"1", "2"});
  CHECK(HostList::expand("n[1-2][3-4]") == Hosts{"n13", "n14", "n23", "n24"});
  CHECK(HostList::expand("a.b[1-2],n1x") == Hosts{"a.b1", "a.b2", "n1x"});
}

TEST_CASE("hostlist: errors name the expression, the column and the fix", "[hostlist]") {
  SECTION("low > high, the message in full") {
    CHECK(expand_error("node[7-5]") ==
          "hostlist \"node[7-5]\": column 6: range 7-5 has low > high; write it as 5-7");
    require_error_at("n[1-2,10-09]", 7, "range 10-09 has low > high");
  }
  SECTION("unbalanced brackets") {
    require_error_at("node[1-3", 5, "'[' is never closed");
    require_error_at("node[1-3],gpu[1", 14, "'[' is never closed");
    require_error_at("node1-3]", 8, "']' without a matching '['");
    require_error_at("node[1-3]]", 10, "']' without a matching '['");
  }
  SECTION("nested brackets") { require_error_at("node[1[2]]", 7, "'[' inside brackets"); }
  SECTION("empty ranges") {
    require_error_at("node[]", 5, "empty range");
    require_error_at("node[1,,2]", 8, "empty item");
    require_error_at("node[1,]", 8, "empty item");
    require_error_at("node[,1]", 6, "empty item");
  }
  SECTION("missing bounds and negative numbers") {
    require_error_at("node[-3]", 6, "no low bound");
    require_error_at("node[1-]", 8, "no high bound");
    require_error_at("node[1--3]", 8, "unexpected '-'");
  }
  SECTION("non-digits in a range") {
    require_error_at("node[1-a]", 8, "unexpected 'a'");
    require_error_at("node[a]", 6, "unexpected 'a'");
    require_error_at("node[1-2-3]", 9, "unexpected '-'");
    require_error_at("node[+1]", 6, "unexpected '+'");
    require_error_at("node[0x10]", 7, "unexpected 'x'");
  }
  SECTION("whitespace and control characters, shown escaped so the message stays one line") {
    require_error_at("node1, node2", 7, "a space");
    require_error_at(" node1", 1, "a space");
    require_error_at("node1 ", 6, "a space");
    require_error_at("node[1 -2]", 7, "a space");
    require_error_at("node1\nnode2", 6, "'\\n'");
    require_error_at("node1\t", 6, "'\\t'");
  }
  SECTION("no hosts at all") {
    require_error_at("", 1, "no host");
    require_error_at(",", 1, "no host");
    require_error_at(",,,", 1, "no host");
  }
  SECTION("numbers too long for a host number") {
    require_error_at("n[1234567890123456789]", 3, "more than 18 digits");
    require_error_at("n[1-99999999999999999999]", 5, "more than 18 digits");
  }
  SECTION("long expressions are shown as an excerpt around the column") {
    std::string expr;
    for (int i = 0; i < 50; ++i) expr += "node" + std::to_string(i) + ",";
    expr += "bad[9-1]";
    const std::string message = expand_error(expr);
    INFO(message);
    CHECK(message.find("...") != std::string::npos);
    CHECK(message.find("bad[9-1]") != std::string::npos);
    CHECK(message.find("column " + std::to_string(expr.size() - 3) + ":") != std::string::npos);
    CHECK(message.size() < 200);
  }
}

TEST_CASE("hostlist: expansion is capped at 1,000,000 hosts", "[hostlist]") {
  SECTION("one range") {
    require_error_at("n[0-1000000]", 3, "more than 1000000 hosts");
    require_error_at("n[0-999999999999999999]", 3, "more than 1000000 hosts");
    require_error_at("n[1-2,0-999999]", 7, "more than 1000000 hosts");
  }
  SECTION("a Cartesian product") {
    require_error_at("a[1-1000]b[1-1000]c[1-2]", 20, "more than 1000000 hosts");
    require_error_at("a[1-999999999]b[1-999999999]", 3, "more than 1000000 hosts");
    // Every group fits; only the product does not, and the arithmetic must not overflow.
    require_error_at("a[1-1000000]b[1-1000000]c[1-1000000]d[1-1000000]", 14,
                     "more than 1000000 hosts");
  }
  SECTION("the sum over items") {
    require_error_at("n[1-600000],m[1-600000]", 14, "more than 1000000 hosts");
    require_error_at("n[1-1000000],x", 14, "more than 1000000 hosts");
  }
  SECTION("exactly the cap is fine") {
    const Hosts hosts = HostList::expand("a[000-999]b[000-999]");
    REQUIRE(hosts.size() == 1'000'000);
    CHECK(hosts.front() == "a000b000");
    CHECK(hosts[1] == "a000b001");
    CHECK(hosts.back() == "a999b999");
  }
}

TEST_CASE("hostlist: compress groups consecutive names and keeps order", "[hostlist]") {
  CHECK(HostList::compress({}) == "");
  CHECK(HostList::compress({"login"}) == "login");
  CHECK(HostList::compress({"node07"}) == "node07");
  CHECK(HostList::compress({"login", "head"}) == "login,head");
  CHECK(HostList::compress({"node01", "node02", "node03", "node7", "gpu-a1", "gpu-a2"}) ==
        "node[01-03,7],gpu-a[1-2]");
  CHECK(HostList::compress({"node1", "node2", "node3", "node2"}) == "node[1-3,2]");
  CHECK(HostList::compress({"node1", "node1"}) == "node[1,1]");
  CHECK(HostList::compress({"x3", "x1", "x2"}) == "x[3,1-2]");
  CHECK(HostList::compress({"node1", "login", "node2"}) == "node1,login,node2");
  CHECK(HostList::compress({"a1", "a2", "b1", "b2", "a3"}) == "a[1-2],b[1-2],a3");
  CHECK(HostList::compress({"1", "2", "3"}) == "[1-3]");
  CHECK(HostList::compress({"n1", "n1", "n2"}) == "n[1,1-2]");
}

TEST_CASE("hostlist: compress never writes text after a bracket (Slurm 22.05 rejects it)",
          "[hostlist]") {
  CHECK(HostList::compress({"bask-pg0309u05a", "bask-pg0309u06a"}) ==
        "bask-pg0309u05a,bask-pg0309u06a");
  CHECK(HostList::compress({"jwb0001i", "jwb0002i", "jwb0003"}) == "jwb0001i,jwb0002i,jwb0003");
  CHECK(HostList::compress({"jwb0001i", "jwb0002", "jwb0003"}) == "jwb0001i,jwb[0002-0003]");
  CHECK(HostList::compress({"gpu1-ib", "gpu2-ib", "gpu3-ib"}) == "gpu1-ib,gpu2-ib,gpu3-ib");
  CHECK(HostList::compress({"a1b", "a1b"}) == "a1b,a1b");
  CHECK(HostList::compress({"node01i", "node02", "node03i"}) == "node01i,node02,node03i");
  CHECK(HostList::compress({"n1.local", "n2.local"}) == "n1.local,n2.local");
}

TEST_CASE("hostlist: compress keeps each name's padding", "[hostlist]") {
  CHECK(HostList::compress({"n9", "n10", "n11"}) == "n[9-11]");
  CHECK(HostList::compress({"n099", "n100"}) == "n[099-100]");
  CHECK(HostList::compress({"n08", "n09", "n10", "n100"}) == "n[08-10,100]");
  CHECK(HostList::compress({"n1", "n01"}) == "n[1,01]");
  CHECK(HostList::compress({"n0", "n00", "n000"}) == "n[0,00,000]");
  CHECK(HostList::compress({"n09", "n010"}) == "n[09,010]");  // [09-10] would print n10
  CHECK(HostList::compress({"n9", "n010"}) == "n[9,010]");
  CHECK(HostList::compress({"n99", "n100", "n0101"}) == "n[99-100,0101]");
}

TEST_CASE("hostlist: compress varies only the number a name ends with", "[hostlist]") {
  CHECK(HostList::compress({"r1n1", "r1n2", "r2n1"}) == "r1n[1-2],r2n1");
  CHECK(HostList::compress({"gpu2-a1", "gpu2-a2"}) == "gpu2-a[1-2]");
  CHECK(HostList::compress({"c1-ib", "c2-ib"}) == "c1-ib,c2-ib");  // no number at the end
  // Digit runs too long for a host number stay literal text.
  const Hosts long_numbers{"n1234567890123456789", "n1234567890123456790"};
  CHECK(HostList::compress(long_numbers) == "n1234567890123456789,n1234567890123456790");
  CHECK(HostList::expand(HostList::compress(long_numbers)) == long_numbers);
}

TEST_CASE("hostlist: compress rejects names a host list cannot hold", "[hostlist]") {
  CHECK_THROWS_AS(HostList::compress({"node1", ""}), hpc::UserError);
  CHECK_THROWS_WITH(HostList::compress({"node1", "a b"}), Catch::Contains("host 2"));
  CHECK_THROWS_AS(HostList::compress({"a,b"}), hpc::UserError);
  CHECK_THROWS_AS(HostList::compress({"n[1]"}), hpc::UserError);
  CHECK_THROWS_AS(HostList::compress({"n]"}), hpc::UserError);
  CHECK_THROWS_WITH(HostList::compress({"a\nb"}), !Catch::Contains("\n"));
}

TEST_CASE("hostlist: compress and expand round-trip on fixed cases", "[hostlist]") {
  for (const char* expr :
       {"node[01-03,7],gpu-a[1-2]", "a[1-2]b[3-4]", "node[1-3]x[1]", "x[3,1-2]", "node[1-3],node2",
        "node[009-011]", "n[08-100]", "bask-pg0309u[05-06]", "n[0,00,000,0000]", "r[1-3]n[01-04]",
        "a[1-2]b[1-2]c[1-2]", "a[1-2]b[3-4]c[5-6]d[7-8]", "x[1,3]y[7-8,2]z[0-1],x1y7z0"}) {
    INFO(expr);
    const Hosts hosts = HostList::expand(expr);
    const std::string compressed = HostList::compress(hosts);
    INFO(compressed);
    CHECK(nothing_after_brackets(compressed));
    CHECK(HostList::expand(compressed) == hosts);
  }
  CHECK(HostList::compress(HostList::expand("node[01-03,7],gpu-a[1-2]")) ==
        "node[01-03,7],gpu-a[1-2]");
  CHECK(HostList::compress(HostList::expand("n[0000-9999]")) == "n[0000-9999]");
  CHECK(HostList::compress(HostList::expand("n[08-100]")) == "n[08-100]");
}

namespace {

// Random host vectors shaped like real node lists: runs of consecutive numbers under one stem,
// with paddings, suffixes, names without digits, duplicates and shuffled stretches.
Hosts random_hosts(std::mt19937& rng) {
  static const std::vector<std::string> kPrefixes{"node", "gpu-a", "n",    "bask-pg0309u", "x1y",
                                                  "",     "c2-",   "r10n", "x1",           "jwb"};
  static const std::vector<std::string> kSuffixes{"", "", "", "a", "-ib", "i", ".local", "b7c"};
  static const std::vector<std::string> kPlainNames{"login", "head-node", "gpu", "a-b"};
  auto pick = [&rng](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };

  Hosts hosts;
  const std::size_t blocks = 1 + pick(6);
  for (std::size_t b = 0; b < blocks; ++b) {
    if (pick(8) == 0) {
      hosts.push_back(kPlainNames[pick(kPlainNames.size())]);
      continue;
    }
    const std::string& prefix = kPrefixes[pick(kPrefixes.size())];
    const std::string& suffix = kSuffixes[pick(kSuffixes.size())];
    const std::size_t width = pick(5);  // 0: natural width
    const std::size_t start = pick(pick(2) == 0 ? 20 : 1200);
    const std::size_t length = 1 + pick(15);
    for (std::size_t n = start; n < start + length; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      hosts.push_back(prefix + digits + suffix);
    }
  }
  const std::size_t duplicates = pick(4);
  for (std::size_t d = 0; d < duplicates; ++d) {
    const std::string copy = hosts[pick(hosts.size())];
    hosts.insert(hosts.begin() + static_cast<std::ptrdiff_t>(pick(hosts.size() + 1)), copy);
  }
  if (pick(3) == 0) {  // shuffle a stretch, as an unsorted node list would be
    const std::size_t first = pick(hosts.size());
    const std::size_t last = first + pick(hosts.size() - first + 1);
    std::shuffle(hosts.begin() + static_cast<std::ptrdiff_t>(first),
                 hosts.begin() + static_cast<std::ptrdiff_t>(last), rng);
  }
  return hosts;
}

}  // namespace

TEST_CASE("hostlist: randomized round trip expand(compress(x)) == x", "[hostlist]") {
  std::mt19937 rng(20240520);
  std::size_t total_hosts = 0;
  // Over the trials whose names all end in their number (only those can share brackets).
  std::size_t numbered_trials = 0;
  std::size_t numbered_chars = 0;
  std::size_t numbered_plain_chars = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const Hosts hosts = random_hosts(rng);
    const std::string compressed = HostList::compress(hosts);
    INFO("trial " << trial << ": " << compressed);
    REQUIRE(nothing_after_brackets(compressed));
    REQUIRE(HostList::expand(compressed) == hosts);
    total_hosts += hosts.size();
    std::size_t plain_chars = 0;
    bool all_numbered = true;
    for (const std::string& host : hosts) {
      plain_chars += host.size() + 1;
      all_numbered = all_numbered && host.back() >= '0' && host.back() <= '9';
    }
    if (all_numbered) {
      ++numbered_trials;
      numbered_chars += compressed.size();
      numbered_plain_chars += plain_chars;
    }
  }
  CHECK(total_hosts > 20000);
  // It actually compresses: runs of up to 15 names collapse into one bracket group.
  CHECK(numbered_trials > 250);
  CHECK(numbered_chars * 2 < numbered_plain_chars);
}

TEST_CASE("hostlist: expansion is linear, not quadratic", "[hostlist]") {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  constexpr int kRepeats = 100;
  std::size_t hosts = 0;
  for (int i = 0; i < kRepeats; ++i) hosts += HostList::expand("n[0000-9999]").size();
  const auto elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  CHECK(hosts == 10000u * kRepeats);
  // The target is well under 1 ms per expansion; 10x headroom for a loaded shared machine.
  CHECK(elapsed / kRepeats < 10.0);

  const Hosts all = HostList::expand("n[0000-9999]");
  CHECK(all.front() == "n0000");
  CHECK(all[1234] == "n1234");
  CHECK(all.back() == "n9999");
}
