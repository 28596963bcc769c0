// The doctor's parsers against outputs in the shape nvidia-smi, ibv_devinfo and scontrol print
// them (tabs, the " X " self entries, the legend, NIC columns and rows), and the checks built
// from them.
#include "spec/doctor.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "error.h"

using namespace hpc;

namespace {

// DGX-like node: 4 GPUs fully connected by NVLink, two NUMA nodes.
const char* kTopoNvLink =
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV4\tNV4\tNV4\t0-31\t0\t\tN/A\n"
    "GPU1\tNV4\t X \tNV4\tNV4\t0-31\t0\t\tN/A\n"
    "GPU2\tNV4\tNV4\t X \tNV4\t32-63\t1\t\tN/A\n"
    "GPU3\tNV4\tNV4\tNV4\t X \t32-63\t1\t\tN/A\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., "
    "QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
    "within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
    "Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n";

// DAIC-like node: PCIe GPUs, two on each socket (SYS across them).
const char* kTopoSys =
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNODE\tSYS\tSYS\t0-15,32-47\t0\n"
    "GPU1\tNODE\t X \tSYS\tSYS\t0-15,32-47\t0\n"
    "GPU2\tSYS\tSYS\t X \tNODE\t16-31,48-63\t1\n"
    "GPU3\tSYS\tSYS\tNODE\t X \t16-31,48-63\t1\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., "
    "QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
    "within a NUMA node\n";

// Two NVLinked GPUs and two HCAs: the NICs are SYS from GPU1, which must not count (GPU columns
// only, as in the template's awk).
const char* kTopoNics =
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV12\tPXB\tSYS\t0-23\t0\t\tN/A\n"
    "GPU1\tNV12\t X \tSYS\tPXB\t24-47\t1\t\tN/A\n"
    "NIC0\tPXB\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tPXB\tSYS\t X \t\t\t\t\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., "
    "QPI/UPI)\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
    "\n"
    "NIC Legend:\n"
    "\n"
    "  NIC0: mlx5_0\n"
    "  NIC1: mlx5_1\n";

// Excerpts of `scontrol show config` (Slurm 22.05 / 23.02).
const char* kConfigConsTres =
    "Configuration data as of 2026-11-20T10:12:03\n"
    "AccountingStorageBackupHost = (null)\n"
    "AccountingStorageEnforce = associations,limits,qos\n"
    "AccountingStorageTRES   = cpu,mem,energy,node,billing,fs/disk,vmem,pages,gres/gpu\n"
    "GresTypes               = gpu\n"
    "SchedulerType           = sched/backfill\n"
    "SelectType              = select/cons_tres\n"
    "SelectTypeParameters    = CR_CORE_MEMORY\n"
    "SLURM_VERSION           = 22.05.8\n";
const char* kConfigConsRes =
    "Configuration data as of 2026-11-20T10:12:03\n"
    "GresTypes               = gpu,mps\n"
    "SelectType              = select/cons_res\n"
    "SelectTypeParameters    = CR_CPU_MEMORY\n"
    "SLURM_VERSION           = 20.02.7\n";
const char* kConfigNoGpu =
    "GresTypes               = (null)\n"
    "SelectType              = select/cons_tres\n";

}  // namespace

TEST_CASE("topo: NVLink matrix has every pair once and no SYS", "[doctor]") {
  GpuTopology t = parse_nvidia_topo(kTopoNvLink);
  CHECK(t.gpus == std::vector<std::string>{"GPU0", "GPU1", "GPU2", "GPU3"});
  CHECK(t.nics.empty());
  REQUIRE(t.links.size() == 6);
  for (const auto& l : t.links) CHECK(l.kind == "NV4");
  CHECK_FALSE(t.any_sys());
  DoctorCheck c = check_gpu_topology(std::string(kTopoNvLink), "");
  CHECK(c.status == CheckStatus::Ok);
  CHECK(c.detail.find("NV4 x6") != std::string::npos);
  CHECK(c.suggestion.empty());
}

TEST_CASE("topo: SYS between GPUs suggests NCCL_P2P_DISABLE", "[doctor]") {
  GpuTopology t = parse_nvidia_topo(kTopoSys);
  CHECK(t.gpus.size() == 4);
  CHECK(t.any_sys());
  int sys = 0;
  for (const auto& l : t.links) sys += l.kind == "SYS";
  CHECK(sys == 4);  // 0-2 0-3 1-2 1-3
  DoctorCheck c = check_gpu_topology(std::string(kTopoSys), "");
  CHECK(c.status == CheckStatus::Warn);
  CHECK(c.detail.find("SYS between GPU0-GPU2 GPU0-GPU3 GPU1-GPU2 GPU1-GPU3") != std::string::npos);
  CHECK(c.suggestion.find("profile.nccl.NCCL_P2P_DISABLE = 1") != std::string::npos);
}

TEST_CASE("topo: NIC columns are not GPU links, the NIC legend names them", "[doctor]") {
  GpuTopology t = parse_nvidia_topo(kTopoNics);
  CHECK(t.gpus == std::vector<std::string>{"GPU0", "GPU1"});
  CHECK(t.nics == std::vector<std::string>{"NIC0 (mlx5_0)", "NIC1 (mlx5_1)"});
  REQUIRE(t.links.size() == 1);
  CHECK(t.links[0].a == "GPU0");
  CHECK(t.links[0].b == "GPU1");
  CHECK(t.links[0].kind == "NV12");
  CHECK_FALSE(t.any_sys());
  CHECK(check_gpu_topology(std::string(kTopoNics), "").status == CheckStatus::Ok);
}

