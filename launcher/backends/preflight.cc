#include "backends/preflight.h"

#include <algorithm>
#include <optional>
#include <set>

#include <re2/re2.h>

#include "backends/slurm_backend.h"
#include "shell.h"
#include "spec/site_limits.h"
#include "spec/slurm_time.h"
#include "text.h"

namespace hpc {
namespace {

using Fields = std::map<std::string, std::string>;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  for (auto& line : split(s, '\n'))
    if (!trim(line).empty()) lines.push_back(line);
  return lines;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s.empty() ? "none" : s;
}

// Runs a Slurm command on the host. An unreachable controller throws (exit 69); a command the
// host lacks, or another failure, comes back for the caller to name.
CommandResult run_slurm(Host& host, const std::vector<std::string>& argv,
                        const CommandOptions& options = {}) {
  CommandResult r = host.run(argv, options);
  if (r.timed_out || is_controller_unreachable(r.err)) {
    throw BackendUnreachable("preflight: " + argv.front() + " on " + host.name() +
                             " could not reach slurmctld: " +
                             comment_text(first_line(r.timed_out ? "timed out" : r.err)) +
                             "; check that slurmctld is up (scontrol ping), then retry");
  }
  return r;
}

std::string failure_line(const CommandResult& r, const std::string& program) {
  if (!r.spawn_error.empty()) return r.spawn_error;
  std::string text = trim(r.err.empty() ? r.out : r.err);
  return comment_text(first_line(text.empty() ? program + " failed" : text));
}

// The partition a job lands in: the profile's, else the cluster's default.
struct PartitionView {
  std::string name;
  Fields fields;
  bool found = false;
};

// nullopt when scontrol failed: a finding for validate --live, skipped before a submission
// (sbatch then says what is wrong, with its own retries).
std::optional<std::vector<Fields>> read_partitions(Host& host, PreflightReport& report,
                                                   bool failure_is_finding) {
  CommandResult r = run_slurm(host, {"scontrol", "show", "partition", "--oneliner"});
  report.checked.push_back("scontrol show partition");
  if (!r.ok()) {
    const std::string what =
        "scontrol show partition failed on " + host.name() + ": " + failure_line(r, "scontrol");
    if (failure_is_finding)
      report.findings.push_back({"partition", what, "check that Slurm's client commands work"});
    else
      report.skipped.push_back(what);
    return std::nullopt;
  }
  std::vector<Fields> parts;
  for (const auto& line : split_lines(r.out))
    if (line.rfind("PartitionName=", 0) == 0) parts.push_back(parse_slurm_fields(line));
  return parts;
}

PartitionView pick_partition(const std::vector<Fields>& parts, const Spec& spec) {
  PartitionView v;
  v.name = spec.profile.partition;
  for (const auto& p : parts) {
    const std::string name = p.count("PartitionName") ? p.at("PartitionName") : "";
    const bool is_default = p.count("Default") && p.at("Default") == "YES";
    if ((!v.name.empty() && name == v.name) || (v.name.empty() && is_default)) {
      v.name = name;
      v.fields = p;
      v.found = true;
      return v;
    }
  }
  return v;
}

std::string nodes_text(long n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

long field_number(const Fields& f, const std::string& key) {
  auto it = f.find(key);
  if (it == f.end() || !all_digits(it->second) || it->second.size() > 9) return -1;
  return std::stol(it->second);
}

void check_partition_limits(const std::vector<Fields>& parts, const PartitionView& p,
                            const Spec& spec, PreflightReport& report) {
  if (!p.found) {
    std::vector<std::string> names;
    for (const auto& f : parts)
      if (f.count("PartitionName")) names.push_back(f.at("PartitionName"));
    report.findings.push_back({"partition",
                               p.name.empty()
                                   ? "the cluster has no default partition"
                                   : "partition " + p.name + " does not exist on this cluster",
                               "set profile.partition to one of: " + joined(names)});
    return;
  }
  const Fields& f = p.fields;
  const std::string state = f.count("State") ? f.at("State") : "";
  if (state != "UP") {
    report.findings.push_back({"partition", "partition " + p.name + " is " + state,
                               "wait until it is UP, or choose another partition"});
  }
  const long want = slurm_time_seconds(spec.shape.time).value_or(0);
  const std::string max_time = f.count("MaxTime") ? f.at("MaxTime") : "UNLIMITED";
  const long limit = slurm_time_seconds(max_time).value_or(-1);
  if (limit >= 0 && (want < 0 || want > limit)) {
    report.findings.push_back(
        {"time",
         "shape.time " + spec.shape.time + " is over partition " + p.name + "'s MaxTime " +
             max_time,
         "--set shape.time=" + max_time + " (or less), or choose another partition"});
  }
  const long max_nodes = field_number(f, "MaxNodes");
  if (max_nodes >= 0 && spec.shape.nodes > max_nodes) {
    report.findings.push_back({"nodes",
                               std::to_string(spec.shape.nodes) + " nodes requested, partition " +
                                   p.name + " allows " + std::to_string(max_nodes) +
                                   " per job (MaxNodes)",
                               "pick a preset with at most " + nodes_text(max_nodes)});
  } else if (long total = field_number(f, "TotalNodes"); total >= 0 && spec.shape.nodes > total) {
    report.findings.push_back({"nodes",
                               std::to_string(spec.shape.nodes) + " nodes requested, partition " +
                                   p.name + " has " + std::to_string(total),
                               "pick a preset with at most " + nodes_text(total)});
  }
}

// One node as sinfo shows it.
struct NodeView {
  std::string name, state;
  std::map<std::string, long> gpus_by_type;  // "" : untyped; every type also counts under "*"
  long cpus = 0, memory_mb = 0;
  bool up() const {
    static const char* const kDown[] = {"down",  "drain",  "fail",  "maint", "unk",
                                        "inval", "future", "power", "reboot"};
    for (const char* d : kDown)
      if (state.rfind(d, 0) == 0) return false;
    return true;
  }
};

// "gpu:tesla:4,gpu:a100:2(S:0-1)" -> {tesla: 4, a100: 2, *: 6}
void parse_gres(const std::string& gres, NodeView& node) {
  for (const auto& entry : split(gres, ',')) {
    std::string e = entry.substr(0, entry.find('('));
    auto parts = split(e, ':');
    if (parts.size() < 2 || parts[0] != "gpu") continue;
    const std::string type = parts.size() >= 3 ? parts[1] : "";
    const std::string count = parts.back();
    if (!all_digits(count) || count.empty() || count.size() > 6) continue;
    node.gpus_by_type[type] += std::stol(count);
    node.gpus_by_type["*"] += std::stol(count);
  }
}

std::vector<NodeView> read_nodes(Host& host, const std::string& partition,
                                 PreflightReport& report) {
  CommandResult r = run_slurm(host, {"sinfo", "--noheader", "--Node", "--partition=" + partition,
                                     "--format=%N|%G|%c|%m|%T"});
  report.checked.push_back("sinfo");
  if (!r.ok()) {
    report.skipped.push_back("sinfo: " + failure_line(r, "sinfo"));
    return {};
  }
  std::vector<NodeView> nodes;
  for (const auto& line : split_lines(r.out)) {
    auto cols = split(trim(line), '|');
    if (cols.size() != 5) continue;
    NodeView n;
    n.name = cols[0];
    parse_gres(cols[1], n);
    n.cpus = all_digits(cols[2]) && cols[2].size() < 9 ? std::stol(cols[2]) : 0;
    n.memory_mb = all_digits(cols[3]) && cols[3].size() < 12 ? std::stol(cols[3]) : 0;
    n.state = cols[4];
    nodes.push_back(n);
  }
  return nodes;
}

void check_nodes(const std::vector<NodeView>& nodes, const std::string& partition, const Spec& spec,
                 bool nodes_reported, PreflightReport& report) {
  if (nodes.empty()) return;
  const std::string type = spec.profile.gpu_type.empty() ? "*" : spec.profile.gpu_type;
  std::set<std::string> types;
  long max_gpus = 0, max_cpus = 0, max_mem = 0;
  for (const auto& n : nodes) {
    for (const auto& [t, count] : n.gpus_by_type)
      if (t != "*" && !t.empty()) types.insert(t);
    auto it = n.gpus_by_type.find(type);
    max_gpus = std::max(max_gpus, it == n.gpus_by_type.end() ? 0L : it->second);
    max_cpus = std::max(max_cpus, n.cpus);
    max_mem = std::max(max_mem, n.memory_mb);
  }
  if (type != "*" && !types.count(type)) {
    report.findings.push_back(
        {"gres",
         "GPU type " + type + " is not on partition " + partition +
             " (GRES types: " + joined({types.begin(), types.end()}) + ")",
         types.empty() ? "set profile.gpu_type=null" : "set profile.gpu_type to one of them"});
    return;  // the counts below would all say the same
  }
  const long gpus = spec.shape.gpus_per_node;
  const long cpus = static_cast<long>(spec.shape.cpus_per_gpu) * gpus;
  const long mem = slurm_size_mb(spec.shape.mem_per_gpu).value_or(0) * gpus;
  if (gpus > max_gpus) {
    report.findings.push_back({"gres",
                               std::to_string(gpus) + " GPUs per node requested, the nodes of " +
                                   partition + " have at most " + std::to_string(max_gpus),
                               "set profile.max_gpus_per_node=" + std::to_string(max_gpus) +
                                   " and pick a preset within it"});
  }
  if (cpus > max_cpus) {
    report.findings.push_back(
        {"cpus",
         std::to_string(cpus) + " CPUs per node requested (shape.cpus_per_gpu " +
             std::to_string(spec.shape.cpus_per_gpu) + " x " + std::to_string(gpus) +
             " GPUs), the nodes of " + partition + " have at most " + std::to_string(max_cpus),
         "--set shape.cpus_per_gpu=" + std::to_string(max_cpus / std::max(1L, gpus))});
  }
  if (mem > max_mem) {
    report.findings.push_back(
        {"memory",
         std::to_string(mem) + " MB per node requested (shape.mem_per_gpu " +
             spec.shape.mem_per_gpu + " x " + std::to_string(gpus) + "), the nodes of " +
             partition + " have at most " + std::to_string(max_mem) + " MB",
         "--set shape.mem_per_gpu=" + std::to_string(max_mem / std::max(1L, gpus)) + "M"});
  }
  long fitting = 0;
  for (const auto& n : nodes) {
    auto it = n.gpus_by_type.find(type);
    const long g = it == n.gpus_by_type.end() ? 0 : it->second;
    if (n.up() && g >= gpus && n.cpus >= cpus && n.memory_mb >= mem) ++fitting;
  }
  if (!nodes_reported && fitting < spec.shape.nodes) {
    report.findings.push_back(
        {"nodes-up",
         std::to_string(spec.shape.nodes) + " nodes requested, " + std::to_string(fitting) +
             " of partition " + partition + "'s " + std::to_string(nodes.size()) +
             " nodes are up and fit the job",
         "pick a smaller preset, or wait for nodes (sinfo -p " + partition + ")"});
  }
}

bool has_kind(const PreflightReport& report, const std::string& kind) {
  for (const auto& f : report.findings)
    if (f.kind == kind) return true;
  return false;
}

// The user's associations and the QoS table, where accounting runs (sacctmgr).
void check_accounting(Host& host, const Spec& spec, PreflightReport& report) {
  CommandResult who = host.run({"id", "-un"});
  const std::string user = trim(who.out);
  if (!who.ok() || user.empty()) {
    report.skipped.push_back("sacctmgr: the user name on " + host.name() + " is unknown");
    return;
  }
  CommandResult assoc = host.run({"sacctmgr", "--noheader", "--parsable2", "show", "assoc", "where",
                                  "user=" + user, "format=Account,Partition,QOS"});
  if (!assoc.ok()) {
    report.skipped.push_back("sacctmgr (no accounting here?): " + failure_line(assoc, "sacctmgr"));
    return;
  }
  report.checked.push_back("sacctmgr show assoc");
  std::set<std::string> accounts;
  std::map<std::string, std::set<std::string>> qos_of_account;
  for (const auto& line : split_lines(assoc.out)) {
    auto cols = split(trim(line), '|');
    if (cols.size() < 3 || cols[0].empty()) continue;
    accounts.insert(cols[0]);
    for (const auto& q : split(cols[2], ',')) qos_of_account[cols[0]].insert(q);
  }
  const std::string& account = spec.profile.account;
  if (!account.empty() && !accounts.count(account)) {
    report.findings.push_back({"account",
                               "account " + account + " is not associated with user " + user +
                                   " (theirs: " + joined({accounts.begin(), accounts.end()}) + ")",
                               accounts.empty() ? "ask the site to add you to an account"
                                                : "--set profile.account=" + *accounts.begin()});
  }
  const std::string& qos = spec.profile.qos;
  if (qos.empty()) return;
  CommandResult table =
      host.run({"sacctmgr", "--noheader", "--parsable2", "show", "qos", "format=Name,MaxWall"});
  if (!table.ok()) {
    report.skipped.push_back("sacctmgr show qos: " + failure_line(table, "sacctmgr"));
    return;
  }
  report.checked.push_back("sacctmgr show qos");
  std::map<std::string, std::string> max_wall;
  for (const auto& line : split_lines(table.out)) {
    auto cols = split(trim(line), '|');
    if (cols.size() >= 2 && !cols[0].empty()) max_wall[cols[0]] = cols[1];
  }
  if (!max_wall.count(qos)) {
    std::vector<std::string> names;
    for (const auto& [n, w] : max_wall) names.push_back(n);
    report.findings.push_back({"qos", "QoS " + qos + " does not exist on this cluster",
                               "set profile.qos to one of: " + joined(names)});
    return;
  }
  const long want = slurm_time_seconds(spec.shape.time).value_or(0);
  const std::string& wall = max_wall[qos];
  const long limit = wall.empty() ? -1 : slurm_time_seconds(wall).value_or(-1);
  if (limit >= 0 && (want < 0 || want > limit)) {
    report.findings.push_back(
        {"qos-time", "shape.time " + spec.shape.time + " is over QoS " + qos + "'s MaxWall " + wall,
         "--set shape.time=" + wall + " (or less), or a QoS with a longer MaxWall"});
  }
  const auto allowed = qos_of_account.find(account);
  if (!account.empty() && allowed != qos_of_account.end() && !allowed->second.count(qos)) {
    report.findings.push_back(
        {"qos",
         "QoS " + qos + " is not allowed for account " + account +
             " (allowed: " + joined({allowed->second.begin(), allowed->second.end()}) + ")",
         "set profile.qos to one of them"});
  }
}

void test_only(Host& host, const std::string& script, PreflightReport& report) {
  CommandOptions o;
  o.stdin_data = script;
  CommandResult r = run_slurm(host, {"sbatch", "--test-only"}, o);
  report.checked.push_back("sbatch --test-only");
  if (r.ok()) return;
  std::string why = failure_line(r, "sbatch");
  for (const char* prefix : {"sbatch: error: ", "sbatch: "})
    if (why.rfind(prefix, 0) == 0) why = why.substr(std::string(prefix).size());
  report.findings.push_back({"test-only", "sbatch --test-only refuses the job: " + why,
                             "fix what it names (the lines above may say which key)"});
}

}  // namespace

std::map<std::string, std::string> parse_slurm_fields(const std::string& line) {
  std::map<std::string, std::string> kv;
  // RE2: linear in the line's length (a partition's line may list thousands of nodes).
  static const RE2 key(R"((?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=)", RE2::Latin1);
  std::vector<std::pair<size_t, std::pair<size_t, std::string>>> keys;  // value start, key
  re2::StringPiece m[2];
  for (size_t at = 0; key.Match(line, at, line.size(), RE2::UNANCHORED, m, 2);) {
    const size_t start = static_cast<size_t>(m[0].data() - line.data());
    at = start + m[0].size();
    keys.push_back({start, {at, std::string(m[1].data(), m[1].size())}});
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t from = keys[i].second.first;
    const size_t to = i + 1 < keys.size() ? keys[i + 1].first : line.size();
    kv[keys[i].second.second] = trim(line.substr(from, to - from));
  }
  return kv;
}

PreflightReport preflight_quick(Host& host, const Spec& spec) {
  PreflightReport report;
  auto parts = read_partitions(host, report, false);
  if (parts) check_partition_limits(*parts, pick_partition(*parts, spec), spec, report);
  return report;
}

PreflightReport preflight_live(Host& host, const Spec& spec, const std::string& script) {
  PreflightReport report;
  auto parts = read_partitions(host, report, true);
  if (parts) {
    PartitionView p = pick_partition(*parts, spec);
    check_partition_limits(*parts, p, spec, report);
    if (p.found)
      check_nodes(read_nodes(host, p.name, report), p.name, spec, has_kind(report, "nodes"),
                  report);
  }
  check_accounting(host, spec, report);
  test_only(host, script, report);
  return report;
}

}  // namespace hpc
