#include "spec/doctor.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "error.h"
#include "hostlist.h"
#include "shell.h"
#include "spec/catalog.h"
#include "spec/spec.h"
#include "subprocess.h"
#include "text.h"

namespace fs = std::filesystem;

namespace hpc {
namespace {

std::vector<std::string> split_ws(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool is_indexed(const std::string& word, const std::string& prefix) {
  if (word.size() <= prefix.size() || !starts_with(word, prefix)) return false;
  return std::all_of(word.begin() + static_cast<long>(prefix.size()), word.end(),
                     [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

const char* const kNotOnPath = "not found on PATH";

const char* status_word(CheckStatus status) {
  switch (status) {
    case CheckStatus::Ok:
      return "OK";
    case CheckStatus::Warn:
      return "WARN";
    case CheckStatus::Missing:
      return "MISSING";
  }
  return "?";
}

bool GpuTopology::any_sys() const {
  return std::any_of(links.begin(), links.end(), [](const GpuLink& l) { return l.kind == "SYS"; });
}

GpuTopology parse_nvidia_topo(const std::string& text) {
  GpuTopology topo;
  std::istringstream in(text);
  std::vector<std::string> header;  // column names, in order (GPU0.., NIC0.., CPU, Affinity, ...)
  std::map<std::string, std::string> nic_devices;  // "NIC0" -> "mlx5_0", from the NIC legend
  std::vector<std::vector<std::string>> gpu_rows;
  for (std::string line; std::getline(in, line);) {
    auto words = split_ws(line);
    if (words.empty()) continue;
    if (header.empty()) {
      if (is_indexed(words[0], "GPU")) header = words;  // the header row starts with GPU0
      continue;
    }
    if (is_indexed(words[0], "GPU")) {
      gpu_rows.push_back(words);
    } else if (words.size() == 2 && words[0].back() == ':' &&
               is_indexed(words[0].substr(0, words[0].size() - 1), "NIC")) {
      nic_devices[words[0].substr(0, words[0].size() - 1)] = words[1];  // "  NIC0: mlx5_0"
    }
  }
  std::vector<size_t> gpu_columns;
  for (size_t i = 0; i < header.size(); ++i) {
    if (is_indexed(header[i], "GPU")) {
      topo.gpus.push_back(header[i]);
      gpu_columns.push_back(i);
    } else if (is_indexed(header[i], "NIC")) {
      topo.nics.push_back(header[i]);
    }
  }
  for (auto& nic : topo.nics) {
    auto it = nic_devices.find(nic);
    if (it != nic_devices.end()) nic += " (" + it->second + ")";
  }
  // Row "GPUi X NV12 SYS ...": the entry for header column c is word c + 1 (after the label).
  for (const auto& row : gpu_rows) {
    auto self = std::find(topo.gpus.begin(), topo.gpus.end(), row[0]);
    if (self == topo.gpus.end()) continue;
    const size_t a = static_cast<size_t>(self - topo.gpus.begin());
    for (size_t k = a + 1; k < gpu_columns.size(); ++k) {
      const size_t word = gpu_columns[k] + 1;
      if (word < row.size()) topo.links.push_back({row[0], topo.gpus[k], row[word]});
    }
  }
  return topo;
}

std::vector<std::string> parse_ibv_devices(const std::string& text) {
  std::vector<std::string> devices;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto words = split_ws(line);
    // "2 HCAs found:", "1 HCA found:", "No IB devices found" are not device names.
    if (words.size() != 1 || words[0].back() == ':') continue;
    devices.push_back(words[0]);
  }
  return devices;
}

std::vector<std::string> socket_ifname_candidates(const std::vector<NetInterface>& interfaces) {
  std::vector<std::string> ib, other;
  for (const auto& i : interfaces) {
    if (!i.up || i.ipv4.empty() || i.name == "lo") continue;
    if (starts_with(i.name, "docker") || starts_with(i.name, "virbr") ||
        starts_with(i.name, "veth") || starts_with(i.name, "br-")) {
      continue;
    }
    (starts_with(i.name, "ib") ? ib : other).push_back(i.name);
  }
  ib.insert(ib.end(), other.begin(), other.end());
  return ib;
}

std::string master_host(const std::string& nodelist, const std::string& hostname,
                        const std::string& ib_suffix) {
  std::string host;
  if (!nodelist.empty()) {
    auto hosts = HostList::expand(nodelist);
    if (!hosts.empty()) host = hosts.front();
  }
  if (host.empty()) host = hostname.substr(0, hostname.find('.'));
  return host + ib_suffix;
}

SlurmGpuSyntax parse_scontrol_config(const std::string& text) {
  SlurmGpuSyntax s;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (key == "SelectType") s.select_type = value;
    if (key == "GresTypes") s.gres_types = value;
  }
  std::istringstream types(s.gres_types);
  for (std::string t; std::getline(types, t, ',');) {
    if (trim(t) == "gpu") s.gres_has_gpu = true;
  }
  if (!s.gres_has_gpu) return s;  // no GPUs scheduled: neither syntax works
  if (s.select_type.find("cons_tres") != std::string::npos) {
    s.gpu_request = "gpus-per-node";
  } else if (s.select_type.find("cons_res") != std::string::npos ||
             s.select_type.find("linear") != std::string::npos) {
    s.gpu_request = "gres";
  }
  return s;
}

DoctorCheck check_gpu_topology(const std::optional<std::string>& topo, const std::string& error) {
  DoctorCheck c{"gpu-topology", CheckStatus::Ok, "", ""};
  if (!topo) {
    c.status = CheckStatus::Missing;
    c.detail = "nvidia-smi: " + error;
    c.suggestion =
        "run on a GPU node (or inside a job); until then keep "
        "profile.nccl.NCCL_P2P_DISABLE = \"auto\" so the job decides on its first node";
    return c;
  }
  GpuTopology t = parse_nvidia_topo(*topo);
  if (t.gpus.empty()) {
    c.status = CheckStatus::Warn;
    c.detail = "nvidia-smi topo -m shows no GPU columns";
    c.suggestion = "check that this node has GPUs and that the job asked for them";
    return c;
  }
  std::map<std::string, int> kinds;
  std::vector<std::string> sys_pairs;
  for (const auto& l : t.links) {
    ++kinds[l.kind];
    if (l.kind == "SYS") sys_pairs.push_back(l.a + "-" + l.b);
  }
  std::vector<std::string> summary;
  for (const auto& [kind, n] : kinds) summary.push_back(fmt::format("{} x{}", kind, n));
  c.detail = fmt::format("{} GPUs ({})", t.gpus.size(), fmt::join(t.gpus, " "));
  if (!summary.empty()) c.detail += fmt::format(", links: {}", fmt::join(summary, ", "));
  if (!t.nics.empty()) c.detail += fmt::format(", NICs: {}", fmt::join(t.nics, " "));
  if (t.any_sys()) {
    c.status = CheckStatus::Warn;
    c.detail += fmt::format(", SYS between {}", fmt::join(sys_pairs, " "));
    c.suggestion =
        "set profile.nccl.NCCL_P2P_DISABLE = 1 (or \"auto\" when only some nodes are "
        "like this): NCCL's P2P transport hangs across SYS links";
  }
  return c;
}

DoctorCheck check_infiniband(const std::vector<std::string>& devices, const std::string& source) {
  DoctorCheck c{"infiniband", CheckStatus::Ok, "", ""};
  if (devices.empty()) {
    c.status = CheckStatus::Missing;
    c.detail = "no InfiniBand devices (" + source + ")";
    c.suggestion = "NCCL will use sockets (TCP); leave NCCL_IB_HCA unset";
    return c;
  }
  c.detail = fmt::format("{} device{}: {} ({})", devices.size(), devices.size() == 1 ? "" : "s",
                         fmt::join(devices, " "), source);
  c.suggestion = fmt::format(
      "profile.nccl.NCCL_IB_HCA = \"{}\" (only when NCCL picks the wrong HCAs; leave out the "
      "ones not on the fabric)",
      fmt::join(devices, ","));
  return c;
}

DoctorCheck check_interfaces(const std::vector<NetInterface>& interfaces) {
  DoctorCheck c{"interfaces", CheckStatus::Ok, "", ""};
  std::vector<std::string> shown;
  for (const auto& i : interfaces) {
    if (i.name == "lo") continue;
    std::string s = i.name + (i.up ? " up" : " down");
    if (!i.ipv4.empty()) s += fmt::format(" {}", fmt::join(i.ipv4, ","));
    shown.push_back(s);
  }
  c.detail = shown.empty() ? "no interfaces besides lo" : fmt::format("{}", fmt::join(shown, "; "));
  auto candidates = socket_ifname_candidates(interfaces);
  if (candidates.empty()) {
    c.status = CheckStatus::Warn;
    c.suggestion =
        "no interface is up with an IPv4 address: NCCL and Gloo cannot reach other nodes";
    return c;
  }
  c.suggestion = "profile.nccl.NCCL_SOCKET_IFNAME = \"" + candidates.front() +
                 "\" and profile.env.GLOO_SOCKET_IFNAME = \"" + candidates.front() + "\"";
  if (candidates.size() > 1)
    c.suggestion += fmt::format(" (candidates: {})", fmt::join(candidates, ", "));
  return c;
}

DoctorCheck check_master_addr(const std::string& host, const std::string& ib_suffix,
                              const std::string& cluster, const std::string& address,
                              const std::string& error) {
  DoctorCheck c{"master-addr", CheckStatus::Ok, "", ""};
  if (!address.empty()) {
    c.detail = host + " -> " + address;
    if (!ib_suffix.empty()) c.detail += " (profile.ib_suffix '" + ib_suffix + "')";
    return c;
  }
  c.status = CheckStatus::Warn;
  c.detail = host + " does not resolve to IPv4: " + error;
  if (!ib_suffix.empty()) {
    c.suggestion = "check profile.ib_suffix ('" + ib_suffix + "' from cluster " + cluster +
                   ") and the cluster's DNS (getent ahostsv4 " + host +
                   "); see docs/troubleshooting.md";
  } else {
    c.suggestion = "check the cluster's DNS (getent ahostsv4 " + host +
                   "); if nodes have another name on InfiniBand, set profile.ib_suffix";
  }
  return c;
}

DoctorCheck check_gpu_request(const std::optional<std::string>& config, const std::string& error,
                              const std::string& profile_gpu_request) {
  DoctorCheck c{"gpu-request", CheckStatus::Ok, "", ""};
  if (!config) {
    c.status = error == kNotOnPath ? CheckStatus::Missing : CheckStatus::Warn;
    c.detail = "scontrol show config: " + error;
    c.suggestion =
        "run where Slurm's commands are; profile.gpu_request stays \"" + profile_gpu_request + "\"";
    return c;
  }
  SlurmGpuSyntax s = parse_scontrol_config(*config);
  c.detail = "SelectType=" + (s.select_type.empty() ? "?" : s.select_type) +
             " GresTypes=" + (s.gres_types.empty() ? "?" : s.gres_types);
  if (!s.gres_has_gpu) {
    c.status = CheckStatus::Warn;
    c.suggestion = "GresTypes has no gpu: this Slurm schedules no GPUs (ask the admins)";
  } else if (s.gpu_request.empty()) {
    c.status = CheckStatus::Warn;
    c.suggestion = "unknown SelectType: profile.gpu_request = \"gres\" is the safe choice";
  } else if (s.gpu_request != profile_gpu_request) {
    c.status = CheckStatus::Warn;
    c.suggestion = "profile.gpu_request = \"" + s.gpu_request + "\" (the profile says \"" +
                   profile_gpu_request + "\"" +
                   (s.gpu_request == "gres" ? ", which this select plugin does not take)" : ")");
  } else {
    c.detail += " -> " + s.gpu_request;
  }
  return c;
}

std::string format_checks(const std::vector<DoctorCheck>& checks) {
  std::string out;
  for (const auto& c : checks) {
    out += fmt::format("{:<8} {}: {}", status_word(c.status), c.name, c.detail);
    if (!c.suggestion.empty()) out += " -> " + c.suggestion;
    out += "\n";
  }
  return out;
}

nlohmann::json checks_to_json(const std::vector<DoctorCheck>& checks) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : checks) {
    list.push_back({{"check", c.name},
                    {"status", status_word(c.status)},
                    {"detail", c.detail},
                    {"suggestion", c.suggestion}});
  }
  return list;
}

// --- what runs programs and reads the machine ---------------------------------------------------
namespace {

constexpr std::chrono::seconds kToolTimeout{20};

// The output of a tool, or nullopt with `error` saying why (not installed, failed, timed out).
std::optional<std::string> tool_output(const std::vector<std::string>& argv, std::string& error) {
  if (!program_on_path(argv.front())) {
    error = kNotOnPath;
    return std::nullopt;
  }
  CommandOptions options;
  options.timeout = kToolTimeout;
  CommandResult r = run_command(argv, options);
  if (!r.ok()) {
    error = comment_text(r.summary(argv.front()));
    return std::nullopt;
  }
  return r.out;
}

std::vector<std::string> infiniband_devices(std::string& source) {
  std::string error;
  if (auto out = tool_output({"ibv_devinfo", "-l"}, error)) {
    source = "ibv_devinfo -l";
    return parse_ibv_devices(*out);
  }
  source = "ibv_devinfo: " + error + "; /sys/class/infiniband";
  std::vector<std::string> devices;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/class/infiniband", ec)) {
    devices.push_back(entry.path().filename().string());
  }
  std::sort(devices.begin(), devices.end());
  return devices;
}

std::vector<NetInterface> network_interfaces() {
  std::map<std::string, NetInterface> by_name;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/class/net", ec)) {
    NetInterface i;
    i.name = entry.path().filename().string();
    std::ifstream state(entry.path() / "operstate");
    std::string word;
    state >> word;
    i.up = word == "up";
    by_name[i.name] = i;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_name) continue;
      NetInterface& i = by_name[a->ifa_name];
      i.name = a->ifa_name;
      // operstate "unknown" (tunnels, some virtual NICs): trust the flags.
      if ((a->ifa_flags & IFF_UP) && (a->ifa_flags & IFF_RUNNING)) i.up = true;
      if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET) {
        char text[INET_ADDRSTRLEN] = {};
        auto* sin = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
        if (inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text)) i.ipv4.push_back(text);
      }
    }
    freeifaddrs(list);
  }
  std::vector<NetInterface> out;
  for (auto& [name, i] : by_name) out.push_back(i);
  return out;
}

