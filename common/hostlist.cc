// Slurm host list expressions: expansion (parse + Cartesian product) and compression.
//
// Grammar, as Slurm 22.05's src/common/hostlist.c reads it:
//   list   := item (',' item)*            empty items are skipped, as Slurm does
//   item   := text | (text? '[' ranges ']')+ | ...
//             text and bracket groups in any order, but an item with a group ends with one:
//             "n[1-2]x[3]" is fine, "n[1,2]x" and "n[1-2]-" are refused, as Slurm refuses
//             them. Several groups form a Cartesian product, in Slurm's order (see "Order of a
//             product" below)
//   ranges := range (',' range)*
//   range  := N | lo '-' hi               decimal digits only, lo <= hi
// Zero padding: Slurm sets a range's width to the length of its low bound as written
// (`range->width = strlen(lo)`) and prints every number with "%0*lu". So "[08-100]" gives
// 08 09 ... 99 100, "[8-010]" gives 8 9 10, and "[001-5]" gives 001 ... 005. We do the same.
//
// Order of a product. Slurm first cuts off an item's last group (the one that must end the
// name), then takes the groups of the remaining prefix from the right: for each number of the
// right-most one, in the order written, it writes the number into the prefix and recurses into
// the groups to its left; once no group is left it appends the whole last group. So with groups
// G1 .. Gn the loops nest, outermost first, as G(n-1), G(n-2), ..., G1, Gn:
//   1 group     G1
//   2 groups    G1 slowest, G2 fastest (left-most slowest)
//   3 groups    G2 slowest, then G1, G3 fastest:
//               a[1-2]b[1-2]c[1-2] -> a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 a1b2c2 a2b2c1 a2b2c2
//   4 groups    G3 slowest, then G2, then G1, G4 fastest:
//               a[1-2]b[3-4]c[5-6]d[7-8] -> a1b3c5d7 a1b3c5d8 a2b3c5d7 a2b3c5d8 a1b4c5d7 ...
//               a2b4c5d8 a1b3c6d7 ... a2b4c6d8
// Checked against `scontrol show hostnames` of Slurm 22.05.8 on some 800 random items with 3,
// 4 and 5 groups (lists, repeats, padding, no text between groups).
//
// Where the two differ, we refuse and Slurm accepts, never the other way round: Slurm reads an
// unclosed "x[1-2" as "x]", "x[1-]" as x1, "x[ 1]" as x01 and "a b" as two hosts; we name the
// column instead (tests/cluster/hostlist_scontrol_test.cc pins both lists).
//
// Columns in error messages are 1-based byte offsets into the expression as given.

#include "hostlist.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "error.h"

