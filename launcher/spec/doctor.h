// `hpclaunch doctor`: run on a compute node (or inside a job), it looks at what NCCL and Slurm
// will see there and says which profile keys to set. Each check is one line: OK, WARN or
// MISSING (a tool or device that is not there), with a suggestion. Nothing here is fatal.
//
// The parsers are pure (text in, data out) so that captured outputs of nvidia-smi, ibv_devinfo
// and scontrol test them; run_doctor() is the only part that runs programs and reads /sys.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpc {

enum class CheckStatus { Ok, Warn, Missing };
const char* status_word(CheckStatus status);  // "OK", "WARN", "MISSING"

struct DoctorCheck {
  std::string name;  // "gpu-topology", "infiniband", "interfaces", "master-addr", "slurm", ...
  CheckStatus status = CheckStatus::Ok;
  std::string detail;      // what was found
  std::string suggestion;  // what to set or do; empty when nothing
};

// --- nvidia-smi topo -m ---------------------------------------------------------------------

struct GpuLink {
  std::string a, b, kind;  // "GPU0", "GPU1", "SYS" / "NV12" / "PIX" / ...
};

struct GpuTopology {
  std::vector<std::string> gpus;  // GPU column names, in order
  std::vector<std::string>
      nics;                    // NIC columns ("NIC0"), with their device when the legend names it
  std::vector<GpuLink> links;  // each unordered GPU pair once (a < b in column order)
  bool any_sys() const;
};

// Only GPU columns count, as in the template's awk: the header row names the columns, and a
// data row "GPUi" holds one entry per column after its label. NIC columns and rows, the
// CPU/NUMA affinity columns and the legend are skipped. Text without a GPU header: no GPUs.
GpuTopology parse_nvidia_topo(const std::string& text);

// --- ibv_devinfo -l --------------------------------------------------------------------------

// "2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n" -> {mlx5_0, mlx5_1}; "0 HCAs found:" -> {}.
std::vector<std::string> parse_ibv_devices(const std::string& text);

// --- interfaces ------------------------------------------------------------------------------

struct NetInterface {
  std::string name;
  bool up = false;
  std::vector<std::string> ipv4;
};

// Candidates for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME: interfaces that are up and have an
// IPv4 address, InfiniBand (ib*) first, then the others; lo and container bridges (docker*,
// virbr*, veth*, br-*) are never candidates.
std::vector<std::string> socket_ifname_candidates(const std::vector<NetInterface>& interfaces);

// --- MASTER_ADDR -----------------------------------------------------------------------------

// The host the batch script resolves: the first host of `nodelist` (Slurm syntax) when it is not
// empty, else `hostname` cut at its first dot; then `ib_suffix` appended. Throws UserError for a
// bad host list.
std::string master_host(const std::string& nodelist, const std::string& hostname,
                        const std::string& ib_suffix);

// --- scontrol show config --------------------------------------------------------------------

struct SlurmGpuSyntax {
  std::string select_type;  // "select/cons_tres", "" when not in the text
  std::string gres_types;   // "gpu", "gpu,shard", "" when not in the text
  bool gres_has_gpu = false;
  std::string gpu_request;  // profile.gpu_request to use: "gpus-per-node", "gres" or "" (unknown)
};

// "Key = Value" lines; cons_tres takes --gpus-per-node (and --gres), cons_res and linear only
// --gres; GresTypes without gpu means Slurm schedules no GPUs at all.
SlurmGpuSyntax parse_scontrol_config(const std::string& text);

// --- checks from captured outputs (pure) -----------------------------------------------------

// topo: the output of `nvidia-smi topo -m`, nullopt when nvidia-smi is missing or failed
// (`error` says how).
DoctorCheck check_gpu_topology(const std::optional<std::string>& topo, const std::string& error);
DoctorCheck check_infiniband(const std::vector<std::string>& devices, const std::string& source);
DoctorCheck check_interfaces(const std::vector<NetInterface>& interfaces);
// address: what getaddrinfo gave for `host` (IPv4), empty when it did not resolve (`error`).
DoctorCheck check_master_addr(const std::string& host, const std::string& ib_suffix,
                              const std::string& cluster, const std::string& address,
                              const std::string& error);
// What a tool's error says when the tool is not installed: MISSING rather than WARN.
extern const char* const kNotOnPath;  // "not found on PATH"
// config: `scontrol show config`, nullopt when scontrol is missing (error == kNotOnPath) or
// failed (WARN).
DoctorCheck check_gpu_request(const std::optional<std::string>& config, const std::string& error,
                              const std::string& profile_gpu_request);

// One line per check: "OK       gpu-topology: ...; suggestion" (the suggestion after " -> ").
std::string format_checks(const std::vector<DoctorCheck>& checks);
nlohmann::json checks_to_json(const std::vector<DoctorCheck>& checks);

// --- the command -----------------------------------------------------------------------------

// Runs every check on this machine and prints them (text or JSON). `cluster`: a profile name,
// empty for the default one. Returns 0; throws UserError only for an unknown cluster.
int run_doctor(const std::string& cluster, bool as_json);

}  // namespace hpc