// The first IPv4 address of `host`, or "" with `error`.
std::string resolve_ipv4(const std::string& host, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    error = gai_strerror(rc);
    return "";
  }
  std::string address;
  for (addrinfo* a = result; a && address.empty(); a = a->ai_next) {
    char text[INET_ADDRSTRLEN] = {};
    auto* sin = reinterpret_cast<sockaddr_in*>(a->ai_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text)) address = text;
  }
  freeaddrinfo(result);
  if (address.empty()) error = "no IPv4 address";
  return address;
}

DoctorCheck check_slurm_version() {
  DoctorCheck c{"slurm", CheckStatus::Ok, "", ""};
  std::string sinfo_error, scontrol_error;
  auto sinfo = tool_output({"sinfo", "--version"}, sinfo_error);
  auto scontrol = tool_output({"scontrol", "--version"}, scontrol_error);
  if (!sinfo && !scontrol) {
    // Installed but failing (no slurm.conf, controller unreachable) is a warning, not missing.
    c.status = program_on_path("sinfo") || program_on_path("scontrol") ? CheckStatus::Warn
                                                                       : CheckStatus::Missing;
    c.detail = "sinfo: " + sinfo_error + "; scontrol: " + scontrol_error;
    c.suggestion = "run on a login or compute node of the cluster (or load its slurm module)";
    return c;
  }
  c.detail = "sinfo: " + (sinfo ? first_line(*sinfo) : sinfo_error) +
             "; scontrol: " + (scontrol ? first_line(*scontrol) : scontrol_error);
  if (!sinfo || !scontrol) c.status = CheckStatus::Warn;
  return c;
}

}  // namespace

