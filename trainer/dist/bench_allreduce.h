// hpctrain bench-allreduce: all-reduce (SUM) bus bandwidth over the process group the strategies
// use (Gloo on CPU, NCCL on CUDA), printed as nccl-tests prints it. The size arithmetic needs no
// LibTorch (bench_sizes.cc, unit-tested); the benchmark itself is bench_allreduce.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpc::train {

struct BenchAllreduceOptions {
  std::string min = "1K";  // bytes, with an optional K/M/G suffix (powers of 1024)
  std::string max = "1G";
  int64_t factor = 2;
  int64_t iters = 20;
  int64_t warmup = 5;
  std::string dtype = "float32";  // float32, float64, float16, bfloat16, int32, int64
  std::string json;               // rank 0 writes the rows here when set
  std::string device = "auto";    // auto, cpu, cuda
  double dist_timeout_s = 300;
  std::string master_suffix;
};

// --min and --max are parsed with hpc::parse_byte_size (common/byte_size.h), as hpclaunch tune
// checks them before it submits anything.

// min, min*factor, min*factor^2, ... up to and including max. Throws hpc::UserError when
// min > max, factor < 2, or min is smaller than one element.
std::vector<int64_t> bench_sizes(int64_t min, int64_t max, int64_t factor, int64_t element_size);

// busbw of an all-reduce over `world` ranks: algbw * 2(n-1)/n (nccl-tests' factor).
double allreduce_bus_factor(int world);

// Returns the exit status; UserError propagates to main (exit 2), a wrong result or a failed
// peer throws std::runtime_error / c10::Error (exit 1).
int run_bench_allreduce(const BenchAllreduceOptions& o);

}  // namespace hpc::train
