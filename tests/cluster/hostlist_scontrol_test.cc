// HostList against the real thing: `scontrol show hostnames` of the test cluster's Slurm
// (22.05.8 on the host, 24.11.5 in scripts/slurm-matrix.sh's Debian 13 root) is the ground truth
// for a few hundred generated host list expressions, and for the expressions HostList::compress
// writes. Where the two releases differ (24.11 reads text after the last bracket, "node[01-02]i",
// and reads some broken forms differently), both are pinned; HostList keeps 22.05's grammar,
// which refuses where 24.11 reads more, never the other way round.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "error.h"
#include "hostlist.h"
#include "process.h"
#include "testcluster.h"

using hpc::HostList;
using hpc::test::output_lines;
using hpc::test::run_process;
using Hosts = std::vector<std::string>;

namespace {

constexpr int kExpressions = 250;

// The generator's seed: fixed, so a failure repeats; HPC_HOSTLIST_SEED=N explores others.
std::uint32_t seed() {
  if (const char* s = std::getenv("HPC_HOSTLIST_SEED"); s && *s) {
    return static_cast<std::uint32_t>(std::strtoul(s, nullptr, 10));
  }
  return 20240520;
}

struct Generated {
  std::string expr;
  int max_groups = 0;  // most bracket groups in one item
};

// Random host list expressions in the forms Slurm 22.05 accepts: comma-separated items, each a
// plain name or a prefix of letters, digits and dashes followed by 1-4 bracket groups (with text
// or nothing between them, never text after the last); ranges with and without zero padding,
// lists, repeated ranges and repeated items.
class ExpressionGenerator {
 public:
  explicit ExpressionGenerator(std::uint32_t seed) : rng_(seed) {}

  Generated next() {
    for (;;) {
      Generated g;
      std::uint64_t hosts = 0;
      std::vector<std::string> items;
      const int n_items = uniform(1, 4);
      for (int i = 0; i < n_items; ++i) {
        if (!items.empty() && chance(15)) {
          items.push_back(items[uniform(0, static_cast<int>(items.size()) - 1)]);
          hosts += last_count_;
          continue;
        }
        int groups = 0;
        items.push_back(item(groups));
        g.max_groups = std::max(g.max_groups, groups);
        hosts += last_count_;
      }
      if (hosts > 2000) continue;  // keep each scontrol call quick
      for (const auto& it : items) g.expr += (g.expr.empty() ? "" : ",") + it;
      return g;
    }
  }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(int percent) { return uniform(1, 100) <= percent; }

  // Letters, digits and dashes; the first character of a name is a letter or a digit (a leading
  // dash would read as an option to scontrol).
  std::string text(int min_len, int max_len, bool starts_name) {
    static const std::string kLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    static const std::string kAll = kLetters + "0123456789-";
    std::string s;
    const int len = uniform(min_len, max_len);
    for (int i = 0; i < len; ++i) {
      const std::string& from = (i == 0 && starts_name && !chance(10)) ? kLetters : kAll;
      char c = from[uniform(0, static_cast<int>(from.size()) - 1)];
      if (i == 0 && starts_name && c == '-') c = '7';
      s += c;
    }
    return s;
  }

  static std::string padded(int value, int width) {
    std::string digits = std::to_string(value);
    if (static_cast<int>(digits.size()) < width) digits.insert(0, width - digits.size(), '0');
    return digits;
  }

  // "[...]" with 1-3 comma-separated ranges; adds its number of hosts to `count`.
  std::string group(std::uint64_t& count) {
    std::vector<std::string> ranges;
    const int n = uniform(1, 3);
    for (int i = 0; i < n; ++i) {
      if (!ranges.empty() && chance(15)) {  // a repeated range: Slurm keeps the duplicates
        const std::size_t pick = uniform(0, static_cast<int>(ranges.size()) - 1);
        ranges.push_back(ranges[pick]);
        count += range_counts_[pick];
        range_counts_.push_back(range_counts_[pick]);
        continue;
      }
      const int lo = chance(30) ? uniform(0, 9) : uniform(0, 130);
      const int natural = static_cast<int>(std::to_string(lo).size());
      // Zero padding is the width of the low bound as written.
      const int width = chance(50) ? natural : natural + uniform(1, 2);
      std::string r = padded(lo, width);
      int size = 1;
      if (chance(65)) {
        const int hi = lo + uniform(0, 11);
        // The high bound written padded or not; its width never matters to Slurm.
        r += "-" + padded(hi, chance(30) ? width + uniform(0, 1) : 0);
        size = hi - lo + 1;
      }
      ranges.push_back(r);
      range_counts_.push_back(size);
      count += size;
    }
    std::string g = "[";
    for (std::size_t i = 0; i < ranges.size(); ++i) g += (i ? "," : "") + ranges[i];
    range_counts_.clear();
    return g + "]";
  }