namespace hpc {
namespace {

// A guard against typos such as n[1-10000000] or a[1-1000]b[1-1000]c[1-1000]: far more hosts
// than any cluster has, and enough to exhaust memory if we expanded them. The fuzz build lowers
// it (fuzz/CMakeLists.txt), so that a fuzzer's inputs stay fast and still reach the limit.
#ifndef HPC_HOSTLIST_MAX_HOSTS
#define HPC_HOSTLIST_MAX_HOSTS 1'000'000
#endif
constexpr std::uint64_t kMaxHosts = HPC_HOSTLIST_MAX_HOSTS;

// 18 decimal digits always fit in uint64_t, so lo, hi, hi - lo + 1 and hi + 1 never overflow.
constexpr std::size_t kMaxDigits = 18;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Host names never contain these; a space most likely means "node1, node2" was typed.
bool is_blank_or_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7f;
}

// Only call on 1..kMaxDigits decimal digits.
std::uint64_t parse_digits(std::string_view digits) {
  std::uint64_t value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

// Appends `value` zero-padded to `width`, as printf("%0*lu") does: never truncated.
void append_padded(std::string& out, std::uint64_t value, std::size_t width) {
  char buf[24];
  const auto result = std::to_chars(buf, buf + sizeof buf, value);
  const auto length = static_cast<std::size_t>(result.ptr - buf);
  if (length < width) out.append(width - length, '0');
  out.append(buf, length);
}

// Error messages must stay on one line, so control characters are shown escaped.
std::string printable(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

// A SLURM_JOB_NODELIST can run to kilobytes; show the part around the error, not all of it.
std::string excerpt_around(std::string_view expr, std::size_t pos) {
  constexpr std::size_t kWhole = 100;
  constexpr std::size_t kContext = 40;
  if (expr.size() <= kWhole) return printable(expr);
  const std::size_t begin = pos > kContext ? pos - kContext : 0;
  const std::size_t end = std::min(expr.size(), pos + kContext);
  std::string out = begin > 0 ? "..." : "";
  out += printable(expr.substr(begin, end - begin));
  if (end < expr.size()) out += "...";
  return out;
}

std::string describe_char(char c) {
  if (c == ' ') return "a space";
  if (is_blank_or_control(c)) return "control character '" + printable(std::string(1, c)) + "'";
  return "'" + std::string(1, c) + "'";
}

// One `N` or `lo-hi` inside brackets. Every number is printed zero-padded to `width`.
struct NumberRange {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::size_t width = 0;
  std::uint64_t size() const { return hi - lo + 1; }
};

// One piece of an item: literal text, or a bracket group (its ranges, in the order written).
struct Segment {
  std::string_view text;
  std::vector<NumberRange> ranges;  // empty for literal text
  std::size_t open = 0;             // offset of '[' for a group
  bool is_group() const { return !ranges.empty(); }
};

// [begin, end) offsets into the expression.
struct Span {
  std::size_t begin = 0;
  std::size_t end = 0;
};

class ExpressionParser {
 public:
  explicit ExpressionParser(std::string_view expr) : expr_(expr) {}

  std::vector<std::string> expand() const {
    std::vector<std::vector<Segment>> items;
    std::uint64_t total = 0;
    for (const Span& item : split_items()) {
      items.push_back(parse_item(item));
      total += count_hosts(items.back(), item, total);
    }
    std::vector<std::string> hosts;
    hosts.reserve(total);
    for (const auto& segments : items) append_hosts(segments, hosts);
    return hosts;
  }

 private:
  [[noreturn]] void fail(std::size_t pos, const std::string& what, const std::string& fix) const {
    throw UserError(
        "hostlist \"" + excerpt_around(expr_, pos) + "\": column " + std::to_string(pos + 1), what,
        fix);
  }

  // Splits at top-level commas (a comma inside brackets separates ranges), checking on the way
  // that brackets balance and do not nest, and that there is no whitespace.
  std::vector<Span> split_items() const {
    std::vector<Span> items;
    std::size_t item_begin = 0;
    bool inside = false;
    std::size_t open = 0;
    for (std::size_t i = 0; i < expr_.size(); ++i) {
      const char c = expr_[i];
      if (is_blank_or_control(c)) {
        fail(i, describe_char(c) + " in a host list",
             "separate hosts with ',' and no spaces, e.g. node1,node2");
      }
      if (c == '[') {
        if (inside) {
          fail(i, "'[' inside brackets (they cannot nest)",
               "close the range with ']' first; a[1-2]b[3-4] is a product");
        }
        inside = true;
        open = i;
      } else if (c == ']') {
        if (!inside) fail(i, "']' without a matching '['", "remove it or add the missing '['");
        inside = false;
      } else if (c == ',' && !inside) {
        add_unless_empty(items, {item_begin, i});
        item_begin = i + 1;
      }
    }
    if (inside) fail(open, "'[' is never closed", "add ']' after the range");
    add_unless_empty(items, {item_begin, expr_.size()});
    if (items.empty()) {
      fail(0, "the host list names no host", "give at least one host, e.g. node[01-04]");
    }
    return items;
  }

  // Slurm skips empty items ("a,,b", a trailing comma), so we do too.
  static void add_unless_empty(std::vector<Span>& items, Span item) {
    if (item.end > item.begin) items.push_back(item);
  }

  // Brackets are known to balance within an item (split_items checked).
  std::vector<Segment> parse_item(Span item) const {
    std::vector<Segment> segments;
    std::size_t i = item.begin;
    while (i < item.end) {
      if (expr_[i] == '[') {
        const std::size_t close = expr_.find(']', i);
        Segment group;
        group.open = i;
        group.ranges = parse_ranges({i + 1, close});
        segments.push_back(std::move(group));
        i = close + 1;
      } else {
        const std::size_t text_end = std::min(expr_.find('[', i), item.end);
        Segment text;
        text.text = expr_.substr(i, text_end - i);
        segments.push_back(std::move(text));
        i = text_end;
      }
    }
    // Slurm 22.05 rejects text after an item's last bracket group ("n[1,2]x", "n[1-2]-"), so
    // we do too: such a name would not reach the same hosts through scontrol, sbatch or srun.
    const bool has_group = std::any_of(segments.begin(), segments.end(),
                                       [](const Segment& s) { return s.is_group(); });
    if (has_group && !segments.back().is_group()) {
      const std::string_view tail = segments.back().text;
      fail(static_cast<std::size_t>(tail.data() - expr_.data()),
           "text \"" + printable(tail) + "\" after the last ']' (Slurm rejects it)",
           "remove it: end the name with its brackets, e.g. node[01-02] or node[01-02]x[1]");
    }
    return segments;
  }

  // The comma-separated ranges between '[' and ']'.
  std::vector<NumberRange> parse_ranges(Span inner) const {
    if (inner.begin == inner.end) {
      fail(inner.begin - 1, "empty range \"[]\"", "put numbers between the brackets, e.g. [1-4]");
    }
    std::vector<NumberRange> ranges;
    std::uint64_t group_size = 0;
    std::size_t begin = inner.begin;
    while (true) {
      const std::size_t comma = expr_.substr(0, inner.end).find(',', begin);
      const std::size_t end = comma == std::string_view::npos ? inner.end : comma;
      if (begin == end) fail(begin, "empty item in a range list", "remove the extra ','");
      ranges.push_back(parse_range({begin, end}));
      group_size += ranges.back().size();
      if (group_size > kMaxHosts) {
        fail(begin,
             "the brackets expand to more than " + std::to_string(kMaxHosts) + " hosts at range " +
                 std::string(expr_.substr(begin, end - begin)),
             "check the bounds");
      }
      if (end == inner.end) return ranges;
      begin = end + 1;
    }
  }

  // `N` or `lo-hi`.
  NumberRange parse_range(Span range) const {
    const std::size_t dash = expr_.substr(0, range.end).find('-', range.begin);
    const Span low{range.begin, dash == std::string_view::npos ? range.end : dash};
    NumberRange parsed;
    parsed.lo = parse_bound(low, "low");
    parsed.hi = parsed.lo;
    parsed.width = low.end - low.begin;
    if (dash == std::string_view::npos) return parsed;

    const Span high{dash + 1, range.end};
    parsed.hi = parse_bound(high, "high");
    if (parsed.lo > parsed.hi) {
      const std::string_view lo_text = text_of(low);
      const std::string_view hi_text = text_of(high);
      fail(range.begin,
           "range " + std::string(lo_text) + "-" + std::string(hi_text) + " has low > high",
           "write it as " + std::string(hi_text) + "-" + std::string(lo_text));
    }
    return parsed;
  }

  std::uint64_t parse_bound(Span bound, const std::string& which) const {
    if (bound.begin == bound.end) {
      fail(bound.begin, "range has no " + which + " bound",
           "write a number N or a range lo-hi, e.g. 1-4 (numbers cannot be negative)");
    }
    for (std::size_t i = bound.begin; i < bound.end; ++i) {
      if (!is_digit(expr_[i])) {
        fail(i, "unexpected " + describe_char(expr_[i]) + " in a range",
             "a range holds numbers N or lo-hi separated by ',', e.g. [1-4,7]");
      }
    }
    if (bound.end - bound.begin > kMaxDigits) {
      fail(bound.begin,
           "number " + std::string(text_of(bound)) + " has more than " +
               std::to_string(kMaxDigits) + " digits",
           "host numbers this long are not supported");
    }
    return parse_digits(text_of(bound));
  }

  std::string_view text_of(Span span) const {
    return expr_.substr(span.begin, span.end - span.begin);
  }

  // Hosts this item expands to, checking before any multiplication that the running total
  // stays within kMaxHosts, so that neither memory nor the arithmetic can blow up.
  std::uint64_t count_hosts(const std::vector<Segment>& segments, Span item,
                            std::uint64_t hosts_before) const {
    std::uint64_t product = 1;
    for (const Segment& segment : segments) {
      if (!segment.is_group()) continue;
      std::uint64_t group_size = 0;
      for (const NumberRange& range : segment.ranges) group_size += range.size();
      if (group_size > (kMaxHosts - hosts_before) / product) {
        fail(segment.open,
             "the host list expands to more than " + std::to_string(kMaxHosts) + " hosts",
             "check the ranges (bracket groups in one name multiply)");
      }
      product *= group_size;
    }
    if (product > kMaxHosts - hosts_before) {  // a plain name after a million hosts
      fail(item.begin, "the host list expands to more than " + std::to_string(kMaxHosts) + " hosts",
           "check the ranges");
    }
    return product;
  }

  // Where one bracket group stands while its item is expanded: a range and a number in it.
  class GroupCursor {
   public:
    explicit GroupCursor(const std::vector<NumberRange>& ranges)
        : ranges_(&ranges), number_(ranges.front().lo) {}

    // Appends the current number, zero-padded to its range's width.
    void append_to(std::string& name) const {
      append_padded(name, number_, (*ranges_)[range_].width);
    }
    // Steps to the next number; after the last one, back to the first, returning true.
    bool advance_wraps() {
      if (number_ < (*ranges_)[range_].hi) {
        ++number_;
        return false;
      }
      range_ = range_ + 1 < ranges_->size() ? range_ + 1 : 0;
      number_ = (*ranges_)[range_].lo;
      return range_ == 0;
    }

   private:
    const std::vector<NumberRange>* ranges_;
    std::size_t range_ = 0;
    std::uint64_t number_;
  };

  // Slurm's nesting of the loops over `groups` bracket groups, outermost first, as indexes into
  // the groups in written order: 3 groups give 1 0 2, 4 give 2 1 0 3, 2 give 0 1.
  static std::vector<std::size_t> slurm_nesting(std::size_t groups) {
    std::vector<std::size_t> nesting;
    if (groups == 0) return nesting;
    for (std::size_t g = groups - 1; g-- > 0;) nesting.push_back(g);
    nesting.push_back(groups - 1);
    return nesting;
  }

  // Appends the item's hosts in Slurm's order (see "Order of a product" at the top), one name
  // at a time into a reused buffer, like an odometer whose wheels are the groups.
  static void append_hosts(const std::vector<Segment>& segments, std::vector<std::string>& out) {
    std::vector<GroupCursor> groups;
    for (const Segment& segment : segments) {
      if (segment.is_group()) groups.emplace_back(segment.ranges);
    }
    const std::vector<std::size_t> nesting = slurm_nesting(groups.size());
    std::string name;
    for (;;) {
      name.clear();
      std::size_t g = 0;
      for (const Segment& segment : segments) {
        if (segment.is_group()) {
          groups[g++].append_to(name);
        } else {
          name += segment.text;
        }
      }
      out.push_back(name);
      // Turn the innermost wheel; carry outwards while a wheel wraps round.
      std::size_t level = nesting.size();
      while (level > 0 && groups[nesting[level - 1]].advance_wraps()) --level;
      if (level == 0) return;
    }
  }

  std::string_view expr_;
};

// ---- compress ----

// A host name cut before the run of digits it ends with: "node0309" -> "node" "0309".
// `digits` is empty when the name does not end in a digit ("node01i", "gpu1-ib": Slurm 22.05
// rejects text after a bracket, so such names stay literal, as `scontrol show hostlist` leaves
// them), or when the run is too long to be a host number.
struct NumberedName {
  std::string_view prefix;
  std::string_view digits;
  std::uint64_t value = 0;

  bool shares_stem(const NumberedName& other) const {
    return !digits.empty() && !other.digits.empty() && prefix == other.prefix;
  }
};

NumberedName split_at_trailing_number(std::string_view host) {
  NumberedName name;
  name.prefix = host;
  const std::size_t end = host.size();
  std::size_t begin = end;
  while (begin > 0 && is_digit(host[begin - 1])) --begin;
  if (begin == end || end - begin > kMaxDigits) return name;
  name.prefix = host.substr(0, begin);
  name.digits = host.substr(begin);
  name.value = parse_digits(name.digits);
  return name;
}

// A name that the expression grammar cannot hold would not come back out of expand().
void check_representable(const std::string& host, std::size_t index) {
  const std::string where =
      "host list: host " + std::to_string(index + 1) + " \"" + printable(host) + "\"";
  if (host.empty()) throw UserError(where, "is empty", "remove the empty host name");
  for (char c : host) {
    if (is_blank_or_control(c) || c == ',' || c == '[' || c == ']') {
      throw UserError(where, "contains " + describe_char(c),
                      "pass each host as its own argument (host names cannot contain spaces, "
                      "commas or brackets)");
    }
  }
}

// Whether expanding a range of padding width `width` prints this number as `digits`: numbers
// are padded up to the width, never cut, so a longer number must not start with '0'.
bool prints_as(std::string_view digits, std::size_t width) {
  return digits.size() == width || (digits.size() > width && digits.front() != '0');
}

// Writes the ranges for names sharing one stem, e.g. "01-03,05,02", keeping their order.
void append_ranges(const std::vector<NumberedName>& names, std::size_t first, std::size_t last,
                   std::string& out) {
  std::size_t i = first;
  while (i < last) {
    const NumberedName& low = names[i];
    std::size_t high = i;
    while (high + 1 < last && names[high + 1].value == names[high].value + 1 &&
           prints_as(names[high + 1].digits, low.digits.size())) {
      ++high;
    }
    if (i > first) out += ',';
    out += low.digits;
    if (high > i) {
      out += '-';
      out += names[high].digits;
    }
    i = high + 1;
  }
}

}  // namespace

std::vector<std::string> HostList::expand(std::string_view expr) {
  return ExpressionParser(expr).expand();
}

// Consecutive names that differ only in the number they end with share one bracket group; the
// input order is kept (not sorted), as `scontrol show hostlist` does, so the expansion is exact,
// duplicates included. A bracket always ends its item (Slurm 22.05 rejects "node[01-02]i"), and
// only one group is written, so the order of several groups never comes into it.
// Throws UserError for a name the grammar cannot hold (empty, or with a space, ',', '[', ']').
// An empty vector gives "".
std::string HostList::compress(const std::vector<std::string>& hosts) {
  std::vector<NumberedName> names;
  names.reserve(hosts.size());
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    check_representable(hosts[i], i);
    names.push_back(split_at_trailing_number(hosts[i]));
  }

  std::string out;
  std::size_t i = 0;
  while (i < names.size()) {
    std::size_t end = i + 1;
    while (end < names.size() && names[i].shares_stem(names[end])) ++end;
    if (!out.empty()) out += ',';
    if (end == i + 1) {
      out += hosts[i];  // a lone host reads better without brackets, as Slurm writes it
    } else {
      out += names[i].prefix;
      out += '[';
      append_ranges(names, i, end, out);
      out += ']';  // always the end of the item: Slurm allows nothing after it
    }
    i = end;
  }
  return out;
}

}  // namespace hpc