int run_doctor(const std::string& cluster, bool as_json) {
  Catalog catalog = Catalog::from_environment();
  // An unknown --cluster is a bad command line (UserError with a did-you-mean).
  std::optional<LoadedPreset> named;
  if (!cluster.empty()) named = catalog.load(PresetKind::Cluster, cluster);

  // The profile as a job would get it (defaults, ./hpclaunch.json, the profile), under a dummy
  // shape; when that does not resolve, the profile file alone.
  std::string cluster_name = cluster, ib_suffix, gpu_request = "gpus-per-node", profile_note;
  try {
    SpecRequest request;
    request.preset = "1n1g";
    if (!cluster.empty()) request.cluster = cluster;
    // Keys the profile requires (an account) do not matter here: a placeholder fills them.
    if (named && named->content.contains("required") && named->content["required"].is_array()) {
      for (const auto& key : named->content["required"]) {
        if (key.is_string())
          request.sets.push_back("profile." + key.get<std::string>() + "=doctor");
      }
    }
    Spec spec = resolve_spec(catalog, request);
    cluster_name = spec.cluster;
    ib_suffix = spec.profile.ib_suffix;
    gpu_request = spec.profile.gpu_request == GpuRequest::Gres ? "gres" : "gpus-per-node";
  } catch (const UserError& e) {
    if (!named) named = catalog.load(PresetKind::Cluster, cluster.empty() ? "generic" : cluster);
    cluster_name = named->name;
    ib_suffix = named->content.value("ib_suffix", "");
    gpu_request = named->content.value("gpu_request", "gpus-per-node");
    profile_note = comment_text(e.what());
  }

  std::vector<DoctorCheck> checks;
  checks.push_back(
      {"profile", profile_note.empty() ? CheckStatus::Ok : CheckStatus::Warn,
       "cluster " + cluster_name + ", ib_suffix '" + ib_suffix + "', gpu_request " + gpu_request,
       profile_note.empty()
           ? ""
           : "the spec did not resolve (" + profile_note + "); using the profile file alone"});

  std::string error;
  auto topo = tool_output({"nvidia-smi", "topo", "-m"}, error);
  checks.push_back(check_gpu_topology(topo, error));

  std::string ib_source;
  auto devices = infiniband_devices(ib_source);
  checks.push_back(check_infiniband(devices, ib_source));

  checks.push_back(check_interfaces(network_interfaces()));

  const char* nodelist = std::getenv("SLURM_JOB_NODELIST");
  char hostname[256] = {};
  gethostname(hostname, sizeof hostname - 1);
  try {
    const std::string host = master_host(nodelist ? nodelist : "", hostname, ib_suffix);
    std::string resolve_error;
    const std::string address = resolve_ipv4(host, resolve_error);
    auto c = check_master_addr(host, ib_suffix, cluster_name, address, resolve_error);
    c.detail += nodelist && *nodelist ? " (first host of SLURM_JOB_NODELIST)" : " (this host)";
    checks.push_back(c);
  } catch (const UserError& e) {
    checks.push_back({"master-addr", CheckStatus::Warn,
                      "SLURM_JOB_NODELIST: " + comment_text(e.what()),
                      "run inside a job, or unset SLURM_JOB_NODELIST"});
  }

  checks.push_back(check_slurm_version());
  error.clear();
  auto config = tool_output({"scontrol", "show", "config"}, error);
  checks.push_back(check_gpu_request(config, error, gpu_request));

  if (as_json) {
    std::cout << nlohmann::json{{"cluster", cluster_name}, {"checks", checks_to_json(checks)}}.dump(
                     2)
              << "\n";
  } else {
    std::cout << format_checks(checks);
  }
  return 0;
}

}  // namespace hpc