  std::string item(int& groups) {
    if (chance(20)) {  // a plain host name, maybe with digits inside: "gpu-a7", "n01x"
      groups = 0;
      last_count_ = 1;
      return text(1, 8, true);
    }
    const int r = uniform(1, 100);
    groups = r <= 40 ? 1 : r <= 65 ? 2 : r <= 85 ? 3 : 4;
    std::string s = text(1, 6, true);
    std::uint64_t product = 1;
    for (int g = 0; g < groups; ++g) {
      if (g > 0 && !chance(15)) s += text(1, 3, false);  // "a[1-2]b[3]" or "a[1-2][3]"
      std::uint64_t count = 0;
      s += group(count);
      product *= count;
    }
    last_count_ = product;
    return s;
  }

  std::mt19937 rng_;
  std::uint64_t last_count_ = 0;
  std::vector<std::uint64_t> range_counts_;
};

std::vector<Generated> generated_expressions() {
  ExpressionGenerator gen(seed());
  std::vector<Generated> all;
  for (int i = 0; i < kExpressions; ++i) all.push_back(gen.next());
  return all;
}

struct SlurmExpansion {
  Hosts hosts;
  std::string error;  // Slurm's complaint ("Invalid hostlist: ..."); empty when accepted
};

// `scontrol show hostnames EXPR`. It exits 0 also for an invalid list, so stderr decides.
SlurmExpansion scontrol_hostnames(const std::string& expr) {
  const auto r = run_process({"scontrol", "show", "hostnames", expr});
  SlurmExpansion e;
  if (!r.ok() || !r.err.empty()) {
    e.error = r.summary();
    if (e.error.empty()) e.error = "(no message)";
    return e;
  }
  e.hosts = output_lines(r.out);
  return e;
}

// "" when equal, else where the two lists first differ.
std::string first_difference(const Hosts& ours, const Hosts& slurm) {
  const std::size_t n = std::min(ours.size(), slurm.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (ours[i] != slurm[i]) {
      return "host " + std::to_string(i) + ": ours \"" + ours[i] + "\", Slurm \"" + slurm[i] +
             "\" (" + std::to_string(ours.size()) + " vs " + std::to_string(slurm.size()) +
             " hosts)";
    }
  }
  if (ours.size() != slurm.size()) {
    return "ours has " + std::to_string(ours.size()) + " hosts, Slurm " +
           std::to_string(slurm.size());
  }
  return "";
}

// Whether this Slurm reads text after an item's last bracket group (24.11 does: "a[1-2]b" is
// a1b a2b; 22.05 refuses it). Asked once.
bool slurm_reads_text_after_brackets() {
  static const bool reads = [] {
    const SlurmExpansion e = scontrol_hostnames("a[1-2]b");
    return e.error.empty() && e.hosts == Hosts{"a1b", "a2b"};
  }();
  return reads;
}

std::string expand_or_error(const std::string& expr, Hosts& out) {
  try {
    out = HostList::expand(expr);
    return "";
  } catch (const hpc::UserError& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("scontrol itself: what the generator relies on", "[hostlist][scontrol]") {
  // Left-most group slowest holds for two groups.
  CHECK(scontrol_hostnames("a[1-2]b[3-4]").hosts == Hosts{"a1b3", "a1b4", "a2b3", "a2b4"});
  CHECK(scontrol_hostnames("node[009-011]").hosts == Hosts{"node009", "node010", "node011"});
  CHECK(scontrol_hostnames("x[3,1-2,3]").hosts == Hosts{"x3", "x1", "x2", "x3"});
  // Text after the last bracket: 22.05 rejects it, on stderr, with exit status 0; 24.11 appends
  // it to every host.
  if (slurm_reads_text_after_brackets()) {
    CHECK(scontrol_hostnames("gpu-a[1-2]b").hosts == Hosts{"gpu-a1b", "gpu-a2b"});
    CHECK(scontrol_hostnames("n[1-2]x[3-4]y").hosts == Hosts{"n1x3y", "n1x4y", "n2x3y", "n2x4y"});
  } else {
    CHECK_FALSE(scontrol_hostnames("gpu-a[1-2]b").error.empty());
  }
  // Three or more groups: Slurm 22.05 nests the loops G(n-1), ..., G1, Gn (outermost first),
  // not left-most slowest. Pinned here so a Slurm upgrade that changes it shows.
  CHECK(scontrol_hostnames("a[1-2]b[1-2]c[1-2]").hosts ==
        Hosts{"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"});
  CHECK(scontrol_hostnames("a[1-2]b[3-4]c[5-6]d[7-8]").hosts ==
        Hosts{"a1b3c5d7", "a1b3c5d8", "a2b3c5d7", "a2b3c5d8", "a1b4c5d7", "a1b4c5d8", "a2b4c5d7",
              "a2b4c5d8", "a1b3c6d7", "a1b3c6d8", "a2b3c6d7", "a2b3c6d8", "a1b4c6d7", "a1b4c6d8",
              "a2b4c6d7", "a2b4c6d8"});
  // 22.05: nothing may follow a bracket. 24.11 reads it, but `show hostlist` of both releases
  // leaves such names literal (so a node list from Slurm never has text after a bracket).
  if (slurm_reads_text_after_brackets()) {
    CHECK(scontrol_hostnames("node[01-02]i").hosts == Hosts{"node01i", "node02i"});
  } else {
    CHECK_FALSE(scontrol_hostnames("node[01-02]i").error.empty());
  }
  CHECK(run_process({"scontrol", "show", "hostlist", "node01i,node02i"}).out ==
        "node01i,node02i\n");
}

TEST_CASE("HostList::expand agrees with scontrol show hostnames", "[hostlist][scontrol]") {
  const auto expressions = generated_expressions();
  int by_groups[5] = {};  // expressions by the most bracket groups in one item
  for (const auto& g : expressions) {
    INFO("expression: " << g.expr << "  (seed " << seed() << ")");
    const SlurmExpansion slurm = scontrol_hostnames(g.expr);
    REQUIRE(slurm.error == "");  // the generator makes only forms Slurm accepts
    Hosts ours;
    REQUIRE(expand_or_error(g.expr, ours) == "");
    // In order, duplicates included, for any number of groups.
    CHECK(first_difference(ours, slurm.hosts) == "");
    ++by_groups[g.max_groups];
  }
  WARN(expressions.size() << " expressions compared in order (seed " << seed() << "): by the most "
                          << "groups in an item, 0: " << by_groups[0] << ", 1: " << by_groups[1]
                          << ", 2: " << by_groups[2] << ", 3: " << by_groups[3]
                          << ", 4: " << by_groups[4]);
  CHECK(expressions.size() >= 200);
  CHECK(by_groups[3] + by_groups[4] >= 20);
}

TEST_CASE("HostList::expand rejects what scontrol rejects", "[hostlist][scontrol]") {
  // Bad ranges: both releases reject them.
  for (const std::string expr : {"x[7-5]", "x[a-b]", "x[-2]", "x[1--2]", "x[]", "x[1-2,]",
                                 "x[1,,2]", "x[,1]", "x[1-2-3]", "x[2-1]"}) {
    INFO("expression: " << expr);
    CHECK_FALSE(scontrol_hostnames(expr).error.empty());
    Hosts ours;
    CHECK_FALSE(expand_or_error(expr, ours).empty());
  }
  // Text after the last bracket, the odd ones of issue 17: 22.05 rejects them; 24.11 reads
  // them ("x[1-2]]" as x1] x2], "[1-2]x" as 1x 2x). We refuse them on either.
  for (const std::string expr : {"x[1-2]]", "x[[1-2]]", "n[1,2]x", "n[1-2]-", "n[1-2]1",
                                 "n[1-2].x", "[1-2]x", "n[1-2]x[3-4]y", "n[1]x,y", "gpu-a[1-2]b",
                                 "jwb[0001-0002]i", "a[1-2]b[1-2]c[1-2]-ib"}) {
    INFO("expression: " << expr);
    CHECK(scontrol_hostnames(expr).error.empty() == slurm_reads_text_after_brackets());
    Hosts ours;
    CHECK_FALSE(expand_or_error(expr, ours).empty());
  }
}

TEST_CASE("HostList::expand refuses the broken forms scontrol reads in its own way",
          "[hostlist][scontrol]") {
  // Slurm makes something of these; we name the column instead. Pinned per release, so that a
  // Slurm that changes its mind shows here. 24.11 rejects four that 22.05 read (empty: rejected).
  const std::vector<std::pair<std::string, Hosts>> lenient_22{
      {"x[1-2", {"x]"}},  {"x[", {"x]"}},      {"x]", {"x]"}}, {"x[1-]", {"x1"}},
      {"x[ 1]", {"x01"}}, {"a b", {"a", "b"}}, {"[", {""}},    {"x[1-2]z[", {"x[1-2]z]"}}};
  const std::vector<std::pair<std::string, Hosts>> lenient_24{
      {"x[1-2", {}},      {"x[", {}},       {"x]", {"x]"}}, {"x[1-]", {"x1"}},
      {"x[ 1]", {"x01"}}, {"a b", {"a", "b"}}, {"[", {}},   {"x[1-2]z[", {}}};
  for (const auto& [expr, slurm_hosts] :
       slurm_reads_text_after_brackets() ? lenient_24 : lenient_22) {
    INFO("expression: " << expr);
    const SlurmExpansion slurm = scontrol_hostnames(expr);
    CHECK(slurm.error.empty() == !slurm_hosts.empty());
    CHECK(slurm.hosts == slurm_hosts);
    Hosts ours;
    CHECK_FALSE(expand_or_error(expr, ours).empty());
  }
}

namespace {

// One random edit of an expression: a character of host-list syntax (or a blank) inserted, a
// character removed, or text appended after the item's end.
std::string mutated(const std::string& expr, std::mt19937& rng) {
  static const std::vector<std::string> kInserts{"[", "]", "-", ",", "x", "0", " ", ".", "ib", ""};
  auto pick = [&rng](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  const std::size_t at = pick(expr.size() + 1);
  switch (pick(3)) {
    case 0:
      return expr.substr(0, at) + kInserts[pick(kInserts.size())] + expr.substr(at);
    case 1:
      return expr.empty() ? expr : expr.substr(0, at) + expr.substr(std::min(at + 1, expr.size()));
    default:
      return expr + kInserts[pick(kInserts.size())];
  }
}

// What we refuse where scontrol makes something of it anyway (see the test above): brackets
// that do not pair up, blanks, a missing high bound, a stray character inside a range.
bool slurm_reads_it_leniently(const std::string& our_error) {
  for (const char* kind : {"is never closed", "without a matching '['", "inside brackets",
                           "in a host list", "has no high bound", "unexpected"}) {
    if (our_error.find(kind) != std::string::npos) return true;
  }
  // 24.11 also reads text after the last bracket.
  return slurm_reads_text_after_brackets() &&
         our_error.find("after the last ']'") != std::string::npos;
}

}  // namespace

TEST_CASE("HostList::expand is never more lenient than scontrol on mutated expressions",
          "[hostlist][scontrol]") {
  std::mt19937 rng(seed() + 17);
  int both_reject = 0, agree = 0, stricter = 0;
  for (const auto& g : generated_expressions()) {
    std::string expr = mutated(g.expr, rng);
    if (rng() % 2) expr = mutated(expr, rng);
    if (expr.empty() || expr[0] == '-') continue;  // scontrol would read an option
    INFO("expression: " << expr << "  (seed " << seed() << ")");
    const SlurmExpansion slurm = scontrol_hostnames(expr);
    Hosts ours;
    const std::string error = expand_or_error(expr, ours);
    if (!slurm.error.empty()) {
      CHECK(error != "");  // Slurm is right: what it rejects, we reject
      ++both_reject;
    } else if (error.empty()) {
      CHECK(first_difference(ours, slurm.hosts) == "");
      ++agree;
    } else {
      CHECK(slurm_reads_it_leniently(error));
      ++stricter;
    }
  }
  WARN("mutated expressions: " << both_reject << " rejected by both, " << agree << " expanded "
                               << "alike, " << stricter << " refused here and read leniently "
                               << "by scontrol");
  CHECK(both_reject >= 40);
  CHECK(agree >= 40);
}

namespace {

// compress(hosts), given to `scontrol show hostnames`, must give back exactly `hosts`.
void check_compress_round_trip(const std::vector<Hosts>& inputs) {
  for (const auto& hosts : inputs) {
    REQUIRE_FALSE(hosts.empty());
    const std::string compressed = HostList::compress(hosts);
    INFO("hosts: " << hosts.front() << " ... (" << hosts.size() << "), compressed: " << compressed);
    const SlurmExpansion back = scontrol_hostnames(compressed);
    CHECK(back.error == "");
    CHECK(first_difference(back.hosts, hosts) == "");
  }
}

}  // namespace

TEST_CASE("HostList::compress writes what scontrol expands back exactly", "[hostlist][scontrol]") {
  std::vector<Hosts> inputs;
  for (const auto& g : generated_expressions()) inputs.push_back(scontrol_hostnames(g.expr).hosts);
  inputs.push_back({"n1", "n1", "n2"});
  inputs.push_back({"x9", "x10", "x09", "x010", "x1", "x01"});
  check_compress_round_trip(inputs);
}

TEST_CASE("HostList::compress of names with text after their number (node01i) suits Slurm",
          "[hostlist][scontrol]") {
  // InfiniBand aliases (JSC: node01i) and the like: Slurm 22.05 rejects "node[01-02]i", so a
  // compressed list must not put text after a bracket (24.11 would read it, but does not write
  // it either).
  const std::vector<Hosts> inputs{{"node01i", "node02i"},
                                  {"gpu1-ib", "gpu2-ib", "gpu3-ib"},
                                  {"a1b", "a1b"},
                                  {"node01i", "node02", "node03i"},
                                  {"node1", "node2", "node3x", "node4x"}};
  check_compress_round_trip(inputs);
  // And as Slurm compresses them itself: such names stay literal.
  for (const auto& hosts : inputs) {
    std::string list;
    for (const auto& host : hosts) list += (list.empty() ? "" : ",") + host;
    const auto r = run_process({"scontrol", "show", "hostlist", list});
    INFO("hosts: " << list << ", scontrol: " << r.summary());
    REQUIRE(r.err.empty());
    CHECK(HostList::compress(hosts) + "\n" == r.out);
  }
}

// `hpclaunch hostlist compress LIST...` reads each argument as a host list, as
// `scontrol show hostlist a,b,c` reads its argument (it used to refuse "a,b,c" as one host name
// with a comma): what it prints must name the hosts scontrol's own answer names, in order.
TEST_CASE("hostlist compress of a host list agrees with scontrol show hostlist",
          "[hostlist][scontrol]") {
  std::vector<std::string> lists = {"a,b,c", "node[1-2],node3", "node01,node03,node02",
                                    "gpu1-ib,gpu2-ib", "n1,n1,n2"};
  int count = 0;
  for (const auto& g : generated_expressions()) {
    if (++count > 60) break;
    lists.push_back(g.expr);
  }
  for (const auto& list : lists) {
    const auto slurm = run_process({"scontrol", "show", "hostlist", list});
    INFO("list: " << list << ", scontrol: " << slurm.summary());
    REQUIRE(slurm.err.empty());
    const std::string ours = HostList::compress(HostList::expand(list));
    CHECK(first_difference(scontrol_hostnames(ours).hosts,
                           scontrol_hostnames(output_lines(slurm.out).at(0)).hosts) == "");
  }
  CHECK(HostList::compress(HostList::expand("a,b,c")) == "a,b,c");
}
