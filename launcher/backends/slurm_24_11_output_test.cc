// What Slurm 24.11.5 (Debian 13's slurm-client 24.11.5-4+deb13u1) prints for the commands hpclaunch
// reads, copied from the test cluster of scripts/testcluster.sh in scripts/slurm-matrix.sh's
// Debian 13 root (2026-11-27), against the parsers that were written for 22.05.8. What differs
// from 22.05.8 on the same cluster: scontrol show job has ReqTRES= and AllocTRES= where 22.05 has
// TRES=, and no Power=; scontrol show partition adds ExclusiveTopo=, MaxCPUsPerSocket= and
// NodeSets=; scontrol show config says MULTIPLE_SLURMD = yes (22.05: Yes). None of those is a
// field hpclaunch reads (docs/slurm-versions.md).
#include <catch2/catch.hpp>

#include "backends/preflight.h"
#include "backends/slurm_backend.h"
#include "spec/doctor.h"
#include "support/fake_host.h"

using hpc::test::failed;
using hpc::test::FakeHost;

namespace {

// scontrol show job --oneliner 2: a held job released, running, then cancelled (scancel).
const std::string kRunning24_11 =
    "JobId=2 JobName=probe.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1 Nice=0 "
    "Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 "
    "Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:02 TimeLimit=00:05:00 "
    "TimeMin=N/A SubmitTime=2026-11-27T13:07:02 EligibleTime=2026-11-27T13:07:02 "
    "AccrueTime=2026-11-27T13:07:02 StartTime=2026-11-27T13:07:02 "
    "EndTime=2026-11-27T13:12:02 Deadline=N/A PreemptEligibleTime=2026-11-27T13:07:02 "
    "PreemptTime=None SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-27T13:07:02 "
    "Scheduler=Main Partition=debug AllocNode:Sid=0.0.0.0:7030 ReqNodeList=(null) "
    "ExcNodeList=(null) NodeList=node01 BatchHost=node01 NumNodes=1 NumCPUs=1 NumTasks=1 "
    "CPUs/Task=1 ReqB:S:C:T=0:0:*:* ReqTRES=cpu=1,mem=62.50G,node=1,billing=1 "
    "AllocTRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* "
    "MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
    "OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) "
    "Command=/tmp/manual/jobs/probe.sh WorkDir=/src/hpclaunch Comment=hpclaunch:matrix  "
    "StdErr=/src/hpclaunch/slurm-2.out StdIn=/dev/null StdOut=/src/hpclaunch/slurm-2.out ";
// The same job after `scancel`, as 24.11.5 printed it: these three fields changed, nothing else.
std::string cancelled_24_11() {
  std::string s = kRunning24_11;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"JobState=RUNNING",
                                                                     "JobState=CANCELLED"},
                                 {"ExitCode=0:0", "ExitCode=0:15"},
                                 {"EndTime=2026-11-27T13:12:02", "EndTime=2026-11-27T13:07:04"}})
    s.replace(s.find(from), from.size(), to);
  return s;
}
const std::string kCancelled24_11 = cancelled_24_11();
// scontrol show partition --oneliner (the first of the cluster's two partitions).
const std::string kPartition24_11 =
    "PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL "
    "Default=YES QoS=N/A DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO "
    "ExclusiveTopo=NO GraceTime=60 Hidden=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 "
    "LLN=NO MaxCPUsPerNode=UNLIMITED MaxCPUsPerSocket=UNLIMITED NodeSets=ALL "
    "Nodes=node[01-02] PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO "
    "OverSubscribe=NO OverTimeLimit=NONE PreemptMode=REQUEUE State=UP TotalCPUs=64 "
    "TotalNodes=2 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
    "MaxMemPerNode=UNLIMITED TRES=cpu=64,mem=125G,node=2,billing=64";

}  // namespace

TEST_CASE("Slurm 24.11.5: scontrol show job with ReqTRES/AllocTRES reads as on 22.05",
          "[slurm_backend][slurm24]") {
  hpc::JobStatus r = hpc::parse_scontrol_job(kRunning24_11);
  CHECK(r.id == "2");
  CHECK(r.state == "RUNNING");
  CHECK(r.reason.empty());
  CHECK(r.nodes == "node01");
  CHECK(r.elapsed_seconds == 2);
  CHECK(r.exit_code == -1);
  CHECK(r.restarts == 0);
  CHECK(r.stdout_path == "/src/hpclaunch/slurm-2.out");
  CHECK(r.stderr_path == "/src/hpclaunch/slurm-2.out");
  CHECK(r.array_job_id.empty());

  hpc::JobStatus c = hpc::parse_scontrol_job(kCancelled24_11);
  CHECK(c.state == "CANCELLED");
  CHECK(c.terminal());
  CHECK(c.exit_code == 0);
  CHECK(c.exit_signal == 15);
  CHECK(c.detail == "at 2026-11-27T13:07:04");
}

TEST_CASE("Slurm 24.11.5: scontrol show partition with its new keys reads as on 22.05",
          "[preflight][slurm24]") {
  auto f = hpc::parse_slurm_fields(kPartition24_11);
  CHECK(f["PartitionName"] == "debug");
  CHECK(f["Default"] == "YES");
  CHECK(f["State"] == "UP");
  CHECK(f["MaxTime"] == "UNLIMITED");
  CHECK(f["MaxNodes"] == "UNLIMITED");
  CHECK(f["Nodes"] == "node[01-02]");
  CHECK(f["ExclusiveTopo"] == "NO");
  CHECK(f["NodeSets"] == "ALL");
}

TEST_CASE("Slurm 24.11.5: an unknown job id without accounting is found=false",
          "[slurm_backend][slurm24]") {
  auto h = std::make_unique<FakeHost>();
  FakeHost& host = *h;
  hpc::SlurmBackend backend(std::move(h), "slurm", hpc::SlurmBackendOptions{});
  // Both exit 1, as 24.11.5 did on the test cluster (no slurmdbd).
  host.reply("scontrol", failed("slurm_load_jobs error: Invalid job id specified\n"));
  host.reply("sacct", failed("Slurm accounting storage is disabled\n"));
  hpc::JobStatus s = backend.status("999999");
  CHECK_FALSE(s.found);
  CHECK(s.detail == "slurm_load_jobs error: Invalid job id specified");
  CHECK(host.programs_run() == "scontrol sacct");
}

TEST_CASE("Slurm 24.11.5: scontrol show config's SelectType and GresTypes lines",
          "[doctor][slurm24]") {
  const std::string config =
      "Configuration data as of 2026-11-27T13:10:46\n"
      "GresTypes               = gpu\n"
      "MULTIPLE_SLURMD         = yes\n"
      "SelectType              = select/cons_tres\n"
      "SLURM_VERSION           = 24.11.5\n";
  hpc::SlurmGpuSyntax s = hpc::parse_scontrol_config(config);
  CHECK(s.select_type == "select/cons_tres");
  CHECK(s.gres_has_gpu);
  CHECK(s.gpu_request == "gpus-per-node");
}
