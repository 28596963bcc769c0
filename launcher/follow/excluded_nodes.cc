#include "follow/excluded_nodes.h"

#include <algorithm>
#include <ctime>
#include <ostream>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <re2/re2.h>

#include "atomic_file.h"
#include "error.h"
#include "json_file.h"
#include "spec/catalog.h"
#include "spec/spec.h"

namespace hpc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// std::regex on short inputs only (its backtracking recursion grows with the input): the length
// is checked first, here and in day_number.
bool is_node_name(const std::string& s) {
  static const std::regex name(R"([A-Za-z0-9][A-Za-z0-9._-]{0,63})");
  return s.size() <= 64 && std::regex_match(s, name);
}

// Days since 1970-01-01 of "YYYY-MM-DD"; nullopt for anything else.
std::optional<long> day_number(const std::string& date) {
  static const std::regex form(R"((\d{4})-(\d{2})-(\d{2}))");
  std::smatch m;
  if (date.size() != 10 || !std::regex_match(date, m, form)) return std::nullopt;
  std::tm t{};
  t.tm_year = std::stoi(m[1]) - 1900;
  t.tm_mon = std::stoi(m[2]) - 1;
  t.tm_mday = std::stoi(m[3]);
  const time_t seconds = timegm(&t);
  if (seconds == time_t(-1)) return std::nullopt;
  return long(seconds / 86400);
}

bool still_excluded(const ExcludedNode& n, const std::string& today) {
  const auto seen = day_number(n.date), now = day_number(today);
  return seen && now && *now - *seen < kExcludedNodeDays;
}

json read_all(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return json::object();
  json doc = read_json_file(file);
  if (!doc.is_object()) {
    throw UserError(file.string(), "is not a JSON object of clusters",
                    "remove the file; hpclaunch writes it anew at the next node check");
  }
  return doc;
}

void write_all(const fs::path& file, const json& doc) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  write_file_atomically(file, doc.dump(2) + "\n");
}

std::vector<ExcludedNode> from_json(const json& list, const fs::path& file,
                                    const std::string& cluster) {
  std::vector<ExcludedNode> out;
  if (!list.is_array()) {
    throw UserError(file.string() + ": " + cluster, "is not a list of nodes",
                    "remove it: hpclaunch clusters forget-nodes " + cluster);
  }
  for (const auto& e : list) {
    if (!e.is_object() || !e.contains("node") || !e["node"].is_string()) continue;
    ExcludedNode n;
    n.node = e["node"].get<std::string>();
    if (!is_node_name(n.node)) continue;
    n.date = e.value("date", "");
    n.job = e.value("job", "");
    n.figures = e.value("figures", "");
    out.push_back(n);
  }
  return out;
}

json to_json(const std::vector<ExcludedNode>& nodes) {
  json list = json::array();
  for (const auto& n : nodes) {
    list.push_back({{"node", n.node}, {"date", n.date}, {"job", n.job}, {"figures", n.figures}});
  }
  return list;
}

}  // namespace

std::optional<std::vector<ExcludedNode>> parse_node_check_line(const std::string& line) {
  // A log line (any length): RE2, linear in it; std::regex's recursion overflowed the stack.
  static const RE2 form(R"(hpclaunch: node check: slow node\(s\) (\S+) \((.*)\): .*)", RE2::Latin1);
  std::string names, figures;
  if (!RE2::FullMatch(line, form, &names, &figures)) return std::nullopt;
  std::vector<ExcludedNode> out;
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    ExcludedNode n;
    n.node = names.substr(start, comma - start);
    if (!is_node_name(n.node)) return std::nullopt;
    // This node's part of the figures: "node02 gemm ...; link ...;node05 gemm ..." is cut at
    // the next node's name (below).
    const size_t at = figures.find(n.node + " ");
    n.figures = at == std::string::npos ? figures : figures.substr(at);
    out.push_back(n);
    start = comma + 1;
  }
  // The template joins the nodes' figures with ';' (and one node's reasons with "; ").
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    size_t next = out[i].figures.find(";" + out[i + 1].node + " ");
    if (next == std::string::npos) next = out[i].figures.find("; " + out[i + 1].node + " ");
    if (next != std::string::npos) out[i].figures.resize(next);
  }
  return out;
}

std::optional<fs::path> excluded_nodes_file() {
  const auto dir = Catalog::user_dir();
  if (!dir) return std::nullopt;
  return *dir / "excluded-nodes.json";
}

std::vector<ExcludedNode> remembered_nodes(const fs::path& file, const std::string& cluster) {
  const json doc = read_all(file);
  if (!doc.contains(cluster)) return {};
  return from_json(doc[cluster], file, cluster);
}

std::vector<ExcludedNode> excluded_now(const std::vector<ExcludedNode>& nodes,
                                       const std::string& today) {
  std::vector<ExcludedNode> out;
  for (const auto& n : nodes) {
    if (still_excluded(n, today)) out.push_back(n);
  }
  return out;
}

void remember_nodes(const fs::path& file, const std::string& cluster,
                    const std::vector<ExcludedNode>& nodes, const std::string& today) {
  json doc = read_all(file);
  std::vector<ExcludedNode> kept;
  if (doc.contains(cluster)) kept = excluded_now(from_json(doc[cluster], file, cluster), today);
  for (ExcludedNode n : nodes) {
    n.date = today;
    auto same = std::find_if(kept.begin(), kept.end(),
                             [&](const ExcludedNode& k) { return k.node == n.node; });
    if (same != kept.end()) {
      if (same->job == n.job) n.date = same->date;  // the same job's log, read again
      *same = n;
    } else {
      kept.push_back(n);
    }
  }
  doc[cluster] = to_json(kept);
  write_all(file, doc);
}

size_t forget_nodes(const fs::path& file, const std::string& cluster) {
  json doc = read_all(file);
  if (!doc.contains(cluster)) return 0;
  const size_t count = doc[cluster].is_array() ? doc[cluster].size() : 0;
  doc.erase(cluster);
  write_all(file, doc);
  return count;
}

std::string utc_today() {
  const time_t now = std::time(nullptr);
  std::tm t{};
  gmtime_r(&now, &t);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &t);
  return buf;
}

bool add_remembered_exclusions(Spec& spec, std::ostream& note) {
  const auto file = excluded_nodes_file();
  if (!file) return false;
  const auto nodes = excluded_now(remembered_nodes(*file, spec.cluster), utc_today());
  if (nodes.empty()) return false;
  std::vector<std::string> names;
  for (const auto& n : nodes) names.push_back(n.node);
  const std::string list = fmt::format("{}", fmt::join(names, ","));
  auto& extra = spec.profile.sbatch_extra;
  auto existing = std::find_if(extra.begin(), extra.end(),
                               [](const std::string& e) { return e.rfind("--exclude=", 0) == 0; });
  if (existing != extra.end()) {
    *existing += "," + list;
  } else {
    extra.push_back("--exclude=" + list);
  }
  note << "hpclaunch: excluding " << list << " (named slow by a node check on " << spec.cluster
       << ", kept " << kExcludedNodeDays << " days: hpclaunch clusters show " << spec.cluster
       << "; forget them: hpclaunch clusters forget-nodes " << spec.cluster << ")\n";
  return true;
}

}  // namespace hpc