TEST_CASE("topo: no GPU header, or no nvidia-smi", "[doctor]") {
  CHECK(parse_nvidia_topo("").gpus.empty());
  CHECK(parse_nvidia_topo(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
            .gpus.empty());
  CHECK(check_gpu_topology(std::string(""), "").status == CheckStatus::Warn);
  DoctorCheck c = check_gpu_topology(std::nullopt, "not found on PATH");
  CHECK(c.status == CheckStatus::Missing);
  CHECK(c.detail == "nvidia-smi: not found on PATH");
}

TEST_CASE("ibv_devinfo -l: device names, none", "[doctor]") {
  CHECK(parse_ibv_devices("2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n") ==
        std::vector<std::string>{"mlx5_0", "mlx5_1"});
  CHECK(parse_ibv_devices("1 HCA found:\n\tmlx5_bond_0\n") ==
        std::vector<std::string>{"mlx5_bond_0"});
  CHECK(parse_ibv_devices("0 HCAs found:\n").empty());
  CHECK(parse_ibv_devices("No IB devices found\n").empty());
  DoctorCheck ib = check_infiniband({"mlx5_0", "mlx5_1"}, "ibv_devinfo -l");
  CHECK(ib.status == CheckStatus::Ok);
  CHECK(ib.suggestion.find("NCCL_IB_HCA = \"mlx5_0,mlx5_1\"") != std::string::npos);
  DoctorCheck none = check_infiniband({}, "/sys/class/infiniband");
  CHECK(none.status == CheckStatus::Missing);
  CHECK(none.detail.find("no InfiniBand devices") != std::string::npos);
}

TEST_CASE("interfaces: ib first, then the others, lo, down and bridges skipped", "[doctor]") {
  std::vector<NetInterface> ifs = {
      {"docker0", true, {"172.17.0.1"}}, {"eno1", true, {"10.1.0.5"}}, {"eno2", false, {}},
      {"ib0", true, {"10.2.0.5"}},       {"lo", true, {"127.0.0.1"}},  {"ib1", true, {}},
  };
  CHECK(socket_ifname_candidates(ifs) == std::vector<std::string>{"ib0", "eno1"});
  DoctorCheck c = check_interfaces(ifs);
  CHECK(c.status == CheckStatus::Ok);
  CHECK(c.detail.find("eno2 down") != std::string::npos);
  CHECK(c.detail.find("lo") == std::string::npos);
  CHECK(c.suggestion.find("NCCL_SOCKET_IFNAME = \"ib0\"") != std::string::npos);
  CHECK(c.suggestion.find("GLOO_SOCKET_IFNAME = \"ib0\"") != std::string::npos);
  CHECK(check_interfaces({{"lo", true, {"127.0.0.1"}}}).status == CheckStatus::Warn);
}

TEST_CASE("master host: first host of the node list, else the short host name, plus suffix",
          "[doctor]") {
  CHECK(master_host("jwb[0012-0015]", "login1.jsc", "i") == "jwb0012i");
  CHECK(master_host("", "gpu07.daic.tudelft.nl", "") == "gpu07");
  CHECK(master_host("localhost", "x", "") == "localhost");
  CHECK_THROWS_AS(master_host("node[3-1]", "x", ""), UserError);
  CHECK(check_master_addr("localhost", "", "generic", "127.0.0.1", "").detail ==
        "localhost -> 127.0.0.1");
  DoctorCheck bad = check_master_addr("jwb0012i", "i", "jsc", "", "Name or service not known");
  CHECK(bad.status == CheckStatus::Warn);
  CHECK(bad.suggestion.find("profile.ib_suffix ('i' from cluster jsc)") != std::string::npos);
}

TEST_CASE("scontrol show config: GPU request syntax", "[doctor]") {
  SlurmGpuSyntax tres = parse_scontrol_config(kConfigConsTres);
  CHECK(tres.select_type == "select/cons_tres");
  CHECK(tres.gres_types == "gpu");
  CHECK(tres.gres_has_gpu);
  CHECK(tres.gpu_request == "gpus-per-node");
  SlurmGpuSyntax res = parse_scontrol_config(kConfigConsRes);
  CHECK(res.gres_has_gpu);
  CHECK(res.gpu_request == "gres");
  SlurmGpuSyntax none = parse_scontrol_config(kConfigNoGpu);
  CHECK_FALSE(none.gres_has_gpu);
  CHECK(none.gpu_request.empty());

  CHECK(check_gpu_request(std::string(kConfigConsTres), "", "gpus-per-node").status ==
        CheckStatus::Ok);
  CHECK(check_gpu_request(std::string(kConfigConsTres), "", "gres").status == CheckStatus::Warn);
  DoctorCheck wrong = check_gpu_request(std::string(kConfigConsRes), "", "gpus-per-node");
  CHECK(wrong.status == CheckStatus::Warn);
  CHECK(wrong.suggestion.find("profile.gpu_request = \"gres\"") != std::string::npos);
  CHECK(check_gpu_request(std::string(kConfigNoGpu), "", "gres").suggestion.find("no gpu") !=
        std::string::npos);
  CHECK(check_gpu_request(std::nullopt, "not found on PATH", "gres").status ==
        CheckStatus::Missing);
}

TEST_CASE("doctor output: one line per check, JSON with the same fields", "[doctor]") {
  std::vector<DoctorCheck> checks = {{"infiniband", CheckStatus::Missing, "none", "use sockets"},
                                     {"slurm", CheckStatus::Ok, "slurm 22.05.8", ""}};
  CHECK(format_checks(checks) ==
        "MISSING  infiniband: none -> use sockets\n"
        "OK       slurm: slurm 22.05.8\n");
  auto j = checks_to_json(checks);
  REQUIRE(j.size() == 2);
  CHECK(j[0]["status"] == "MISSING");
  CHECK(j[1]["check"] == "slurm");
}
