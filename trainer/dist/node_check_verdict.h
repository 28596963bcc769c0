// hpctrain node-check's decision, without LibTorch: each node's figures (GEMM GFLOP/s, link
// GB/s) against the median of all nodes; a node below the median by more than the margin is
// slow. The one-line formats the job log and hpclaunch read are written here too.
#pragma once

#include <string>
#include <vector>

namespace hpc::train {

// What one node measured. link_gbps < 0: not measured (one node, or --only gemm).
struct NodeFigures {
  std::string node;  // Slurm's node name (SLURMD_NODENAME), else the hostname
  double gemm_gflops = -1;
  double link_gbps = -1;
};

struct NodeVerdict {
  NodeFigures figures;
  bool slow = false;
  std::string why;  // "gemm 30.0 GFLOP/s is 71% below the median 105.0"; "" when not slow
};

// The median (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

// One verdict per node, in the order given. A figure below median * (1 - margin) makes its
// node slow; figures < 0 are not judged. With two nodes the median is their mean, so a node is
// named only when it is below (1 - margin) of the mean. Throws hpc::UserError when margin is not
// in (0, 1).
std::vector<NodeVerdict> judge_nodes(const std::vector<NodeFigures>& nodes, double margin);

// "node01 gemm 105.2 GFLOP/s link 1.234 GB/s: ok" or "...: SLOW (why)", the line rank 0 prints
// per node after "hpctrain node-check: ".
std::string verdict_line(const NodeVerdict& v);

// Slow nodes' names, in order.
std::vector<std::string> slow_nodes(const std::vector<NodeVerdict>& verdicts);

// The link test's round-robin schedule (the circle method): in round r of m - 1 (m: n rounded up
// to even), rank i exchanges with round_partner(i, r, n); every pair meets exactly once, and a
// partner >= n means the rank sits that round out.
int round_partner(int rank, int round, int n);

// The fault injection the tests use (docs/node-check.md, test-only): the factor by which this
// node's measured work is slowed, 1 when none. HPCTRAIN_TEST_SLOW_NODE=NAME[,NAME...] names the
// nodes, honoured only when HPCTRAIN_TEST_FAULTS=1 is set as well; HPCTRAIN_TEST_SLOW_FACTOR
// (default 4) says how much slower.
double test_slowdown(const std::string& node, const char* faults, const char* slow_nodes,
                     const char* factor);

}  // namespace hpc::train
