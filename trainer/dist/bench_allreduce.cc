// hpctrain bench-allreduce: for each size, `warmup` all-reduces, a barrier, then `iters` timed
// all-reduces of one tensor of that many bytes; one more all-reduce of rank+1 everywhere checks
// the result (n(n+1)/2). Rank 0 prints nccl-tests' table and writes the JSON.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "byte_size.h"
#include "device.h"
#include "dist/bench_allreduce.h"
#include "dist/communicator.h"
#include "dist/rendezvous.h"
#include "error.h"

#if HPC_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace hpc::train {
namespace {

at::ScalarType parse_dtype(const std::string& s) {
  if (s == "float32" || s == "float") return at::kFloat;
  if (s == "float64" || s == "double") return at::kDouble;
  if (s == "float16" || s == "half") return at::kHalf;
  if (s == "bfloat16") return at::kBFloat16;
  if (s == "int32") return at::kInt;
  if (s == "int64") return at::kLong;
  throw UserError("--dtype", fmt::format("unknown dtype '{}'", s),
                  "use float32, float64, float16, bfloat16, int32 or int64");
}

std::string human_size(int64_t b) {
  if (b >= (1LL << 30) && b % (1LL << 30) == 0) return fmt::format("{}G", b >> 30);
  if (b >= (1LL << 20) && b % (1LL << 20) == 0) return fmt::format("{}M", b >> 20);
  if (b >= (1LL << 10) && b % (1LL << 10) == 0) return fmt::format("{}K", b >> 10);
  return std::to_string(b);
}

// This machine's hostname.
std::string hostname() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

struct Row {
  int64_t size, count;
  double time_us, algbw, busbw;
  int64_t wrong;
};

}  // namespace

int run_bench_allreduce(const BenchAllreduceOptions& o) {
  // Everything the flags can get wrong is checked before meeting the other ranks.
  const at::ScalarType dtype = parse_dtype(o.dtype);
  const int64_t esize = int64_t(c10::elementSize(dtype));
  const int64_t min = parse_byte_size("--min", o.min);
  const int64_t max = parse_byte_size("--max", o.max);
  const std::vector<int64_t> sizes = bench_sizes(min, max, o.factor, esize);
  if (o.iters < 1) throw UserError("--iters", fmt::format("{} is less than 1", o.iters), "");
  if (o.warmup < 0) throw UserError("--warmup", "must not be negative", "");
  if (o.dist_timeout_s <= 0) throw UserError("--dist-timeout", "must be positive", "");
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda") {
    throw UserError("--device", fmt::format("unknown device '{}'", o.device),
                    "use auto, cpu or cuda");
  }

  const auto rdv = dist::rendezvous_from_env(dist::process_environment(), o.master_suffix, true);
  if (rdv.rank == 0 &&
      !o.json.empty()) {  // a JSON path that cannot be written fails now, not at the end
    const std::string tmp = o.json + ".tmp";
    if (!std::ofstream(tmp)) throw UserError("--json", fmt::format("cannot write {}", tmp), "");
    std::remove(tmp.c_str());
  }
  const at::Device device = pick_device(o.device, rdv.local_rank);
#if HPC_TORCH_CUDA
  if (device.is_cuda()) c10::cuda::set_device(device.index());
