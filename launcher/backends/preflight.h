// Preflight: the spec compared with what the cluster itself says, on the login node (this
// machine or over SSH, any Host), before a job is submitted.
//
//   quick (run, submit): one `scontrol show partition --oneliner`: the partition exists and is
//          UP, the time limit is within its MaxTime, the nodes within MaxNodes and TotalNodes.
//          A scontrol that fails is skipped there (sbatch then says what is wrong).
//   live  (validate --live): that, plus `sinfo` (GRES names and counts, CPUs, memory and state
//          of each node of the partition), `sacctmgr` (the user's associations: account and
//          QoS; each QoS's MaxWall) where accounting runs, and `sbatch --test-only` of the
//          script.
//
// Each mismatch is one line with the fix. A cluster that cannot be reached throws
// BackendUnreachable (exit 69); a command the host lacks is a finding, not a crash.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backends/host.h"
#include "spec/spec.h"

namespace hpc {

struct PreflightFinding {
  std::string kind;  // partition, time, nodes, gres, cpus, memory, account, qos, test-only, ...
  std::string what;  // one line: what the cluster says against what the spec asks
  std::string fix;
  std::string line() const { return what + "; " + fix; }
};

struct PreflightReport {
  std::vector<PreflightFinding> findings;
  std::vector<std::string> checked;  // what was asked, in order ("scontrol show partition", ...)
  std::vector<std::string> skipped;  // and what could not be, with why ("sacctmgr: no accounting")
};

// "Key=Value Key=Value ..." of one --oneliner line (values up to the next " Key=").
std::map<std::string, std::string> parse_slurm_fields(const std::string& line);

PreflightReport preflight_quick(Host& host, const Spec& spec);
PreflightReport preflight_live(Host& host, const Spec& spec, const std::string& script);

}  // namespace hpc
