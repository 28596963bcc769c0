// hpctrain node-check. The GEMM: two untimed, then `iters` timed n x n matrix products on the
// device (bf16 on CUDA, fp32 on the CPU), 2 n^3 FLOP each. The links: every pair of nodes
// exchanges a buffer both ways, pairs in rounds (round-robin), so each pair is timed alone; a
// node's link figure is the median bandwidth of its exchanges, which one slow peer does not
// move. With two nodes both share the one link, so only the GEMM can tell them apart.
#include "dist/node_check.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "byte_size.h"
#include "device.h"
#include "dist/communicator.h"
#include "dist/node_check_verdict.h"
#include "dist/rendezvous.h"
#include "error.h"

#if HPC_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace hpc::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Slurm's name of this node (what --exclude takes), else the hostname.
std::string node_name() {
  if (const char* n = std::getenv("SLURMD_NODENAME"); n && *n) return n;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// The test-only fault injection (node_check_verdict.h): this node's work takes `factor` times
// as long, by sleeping (factor - 1) times what it took.
void sleep_for_slowdown(double factor, double seconds_taken) {
  if (factor > 1) {
    std::this_thread::sleep_for(std::chrono::duration<double>((factor - 1) * seconds_taken));
  }
}

double gemm_gflops(const NodeCheckOptions& o, const at::Device& device, double slowdown) {
  const bool cuda = device.is_cuda();
  const int64_t n = o.gemm_size > 0 ? o.gemm_size : (cuda ? 8192 : 1024);
  const int64_t iters = o.gemm_iters > 0 ? o.gemm_iters : (cuda ? 50 : 10);
  const auto options = at::TensorOptions().device(device).dtype(cuda ? at::kBFloat16 : at::kFloat);
  at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  at::Tensor c = at::empty({n, n}, options);
  for (int i = 0; i < 2; ++i) at::mm_out(c, a, b);  // warm-up: kernels chosen, pages touched
  synchronize(device);
  const auto start = Clock::now();
  for (int64_t i = 0; i < iters; ++i) at::mm_out(c, a, b);
  synchronize(device);
  const double taken = seconds_since(start);
  sleep_for_slowdown(slowdown, taken);
  const double seconds = taken * slowdown;
  return 2.0 * double(n) * double(n) * double(n) * double(iters) / seconds / 1e9;
}

// Bandwidth (GB/s, one direction) of this rank's exchange with each peer: out[peer]; -1 for
// itself. Pairs exchange in rounds, each pair alone on its two nodes, so a slow node slows only
// the exchanges it takes part in (a ring shift would chain every rank to the slowest).
std::vector<double> link_gbps_to_peers(dist::Communicator& comm, const at::Device& device,
                                       int64_t bytes, int64_t iters, double slowdown) {
  const int n = comm.world(), rank = comm.rank();
  const int64_t count = std::max<int64_t>(1, bytes / 4);
  auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor outgoing = at::ones({count}, options), incoming = at::empty({count}, options);
  auto exchange = [&](int peer) {
    auto sent = comm.send(outgoing, peer);
    auto received = comm.recv(incoming, peer);
    sent->wait();
    received->wait();
  };
  std::vector<double> to(size_t(n), -1.0);
  const int rounds = n + n % 2 - 1;
  for (int r = 0; r < rounds; ++r) {
    const int peer = round_partner(rank, r, n);
    comm.barrier();
    if (peer >= n) continue;
    // One untimed exchange (connections made); it also sets the slowed node's delay.
    const auto warm = Clock::now();
    exchange(peer);
    synchronize(device);
    const double delay = slowdown > 1 ? (slowdown - 1) * seconds_since(warm) : 0;
    const auto start = Clock::now();
    for (int64_t i = 0; i < iters; ++i) {
      if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      exchange(peer);
    }
    synchronize(device);
    to[size_t(peer)] = double(count * 4) / (seconds_since(start) / double(iters)) / 1e9;
  }
  return to;
}

// Every rank's row of `values` (same length everywhere), in rank order.
std::vector<std::vector<double>> gather_rows(dist::Communicator& comm, const at::Device& device,
                                             const std::vector<double>& values) {
  auto mine = at::tensor(values, at::kDouble).to(device);
  std::vector<at::Tensor> out;
  for (int r = 0; r < comm.world(); ++r) out.push_back(at::zeros_like(mine));
  comm.all_gather(out, mine);
  std::vector<std::vector<double>> rows;
  for (auto& t : out) {
    auto c = t.cpu().contiguous();
    rows.emplace_back(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }
  return rows;
}

// A node's link figure: the median of the transfers it sent or received. matrix[dst][src].
double node_link_figure(const std::vector<std::vector<double>>& matrix, size_t node) {
  std::vector<double> mine;
  for (size_t other = 0; other < matrix.size(); ++other) {
    if (other == node) continue;
    mine.push_back(matrix[node][other]);
    mine.push_back(matrix[other][node]);
  }
  return mine.empty() ? -1 : median(mine);
}

void write_slow_nodes(const std::string& path, const std::vector<NodeVerdict>& verdicts) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    for (const auto& v : verdicts) {
      if (v.slow) f << v.figures.node << " " << v.why << "\n";
    }
    if (!f) throw std::runtime_error(fmt::format("{}: cannot write", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error(fmt::format("{}: cannot rename to {}", tmp, path));
  }
}

void check_flags(const NodeCheckOptions& o) {
  if (!o.only.empty() && o.only != "gemm" && o.only != "link") {
    throw UserError("--only", fmt::format("unknown check '{}'", o.only), "use gemm or link");
  }
  if (o.gemm_size < 0 || o.gemm_iters < 0 || o.link_iters < 1) {
    throw UserError("--gemm-size/--gemm-iters/--link-iters", "must not be negative (link: >= 1)",
                    "");
  }
  if (o.dist_timeout_s <= 0) throw UserError("--dist-timeout", "must be positive", "");
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda") {
    throw UserError("--device", fmt::format("unknown device '{}'", o.device),
                    "use auto, cpu or cuda");
  }
  judge_nodes({}, o.margin);  // throws for a margin outside (0, 1)
}

}  // namespace

