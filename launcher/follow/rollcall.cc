#include "follow/rollcall.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <tuple>

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

// torchrun's prefix of a worker's tee'd line, after srun's label: "[rank2]:" (the template the
// batch script sets, TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE) gives the global rank; an older
// torchrun's "[default1]:" (${role_name}${local_rank}) the local rank. Strips it from `text`.
enum class Prefix { none, rank, local };
Prefix split_torchrun_prefix(std::string& text, int& n) {
  if (text.empty() || text[0] != '[') return Prefix::none;
  const size_t close = text.find("]:");
  if (close == std::string::npos || close > 40) return Prefix::none;
  size_t digits = close;
  while (digits > 1 && text[digits - 1] >= '0' && text[digits - 1] <= '9') --digits;
  if (digits == close) return Prefix::none;
  auto [end, ec] = std::from_chars(text.data() + digits, text.data() + close, n);
  if (ec != std::errc() || end != text.data() + close) return Prefix::none;
  const std::string role = text.substr(1, digits - 1);
  for (char c : role)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return Prefix::none;
  text.erase(0, close + 2);
  return role == "rank" ? Prefix::rank : Prefix::local;
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

std::map<int, std::vector<PyStack>> parse_python_stacks(const std::vector<std::string>& lines,
                                                        std::map<int, int>* node_of) {
  // One process's dump: its threads, and which one answered ("Current thread").
  struct Dump {
    std::vector<PyStack> threads;
    int current = -1;
  };
  // Whose lines: (prefix, srun label or torchrun's rank, local rank or -1); the dumps of each in
  // the order they began.
  using Source = std::tuple<Prefix, int, int>;
  std::map<Source, std::vector<Dump>> dumps;
  std::map<int, int> label_of_rank;
  for (const auto& line : lines) {
    std::string text;
    const int label = split_label(line, text);
    if (label < 0) continue;
    int n = -1;
    const Prefix prefix = split_torchrun_prefix(text, n);
    const Source source = prefix == Prefix::rank    ? Source{prefix, n, -1}
                          : prefix == Prefix::local ? Source{prefix, label, n}
                                                    : Source{prefix, label, -1};
    if (prefix == Prefix::rank) label_of_rank[n] = label;
    auto& of_source = dumps[source];
    const bool current = text.rfind("Current thread 0x", 0) == 0;
    if (current || text.rfind("Thread 0x", 0) == 0) {
      // A second "Current thread" from one source: another process (torchrun's workers share
      // their node's label when their lines carry no rank) or the same rank asked again.
      if (of_source.empty() || (current && of_source.back().current >= 0))
        of_source.emplace_back();
      Dump& d = of_source.back();
      d.threads.emplace_back();
      if (current) d.current = int(d.threads.size()) - 1;
      continue;
    }
    PyFrame f;
    if (!of_source.empty() && !of_source.back().threads.empty() && parse_frame(text, f))
      of_source.back().threads.back().push_back(f);
  }
  std::map<int, std::vector<PyStack>> stacks;
  auto add = [&](bool ranked) {  // the dumps whose lines name their rank, or the others
    for (auto& [source, of_source] : dumps) {
      if ((std::get<0>(source) == Prefix::rank) != ranked) continue;
      for (auto& d : of_source) {
        if (d.threads.empty()) continue;
        auto& chosen = d.threads[size_t(d.current >= 0 ? d.current : int(d.threads.size()) - 1)];
        if (!chosen.empty()) stacks[std::get<1>(source)].push_back(chosen);
      }
    }
  };
  // Ranks named by torchrun win: then the lines without a rank are torchrun's own.
  add(true);
  if (!stacks.empty()) {
    if (node_of) *node_of = label_of_rank;
    return stacks;
  }
  add(false);
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

std::string rollcall_summary(const std::map<int, std::vector<PyStack>>& stacks, int ranks,
                             const std::function<std::string(int)>& host_of,
                             bool labels_are_nodes) {
  // Labels per place, once for each process that answered there.
  std::map<std::string, std::vector<int>> at;
  int answered = 0;
  for (const auto& [label, of_label] : stacks) {
    // Ranks: the last dump (a rank asked twice answers twice); nodes: each worker's.
    const size_t first = labels_are_nodes ? 0 : of_label.size() - 1;
    for (size_t i = first; i < of_label.size(); ++i, ++answered)
      at[stack_place(of_label[i])].push_back(label);
  }
  if (at.empty()) return "";
  std::vector<std::pair<std::string, std::vector<int>>> groups(at.begin(), at.end());
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  auto hosts_of = [&](const std::vector<int>& labels) {
    std::vector<std::string> hosts;
    for (int l : labels) {
      const std::string h = host_of ? host_of(l) : "";
      if (!h.empty() && std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
    }
    if (hosts.empty() || hosts.size() > 4) return std::string();
    std::string s = " on " + hosts[0];
    for (size_t i = 1; i < hosts.size(); ++i) s += ", " + hosts[i];
    return s;
  };
  // "rank 2 on node02"; under torchrun the labels are nodes, and the ranks are counted.
  auto who = [&](const std::vector<int>& labels) {
    if (labels_are_nodes)
      return fmt::format("{} {}{}", labels.size(), labels.size() > 1 ? "ranks" : "rank",
                         hosts_of(labels));
    return fmt::format("{} {}{}", labels.size() > 1 ? "ranks" : "rank", rank_ranges(labels),
                       hosts_of(labels));
  };
  std::string s = "roll-call: ";
  for (size_t i = 0; i < groups.size(); ++i) {
    const auto& [place, labels] = groups[i];
    if (i > 0) s += "; ";
    if (i == 0 && groups.size() > 1 && labels.size() > 1)
      s += fmt::format("{} of {} ranks at {}", labels.size(), ranks, place);
    else
      s += who(labels) + " at " + place;
  }
  if (labels_are_nodes) {
    if (answered < ranks)
      s += fmt::format("; {} {}: no stack", ranks - answered,
                       ranks - answered > 1 ? "ranks" : "rank");
    return s;
  }
  std::vector<int> silent;
  for (int r = 0; r < ranks; ++r)
    if (!stacks.count(r)) silent.push_back(r);
  if (!silent.empty()) s += "; " + who(silent) + ": no stack";
  return s;
}

}  // namespace hpc
