// c10d lives here and nowhere else. Differences between LibTorch versions stay in this file:
//  - 1.13: ProcessGroupGloo/ProcessGroupNCCL derive from c10d::ProcessGroup;
//  - 2.x:  they derive from c10d::Backend (a ProcessGroup wraps backends).
// Both expose allreduce/broadcast/barrier with the same signatures on the concrete class, and we
// hold the concrete class, so the code below is the same for both; only the headers and the
// availability of each backend are checked at compile time.
#include "dist/communicator.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string_view>
#include <thread>
#include <type_traits>

#include <ATen/Functions.h>
#include <fmt/format.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "dist/rendezvous.h"
#include "error.h"
#include "metrics/progress.h"
#include "torch_compat.h"

#if defined(USE_C10D_GLOO) && __has_include(<gloo/rendezvous/store.h>)
#define HPC_HAVE_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(USE_C10D_NCCL)
#define HPC_HAVE_NCCL 1
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace hpc::train::dist {
namespace {

// LibTorch 2.x's Gloo gathers into one tensor and reduce-scatters (c10d::Backend's
// all_gather_single / reduce_scatter_single; 2.15's ProcessGroupGloo implements both). 1.13's
// Gloo has neither: there fsdp and zero2 all-gather into a list of views. Both Gloos reduce by
// an all-reduce of which each rank keeps its slice (reduce_scatter_flat says why).
// Found by what the backend offers (a C++20 requires-expression; the 2.x build is C++20).
#if HPC_TORCH_AT_LEAST(2, 0) && __cplusplus >= 202002L
template <typename PG>
constexpr bool kFlatCollectives = requires(PG& pg, at::Tensor& t) {
  pg.all_gather_single(t, t);
  pg.reduce_scatter_single(t, t);
};
#else
template <typename PG>
constexpr bool kFlatCollectives = false;
#endif

// --- progress (metrics/progress.h): every collective is counted where it starts, and the time
// a rank blocks in one is recorded, so that a hang can name the collective and its number.
// A collective: its name and number (progress_collective_started, called before c10d sees it).
struct CollectiveId {
  const char* name;
  uint64_t seq;
};
CollectiveId start_collective(const char* name) {
  return {name, progress_collective_started(name)};
}

// Runs `blocking` as a wait inside collective `id`.
template <typename F>
void wait_inside(const CollectiveId& id, F&& blocking) {
  progress_wait_begins(id.name, id.seq);
  try {
    blocking();
  } catch (...) {
    progress_wait_ends();
    throw;
  }
  progress_wait_ends();
}

template <typename WorkPtr>
class PendingWork final : public Communicator::Pending {
 public:
  PendingWork(WorkPtr w, CollectiveId id) : work_(std::move(w)), id_(id) {}
  void wait() override {
    wait_inside(id_, [this] { work_->wait(); });
  }

 private:
  WorkPtr work_;
  CollectiveId id_;
};

template <typename WorkPtr>
std::unique_ptr<Communicator::Pending> pending(WorkPtr w, CollectiveId id) {
  return std::make_unique<PendingWork<WorkPtr>>(std::move(w), id);
}
// --- end progress

// An all-reduce standing in for a reduce-scatter: wait() finishes it and copies this rank's slice.
class SliceAfter final : public Communicator::Pending {
 public:
  SliceAfter(std::unique_ptr<Communicator::Pending> work, at::Tensor out, at::Tensor slice)
      : work_(std::move(work)), out_(std::move(out)), slice_(std::move(slice)) {}
  void wait() override {
    work_->wait();
    out_.copy_(slice_);
  }

 private:
  std::unique_ptr<Communicator::Pending> work_;
  at::Tensor out_, slice_;
};

// One implementation for either backend: PG is ProcessGroupGloo or ProcessGroupNCCL.
template <typename PG>
class C10dCommunicator final : public Communicator {
 public:
  C10dCommunicator(c10::intrusive_ptr<PG> pg, c10::intrusive_ptr<c10d::Store> store, int rank,
                   int world, const char* name)
      : pg_(std::move(pg)), store_(std::move(store)), rank_(rank), world_(world), name_(name) {}
  // A NCCL group is shut down on a normal exit, as torch.distributed's destroy_process_group
  // does: without it ProcessGroupNCCL's destructor warns that resources may leak (seen at every
  // exit on an H100). Not while an exception unwinds: a rank whose collective failed leaves
  // without waiting on its peers.
  ~C10dCommunicator() override {
#if HPC_HAVE_NCCL
    if constexpr (std::is_same_v<PG, c10d::ProcessGroupNCCL>) {
      if (std::uncaught_exceptions() == 0) {
        try {
          pg_->shutdown();
        } catch (const std::exception&) {  // the exit goes on; NCCL's watchdog cleans up
        }
      }
    }
#endif
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  const char* backend() const override { return name_; }
  const char* flat_collectives() const override {
    if (std::string_view(name_) == "nccl") return "reduce-scatter and all-gather into one tensor";
    if (kFlatCollectives<PG> && gloo_reduce_scatter_)
      return "reduce-scatter (HPCTRAIN_GLOO_REDUCE_SCATTER) and all-gather into one tensor";
    if (kFlatCollectives<PG>)
      return "all-reduce then this rank's slice, all-gather into one tensor";
    return "all-reduce then this rank's slice, all-gather into a list";
  }

  std::unique_ptr<Pending> all_reduce_sum(at::Tensor& t) override {
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;  // Gloo has no AVG: callers divide
    const CollectiveId id = start_collective("all_reduce");
    return pending(pg_->allreduce(v, o), id);
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    for (auto& t : tensors) {  // one tensor per call: Gloo wants one per device
      std::vector<at::Tensor> v{t};
      const CollectiveId id = start_collective("broadcast");
      auto work = pg_->broadcast(v, o);
      wait_inside(id, [&work] { work->wait(); });
    }
  }

  void all_gather(std::vector<at::Tensor>& out, const at::Tensor& in) override {
    std::vector<std::vector<at::Tensor>> outputs{out};
    std::vector<at::Tensor> inputs{in};
    const CollectiveId id = start_collective("all_gather");
    auto work = pg_->allgather(outputs, inputs);
    wait_inside(id, [&work] { work->wait(); });
    // Gloo writes into the tensors given; NCCL too, but copy back in case a backend replaced them.
    for (size_t r = 0; r < out.size(); ++r) {
      if (!outputs[0][r].is_same(out[r])) out[r].copy_(outputs[0][r]);
    }
  }

  void barrier() override {
    const CollectiveId id = start_collective("barrier");
    auto work = pg_->barrier(c10d::BarrierOptions());
    wait_inside(id, [&work] { work->wait(); });
  }

  std::unique_ptr<Pending> send(at::Tensor& t, int peer) override {
    std::vector<at::Tensor> v{t};
    const CollectiveId id = start_collective("send");
    return pending(pg_->send(v, peer, /*tag=*/0), id);
  }

  std::unique_ptr<Pending> recv(at::Tensor& t, int peer) override {
    std::vector<at::Tensor> v{t};
    const CollectiveId id = start_collective("recv");
    return pending(pg_->recv(v, peer, /*tag=*/0), id);
  }

  std::string lost_ranks(std::chrono::milliseconds grace) override {
    auto key = [](int r) { return fmt::format("hpctrain/alive-after-failure/{}", r); };
    std::vector<int> missing;
    try {
      store_->set(key(rank_), std::vector<uint8_t>{'1'});
      const auto deadline = std::chrono::steady_clock::now() + grace;
      do {
        missing.clear();
        for (int r = 0; r < world_; ++r) {
          if (r != rank_ && !store_->check({key(r)})) missing.push_back(r);
        }
        if (missing.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      } while (std::chrono::steady_clock::now() < deadline);
    } catch (const std::exception&) {
      return rank_ == 0 ? "this rank's rendezvous store failed"
                        : "rank 0 is gone (its rendezvous store does not answer)";
    }
    if (missing.empty()) return "every rank is still there (a collective timed out)";
    std::string list;
    for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
    return fmt::format(
        "rank{} {} did not answer within {} s: lost (died or was killed), or stuck "
        "waiting for one that was",
        missing.size() > 1 ? "s" : "", list,
        std::chrono::duration_cast<std::chrono::seconds>(grace).count());
  }

  std::unique_ptr<Pending> all_gather_flat(at::Tensor& out, const at::Tensor& in) override {
#if HPC_HAVE_NCCL
    if constexpr (std::is_same_v<PG, c10d::ProcessGroupNCCL>) {
      const CollectiveId id = start_collective("all_gather");
      return pending(pg_->_allgather_base(out, const_cast<at::Tensor&>(in)), id);
    }
#endif
    if constexpr (kFlatCollectives<PG>) {
      // bf16 travels as fp16's bit patterns here too (no arithmetic on them; see below).
      at::Tensor src = in.scalar_type() == at::kBFloat16 ? in.view(at::kHalf) : in;
      at::Tensor dst = out.scalar_type() == at::kBFloat16 ? out.view(at::kHalf) : out;
      const CollectiveId id = start_collective("all_gather");
      return pending(pg_->all_gather_single(dst, src), id);
    }
    const int64_t S = in.numel();
    // Gloo in LibTorch 1.13 refuses bf16 ("Invalid scalar type"); an all-gather only moves
    // bytes, so bf16 travels as fp16's bit patterns (same size; no arithmetic on them).
    const bool as_half = in.scalar_type() == at::kBFloat16;
    const at::Tensor src = as_half ? in.view(at::kHalf) : in;
    const at::Tensor dst = as_half ? out.view(at::kHalf) : out;
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < world_; ++r) outputs[0].push_back(dst.narrow(0, r * S, S));
    std::vector<at::Tensor> inputs{src};
    // Gloo copies its result into the tensors given before the work completes.
    const CollectiveId id = start_collective("all_gather");
    return pending(pg_->allgather(outputs, inputs), id);
  }

  std::unique_ptr<Pending> reduce_scatter_flat(at::Tensor& out, at::Tensor& in) override {
#if HPC_HAVE_NCCL
    if constexpr (std::is_same_v<PG, c10d::ProcessGroupNCCL>) {
      c10d::ReduceScatterOptions o;
      o.reduceOp = c10d::ReduceOp::SUM;
      const CollectiveId id = start_collective("reduce_scatter");
      return pending(pg_->_reduce_scatter_base(out, in, o), id);
    }
#endif
    // Gloo, also 2.x's: its reduce_scatter_single clones `in` and all-reduces the clone
    // (ProcessGroupGloo::reduce_scatter_tensor_coalesced), the same traffic as this all-reduce
    // in place plus a buffer of `in`'s size (zero2 at W=2: +50 MiB peak RSS per rank, measured).
    // HPCTRAIN_GLOO_REDUCE_SCATTER=1 takes it anyway on 2.x: the tests run the reduce-scatter
    // form NCCL uses on the CPU that way (docs/libtorch2.md).
    if constexpr (kFlatCollectives<PG>) {
      if (gloo_reduce_scatter_) {
        c10d::ReduceScatterOptions o;
        o.reduceOp = c10d::ReduceOp::SUM;
        const CollectiveId id = start_collective("reduce_scatter");
        return pending(pg_->reduce_scatter_single(out, in, o), id);
      }
    }
    std::vector<at::Tensor> v{in};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    const CollectiveId id = start_collective("all_reduce");
    return std::make_unique<SliceAfter>(pending(pg_->allreduce(v, o), id), out,
                                        in.narrow(0, int64_t(rank_) * out.numel(), out.numel()));
  }

 private:
  c10::intrusive_ptr<PG> pg_;
  c10::intrusive_ptr<c10d::Store> store_;
  int rank_, world_;
  const char* name_;
  const bool gloo_reduce_scatter_ = [] {
    const char* v = std::getenv("HPCTRAIN_GLOO_REDUCE_SCATTER");
    return v != nullptr && std::string_view(v) == "1";
  }();
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

#if HPC_HAVE_NCCL
// How a lost rank ends a NCCL job (read by ProcessGroupNCCL's constructor; a user's own setting
// wins): wait() blocks and throws once the collective fails or --dist-timeout passes
// (TORCH_NCCL_BLOCKING_WAIT=1), so the rank reports which peers are gone (collective_failure)
// and exits 1; the watchdog then only cleans up, it does not tear the process down with a bare
// SIGABRT first (TORCH_NCCL_ASYNC_ERROR_HANDLING=3, SkipCleanUp). docs/libtorch2.md.
void set_nccl_error_handling() {
  ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
  ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3", /*overwrite=*/0);
}
#endif

}  // namespace

double sum_over_ranks(Communicator& comm, double value, const at::Device& device) {
  auto t = at::full({1}, value, at::TensorOptions().dtype(at::kDouble).device(device));
  if (comm.backend() == std::string("nccl")) t = t.to(at::kFloat);
  comm.all_reduce_sum(t)->wait();
  return t.item<double>();
}

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine,
                                            const at::Device& device) {
  constexpr int64_t kWidth = 256;
  const std::string s = mine.substr(0, kWidth - 1);
  auto row = at::zeros({kWidth}, at::kByte);
  std::memcpy(row.data_ptr<uint8_t>(), s.data(), s.size());
  row = row.to(device);
  std::vector<at::Tensor> out;
  for (int r = 0; r < comm.world(); ++r) out.push_back(at::zeros_like(row));
  comm.all_gather(out, row);
  std::vector<std::string> rows;
  for (auto& t : out) {
    auto c = t.cpu();
    rows.emplace_back(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()));
  }
  return rows;
}

std::string collective_failure(Communicator& comm, const std::string& what, double timeout_s,
                               const std::exception& error) {
  std::string msg = error.what();
  msg = msg.substr(0, msg.find('\n'));
  return fmt::format(
      "rank {}: {} failed, a peer died or stopped answering (--dist-timeout {} s): {}; "
      "c10d: {}",
      comm.rank(), what, timeout_s, comm.lost_ranks(std::chrono::seconds(5)), msg);
}

std::unique_ptr<Communicator> connect(const Rendezvous& rdv, const std::string& device,
                                      std::chrono::milliseconds timeout) {
  const bool cuda = device.rfind("cuda", 0) == 0;
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(rdv.master_port);
  so.isServer = rdv.rank == 0;
  so.numWorkers = rdv.world;
  so.waitWorkers = true;
  so.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(rdv.master_addr, so);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    throw UserError(
        fmt::format("{}:{}", rdv.master_addr, rdv.master_port),
        fmt::format("rank {} could not meet the other ranks: {}", rdv.rank, what),
        "check MASTER_ADDR/MASTER_PORT, that rank 0 started, and that the port is free");
  }

  if (cuda) {
#if HPC_HAVE_NCCL
    set_nccl_error_handling();
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;  // blocking wait's and the watchdog's limit for every collective
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rdv.rank, rdv.world, opts);
#if HPC_TORCH_AT_LEAST(2, 3)
    // The communicator now, on the device the caller set (train.cc's set_up_device sets it
    // before connect): a rank that never comes fails the start, not the first collective.
    pg->eagerConnectSingleDevice(at::Device(device));
#endif
    return std::make_unique<C10dCommunicator<c10d::ProcessGroupNCCL>>(pg, store, rdv.rank,
                                                                      rdv.world, "nccl");
#else
    throw UserError("--strategy",
                    "this hpctrain was built without NCCL, so CUDA tensors cannot be reduced",
                    "build against a CUDA LibTorch with NCCL, or use --device cpu");
#endif
  }
#if HPC_HAVE_GLOO
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  // GLOO_SOCKET_IFNAME is read only by PyTorch's Python binding; without it Gloo binds the
  // address the hostname resolves to, which falls back to 127.0.0.1 on many clusters and then
  // hangs across nodes.
  if (const char* ifs = std::getenv("GLOO_SOCKET_IFNAME"); ifs && *ifs) {
    for (const auto& name : split_commas(ifs)) {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
  } else if (is_loopback(rdv.master_addr)) {
    // Every rank dials rank 0 on this host's loopback, so all of them run here: bind the
    // loopback too, without resolving the host's name (which a container or a minimal root may
    // not know; Gloo would then warn on every rank and fall back to the loopback anyway).
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  opts->threads = int(opts->devices.size()) * 2;
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rdv.rank, rdv.world, opts);
  return std::make_unique<C10dCommunicator<c10d::ProcessGroupGloo>>(pg, store, rdv.rank, rdv.world,
                                                                    "gloo");
#else
  throw UserError("--strategy",
                  "this hpctrain was built without Gloo, so CPU tensors cannot be reduced",
                  "install libgloo-dev and rebuild, or run on CUDA with NCCL");
#endif
}

}  // namespace hpc::train::dist
