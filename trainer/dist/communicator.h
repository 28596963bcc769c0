// The few collectives the strategies need, over c10d: Gloo on CPU, NCCL on CUDA when LibTorch
// has it. This header hides c10d (whose C++ API differs between LibTorch 1.13 and 2.x: in 2.x
// the process groups derive from c10d::Backend); only communicator.cc includes it.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "dist/rendezvous.h"

namespace hpc::train::dist {

class Communicator {
 public:
  // An asynchronous collective in flight.
  class Pending {
   public:
    virtual ~Pending() = default;
    // Blocks until done; throws (std::runtime_error / c10::Error) if a peer failed or the
    // collective timed out.
    virtual void wait() = 0;
  };

  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual const char* backend() const = 0;  // "gloo" or "nccl"
  // How the flat forms below travel (the log names it): one reduce-scatter and one all-gather
  // into a tensor (NCCL), all-reduce + slice and an all-gather into a tensor (Gloo in LibTorch
  // 2.x), or all-reduce + slice and a list gather (1.13's Gloo).
  virtual const char* flat_collectives() const = 0;
  // Sum over ranks, in place, started now and finished by Pending::wait().
  virtual std::unique_ptr<Pending> all_reduce_sum(at::Tensor& t) = 0;
  // Rank `root`'s values into every rank's tensors (in place, blocking).
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  // Every rank's `in` into out[r] on every rank (blocking). All `in` have one shape; out holds
  // world() tensors of it. The list form: Gloo in 1.13 has no _allgather_base.
  virtual void all_gather(std::vector<at::Tensor>& out, const at::Tensor& in) = 0;
  virtual void barrier() = 0;
  // Point to point (hpctrain node-check's link test): `t` to rank `peer`, or rank `peer`'s into
  // `t`, started now and finished by Pending::wait(). A send and a receive may be in flight at
  // once; each needs the matching call on the peer.
  virtual std::unique_ptr<Pending> send(at::Tensor& t, int peer) = 0;
  virtual std::unique_ptr<Pending> recv(at::Tensor& t, int peer) = 0;

  // After a collective failed: which ranks are gone. Every rank that gets here checks in at the
  // rendezvous store and waits up to `grace` for the others; the ones that never do are named
  // ("rank 1 did not answer within 5 s: it died, or is stuck waiting for one that did"). When
  // the store itself is unreachable, rank 0 (which serves it) is gone. One line, never throws.
  virtual std::string lost_ranks(std::chrono::milliseconds grace) = 0;

  // Flat forms for sharded parameters (fsdp, zero1, zero2), both started now and finished by
  // wait(): every rank's `in` [S] into `out` [W S], rank r's at [r S, r S + S). NCCL and 2.x Gloo:
  // one all-gather into `out`; 1.13 Gloo: the list all-gather into views of `out`.
  virtual std::unique_ptr<Pending> all_gather_flat(at::Tensor& out, const at::Tensor& in) = 0;
  // The sum over ranks of `in` [W S]; this rank's slice [rank S, rank S + S) lands in `out` [S].
  // NCCL: one reduce-scatter; Gloo (1.13's has no reduce_scatter, 2.x's clones `in`): all-reduce of
  // `in` in place, and wait() copies the slice. `in` may hold the sum afterwards: don't reuse its
  // values.
  virtual std::unique_ptr<Pending> reduce_scatter_flat(at::Tensor& out, at::Tensor& in) = 0;
};

// The sum over ranks of one number, reduced on `device` (as float on NCCL). Blocks; throws what
// Pending::wait throws.
double sum_over_ranks(Communicator& comm, double value, const at::Device& device);

// Every rank's `mine` (at most 255 bytes, no NUL), in rank order: one all-gather of fixed-width
// byte rows on `device`. Blocks; throws what Pending::wait throws.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine,
                                            const at::Device& device);

// The one line for a collective that failed on this rank: what failed, which ranks are gone
// (Communicator::lost_ranks, a 5 s grace) and the first line of c10d's own error.
std::string collective_failure(Communicator& comm, const std::string& what, double timeout_s,
                               const std::exception& error);

// Meets the other ranks at the rendezvous' master (a TCPStore served by rank 0) and builds the
// process group: NCCL when `device` is "cuda:N" and LibTorch has it, else Gloo. Gloo uses the
// interfaces named in GLOO_SOCKET_IFNAME (comma-separated) when set. Collectives and the meeting
// itself give up after `timeout`, so a dead peer ends the job with an error instead of a hang.
std::unique_ptr<Communicator> connect(const Rendezvous& rdv, const std::string& device,
                                      std::chrono::milliseconds timeout);

}  // namespace hpc::train::dist
