#include "follow/rollcall.h"

#include <algorithm>
#include <charconv>

#include <fmt/core.h>

#include "follow/hang.h"

namespace hpc {

namespace {

// srun's "N: " label: the rank (or node) and the text after it; -1 without one.
int split_label(const std::string& line, std::string& text) {
  int label = -1;
  const size_t colon = line.find(": ");
  if (colon == std::string::npos || colon == 0 || colon > 6) return -1;
  size_t start = line.find_first_not_of(' ');  // srun pads labels to the widest
  auto [end, ec] = std::from_chars(line.data() + start, line.data() + colon, label);
  if (ec != std::errc() || end != line.data() + colon) return -1;
  text = line.substr(colon + 2);
  return label;
}

// `  File "PATH", line N in FUNCTION`
bool parse_frame(const std::string& text, PyFrame& f) {
  const std::string head = "File \"";
  const size_t h = text.find(head);
  if (h == std::string::npos || text.find_first_not_of(' ') != h) return false;
  const size_t q = text.find("\", line ", h + head.size());
  if (q == std::string::npos) return false;
  f.file = text.substr(h + head.size(), q - h - head.size());
  const char* p = text.data() + q + 8;
  const char* e = text.data() + text.size();
  auto [after, ec] = std::from_chars(p, e, f.line);
  if (ec != std::errc()) return false;
  const std::string rest(after, e);
  f.function = rest.rfind(" in ", 0) == 0 ? rest.substr(4) : "???";
  return true;
}

bool library_file(const std::string& path) {
  return path.find("/site-packages/") != std::string::npos ||
         path.find("/dist-packages/") != std::string::npos ||
         path.find("/lib/python3") != std::string::npos || path.rfind("<frozen ", 0) == 0;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::map<int, std::vector<PyFrame>> parse_python_stacks(const std::vector<std::string>& lines) {
  struct Dump {
    std::vector<std::vector<PyFrame>> threads;
    int current = -1;  // the thread that answered
  };
  std::map<int, Dump> dumps;
  for (const auto& line : lines) {
    std::string text;
    const int label = split_label(line, text);
    if (label < 0) continue;
    Dump& d = dumps[label];
    const bool current = text.rfind("Current thread 0x", 0) == 0;
    if (current || text.rfind("Thread 0x", 0) == 0) {
      // A second dump of the same rank (asked twice): start over.
      if (current && d.current >= 0) d = Dump{};
      d.threads.emplace_back();
      if (current) d.current = int(d.threads.size()) - 1;
      continue;
    }
    PyFrame f;
    if (!d.threads.empty() && parse_frame(text, f)) d.threads.back().push_back(f);
  }
  std::map<int, std::vector<PyFrame>> stacks;
  for (auto& [label, d] : dumps) {
    if (d.threads.empty()) continue;
    auto& chosen = d.threads[size_t(d.current >= 0 ? d.current : int(d.threads.size()) - 1)];
    if (!chosen.empty()) stacks[label] = chosen;
  }
  return stacks;
}

std::string stack_place(const std::vector<PyFrame>& stack) {
  if (stack.empty()) return "";
  size_t own = 0;
  while (own < stack.size() && library_file(stack[own].file)) ++own;
  if (own == stack.size()) own = 0;  // all in libraries: the innermost frame
  const PyFrame& f = stack[own];
  std::string s = fmt::format("{}:{} in {}", base_name(f.file), f.line, f.function);
  // The library's innermost frame: its Python entry point (all_reduce, not a decorator's wrapper).
  if (own > 0) s += ", inside " + stack[0].function;
  return s;
}

std::string rollcall_summary(const std::map<int, std::vector<PyFrame>>& stacks, int labels,
                             const std::function<std::string(int)>& host_of,
                             bool labels_are_nodes) {
  if (stacks.empty()) return "";
  std::map<std::string, std::vector<int>> at;
  for (const auto& [label, stack] : stacks) at[stack_place(stack)].push_back(label);
  std::vector<std::pair<std::string, std::vector<int>>> groups(at.begin(), at.end());
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  const char* one = labels_are_nodes ? "node" : "rank";
  const char* many = labels_are_nodes ? "nodes" : "ranks";
  auto who = [&](const std::vector<int>& ranks) {
    std::string s = fmt::format("{} {}", ranks.size() > 1 ? many : one, rank_ranges(ranks));
    std::vector<std::string> hosts;
    for (int r : ranks) {
      const std::string h = host_of ? host_of(r) : "";
      if (!h.empty() && std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
    }
    if (!hosts.empty() && hosts.size() <= 4) {
      s += " on " + hosts[0];
      for (size_t i = 1; i < hosts.size(); ++i) s += ", " + hosts[i];
    }
    return s;
  };
  std::string s = "roll-call: ";
  for (size_t i = 0; i < groups.size(); ++i) {
    const auto& [place, ranks] = groups[i];
    if (i > 0) s += "; ";
    if (i == 0 && groups.size() > 1 && ranks.size() > 1)
      s += fmt::format("{} of {} {} at {}", ranks.size(), labels, many, place);
    else
      s += who(ranks) + " at " + place;
  }
  std::vector<int> silent;
  for (int r = 0; r < labels; ++r)
    if (!stacks.count(r)) silent.push_back(r);
  if (!silent.empty()) s += fmt::format("; {}: no stack", who(silent));
  return s;
}

}  // namespace hpc