#endif
  const auto timeout = std::chrono::milliseconds(int64_t(o.dist_timeout_s * 1000));
  auto comm = dist::connect(rdv, device.str(), timeout);
  const int n = comm->world(), rank = comm->rank();
  const auto hosts = dist::all_gather_strings(*comm, hostname(), device);
  const double bus = allreduce_bus_factor(n);

  if (rank == 0) {
    std::printf(
        "# hpctrain bench-allreduce: world %d (%s) on %s, dtype %s, %lld iters after %lld "
        "warm-up, sizes %s..%s x%lld\n",
        n, comm->backend(), device.str().c_str(), o.dtype.c_str(), (long long)o.iters,
        (long long)o.warmup, human_size(min).c_str(), human_size(max).c_str(), (long long)o.factor);
    for (int r = 0; r < n; ++r) std::printf("#  rank %d on %s\n", r, hosts[size_t(r)].c_str());
    std::printf("#\n");
    std::printf("# %12s %14s %9s %6s %11s %8s %8s %7s\n", "size", "count", "type", "redop", "time",
                "algbw", "busbw", "#wrong");
    std::printf("# %12s %14s %9s %6s %11s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  // One buffer of the largest size; each size uses its first `count` elements.
  const int64_t max_count = sizes.back() / esize;
  at::Tensor buffer = at::zeros({max_count}, at::TensorOptions().dtype(dtype).device(device));
  const double expected = double(n) * (n + 1) / 2;
  std::vector<Row> rows;
  for (const int64_t requested : sizes) {
    const int64_t count = requested / esize;
    const int64_t size = count * esize;
    at::Tensor t = buffer.narrow(0, 0, count);

    // Correctness: every rank holds rank+1, the sum is n(n+1)/2 everywhere. The number of wrong
    // elements is summed over ranks, so every rank stops together when one is wrong.
    t.fill_(rank + 1);
    comm->all_reduce_sum(t)->wait();
    at::Tensor wrong_local = t.ne(expected).sum().to(at::kDouble).reshape({1});
    comm->all_reduce_sum(wrong_local)->wait();
    const auto wrong = int64_t(wrong_local.item<double>());

    // Zeros while timing: the sums stay finite however many iterations run.
    t.zero_();
    for (int64_t i = 0; i < o.warmup; ++i) comm->all_reduce_sum(t)->wait();
    synchronize(device);
    comm->barrier();
    synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < o.iters; ++i) comm->all_reduce_sum(t)->wait();
    synchronize(device);
    const double local_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        double(o.iters);
    // The time per op is the mean over ranks (nccl-tests' default, -a 1).
    at::Tensor time_t =
        at::full({1}, local_us, at::TensorOptions().dtype(at::kDouble).device(device));
    comm->all_reduce_sum(time_t)->wait();
    const double time_us = time_t.item<double>() / n;

    Row row{size, count, time_us, 0, 0, wrong};
    row.algbw = time_us > 0 ? double(size) / (time_us * 1e-6) / 1e9 : 0;
    row.busbw = row.algbw * bus;
    rows.push_back(row);
    if (rank == 0) {
      std::printf("  %12lld %14lld %9s %6s %11.2f %8.3f %8.3f %7lld\n", (long long)row.size,
                  (long long)row.count, o.dtype.c_str(), "sum", row.time_us, row.algbw, row.busbw,
                  (long long)row.wrong);
      std::fflush(stdout);
    }
    if (wrong != 0) {
      throw std::runtime_error(fmt::format(
          "all-reduce of {} bytes ({} x {}) over {} ranks gave a wrong result: {} element(s) on "
          "all ranks differ from n(n+1)/2 = {}",
          size, count, o.dtype, n, wrong, expected));
    }
  }

  if (rank == 0) {
    double sum_bus = 0;
    for (const auto& r : rows) sum_bus += r.busbw;
    std::printf("# Out of bounds values : 0 OK\n");
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n", sum_bus / double(rows.size()));
    if (!o.json.empty()) {
      nlohmann::json j;
      j["world_size"] = n;
      j["backend"] = comm->backend();
      j["device"] = device.str();
      j["dtype"] = o.dtype;
      j["iters"] = o.iters;
      j["warmup"] = o.warmup;
      j["hostnames"] = hosts;
      j["bus_factor"] = bus;
      j["rows"] = nlohmann::json::array();
      for (const auto& r : rows) {
        j["rows"].push_back({{"size", r.size},
                             {"count", r.count},
                             {"time_us", r.time_us},
                             {"algbw_gbps", r.algbw},
                             {"busbw_gbps", r.busbw},
                             {"wrong", r.wrong}});
      }
      const std::string tmp = o.json + ".tmp";
      {
        std::ofstream f(tmp);
        f << j.dump(2) << "\n";
        if (!f) throw std::runtime_error(fmt::format("{}: cannot write", tmp));
      }
      if (std::rename(tmp.c_str(), o.json.c_str()) != 0) {
        throw std::runtime_error(fmt::format("{}: cannot rename to {}", tmp, o.json));
      }
      std::printf("# wrote %s\n", o.json.c_str());
    }
  }
  comm->barrier();  // no rank leaves (and closes its sockets) while another is still reducing
  return 0;
}

}  // namespace hpc::train