int run_node_check(const NodeCheckOptions& o) {
  check_flags(o);
  const int64_t link_bytes = parse_byte_size("--link-bytes", o.link_bytes);
  const auto rdv = dist::rendezvous_from_env(dist::process_environment(), o.master_suffix, true);
  const at::Device device = pick_device(o.device, rdv.local_rank);
#if HPC_TORCH_CUDA
  if (device.is_cuda()) c10::cuda::set_device(device.index());
#endif
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    if (const char* s = std::getenv("SLURM_CPUS_PER_TASK")) at::set_num_threads(std::atoi(s));
  }
  const double slowdown = test_slowdown(node_name(), std::getenv("HPCTRAIN_TEST_FAULTS"),
                                        std::getenv("HPCTRAIN_TEST_SLOW_NODE"),
                                        std::getenv("HPCTRAIN_TEST_SLOW_FACTOR"));
  if (slowdown > 1) {
    std::fprintf(stderr, "hpctrain node-check: TEST FAULT: %s is slowed %.1fx\n",
                 node_name().c_str(), slowdown);
  }
  const auto timeout = std::chrono::milliseconds(int64_t(o.dist_timeout_s * 1000));
  auto comm = dist::connect(rdv, device.str(), timeout);
  const int n = comm->world();

  const double gemm = o.only == "link" ? -1 : gemm_gflops(o, device, slowdown);
  std::vector<double> from(size_t(n), -1.0);
  if (o.only != "gemm" && n > 1) {
    from = link_gbps_to_peers(*comm, device, link_bytes, o.link_iters, slowdown);
  }
  std::vector<double> row = from;
  row.push_back(gemm);
  const auto rows = gather_rows(*comm, device, row);
  const auto names = dist::all_gather_strings(*comm, node_name(), device);

  if (comm->rank() == 0) {
    std::vector<NodeFigures> nodes;
    std::vector<std::vector<double>> matrix;
    for (const auto& r : rows) matrix.emplace_back(r.begin(), r.end() - 1);
    for (size_t i = 0; i < size_t(n); ++i) {
      const bool link = o.only != "gemm" && n > 1;
      nodes.push_back({names[i], rows[i].back(), link ? node_link_figure(matrix, i) : -1});
    }
    const auto verdicts = judge_nodes(nodes, o.margin);
    std::printf(
        "hpctrain node-check: %d node(s) on %s (%s), gemm and links to each peer, margin %.0f%% "
        "below the median\n",
        n, device.str().c_str(), comm->backend(), o.margin * 100);
    for (const auto& v : verdicts)
      std::printf("hpctrain node-check: %s\n", verdict_line(v).c_str());
    const auto slow = slow_nodes(verdicts);
    std::printf("hpctrain node-check: slow nodes: %s\n",
                slow.empty() ? "none" : fmt::format("{}", fmt::join(slow, ",")).c_str());
    std::fflush(stdout);
    if (!o.slow_nodes_file.empty()) write_slow_nodes(o.slow_nodes_file, verdicts);
  }
  comm->barrier();
  return 0;
}

}  // namespace hpc::train
