// hpctrain node-check: run before training (hpclaunch's job.preflight), one rank per node. Each
// node times a GEMM on its device and the links to its peers (pairwise sends and receives over
// Gloo or NCCL); rank 0 prints one line per node and names the nodes slower than the median by
// more than the margin (node_check_verdict.h). docs/node-check.md.
#pragma once

#include <cstdint>
#include <string>

namespace hpc::train {

struct NodeCheckOptions {
  std::string only;        // "": both; "gemm" or "link"
  int64_t gemm_size = 0;   // n of the n x n GEMM; 0: 8192 on CUDA (bf16), 1024 on the CPU (fp32)
  int64_t gemm_iters = 0;  // timed GEMMs; 0: 50 on CUDA, 10 on the CPU
  std::string link_bytes = "16M";  // bytes per send (K/M/G suffixes)
  int64_t link_iters = 5;          // timed exchanges per peer
  double margin = 0.2;             // slower than the median by more than this: slow
  std::string slow_nodes_file;     // rank 0 writes "NODE why" per slow node here (may be empty)
  std::string device = "auto";     // auto, cpu or cuda
  double dist_timeout_s = 120;
  std::string master_suffix;
};

// Returns the exit status: 0 once every node was measured, whatever the verdict. UserError for
// bad flags (exit 2, before meeting the other ranks); a failed peer throws (exit 1).
int run_node_check(const NodeCheckOptions& o);

}  // namespace hpc::train
