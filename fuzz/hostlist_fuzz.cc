// Fuzz target: Slurm host lists (common/hostlist.h), which the launcher reads from profiles and
// squeue and the trainer from SLURM_JOB_NODELIST. The input is read twice: as one expression to
// expand, and as host names, one a line, to compress.
//
// Properties, besides the sanitizers:
//   - expand returns hosts or throws a one-line UserError (property.h);
//   - every host it returns is a name compress accepts, and compress(expand(x)) expands to the
//     same hosts, in the same order, duplicates kept;
//   - any list of names compresses to an expression that expands to exactly those names, or is
//     refused because a name is empty or holds a blank, a control character, ',', '[' or ']'.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hostlist.h"
#include "property.h"

namespace {

using Hosts = std::vector<std::string>;

// The characters compress is documented to refuse in a name.
bool grammar_cannot_hold(const std::string& host) {
  if (host.empty()) return true;
  for (char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == ',' || c == '[' || c == ']') return true;
  }
  return false;
}

std::string joined(const Hosts& hosts) {
  std::string out;
  for (const auto& h : hosts) out += (out.empty() ? "" : " ") + h;
  return out;
}

// compress, then expand again: the same hosts must come back.
void check_round_trip(const Hosts& hosts, const char* property) {
  std::string expression;
  Hosts back;
  auto refused = hpc::fuzz::refusal([&] {
    expression = hpc::HostList::compress(hosts);
    back = hosts.empty() ? Hosts{} : hpc::HostList::expand(expression);
  });
  hpc::fuzz::check(!refused, property, refused.value_or("") + " <- " + joined(hosts));
  hpc::fuzz::check(back == hosts, property, expression + " <- " + joined(hosts));
}

void expand_and_back(const std::string& expression) {
  Hosts hosts;
  if (hpc::fuzz::refusal([&] { hosts = hpc::HostList::expand(expression); })) return;
  hpc::fuzz::check(!hosts.empty(), "an expression expands to at least one host", expression);
  for (const auto& host : hosts) {
    hpc::fuzz::check(!grammar_cannot_hold(host), "an expanded host is a valid name",
                     host + " <- " + expression);
  }
  check_round_trip(hosts, "compress(expand(x)) expands to expand(x)");
}

void compress_and_back(std::string_view input) {
  Hosts names;
  std::size_t start = 0;
  while (start <= input.size()) {
    const std::size_t end = std::min(input.find('\n', start), input.size());
    names.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }
  if (input.empty()) names.clear();
  bool representable = true;
  for (const auto& name : names) representable = representable && !grammar_cannot_hold(name);
  if (representable) {
    check_round_trip(names, "expand(compress(names)) is names");
  } else {
    auto refused = hpc::fuzz::refusal([&] { hpc::HostList::compress(names); });
    hpc::fuzz::check(refused.has_value(), "compress refuses a name the grammar cannot hold",
                     joined(names));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  expand_and_back(input);
  compress_and_back(input);
  return 0;
}
