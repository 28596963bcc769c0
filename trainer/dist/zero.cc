#include "dist/zero.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

namespace hpc::train::dist {

FlatShards::FlatShards(const std::vector<int64_t>& numels, int world) {
  for (int64_t n : numels) {
    flat_offset.push_back(total);
    total += n;
  }
  shard_numel = (total + world - 1) / world;
  of_rank.resize(size_t(world));
  for (int r = 0; r < world; ++r) {
    const int64_t lo = r * shard_numel, hi = std::min(total, lo + shard_numel);
    for (size_t i = 0; i < numels.size(); ++i) {
      const int64_t a = std::max(lo, flat_offset[i]);
      const int64_t b = std::min(hi, flat_offset[i] + numels[i]);
      if (a < b) of_rank[size_t(r)].push_back({i, a - flat_offset[i], a - lo, b - a});
    }
  }
}

BucketShards::BucketShards(const std::vector<std::vector<size_t>>& bucket_params,
                           const std::vector<int64_t>& numels, int world) {
  of_rank.resize(size_t(world));
  for (const auto& params : bucket_params) {
    std::vector<int64_t> sizes;
    for (size_t i : params) sizes.push_back(numels.at(i));
    Bucket b{params, FlatShards(sizes, world), shard_numel};
    for (int r = 0; r < world; ++r) {
      for (const auto& s : b.layout.of_rank[size_t(r)]) {
        of_rank[size_t(r)].push_back(
            {params[s.param], s.param_offset, b.shard_offset + s.shard_offset, s.length});
      }
    }
    shard_numel += b.layout.shard_numel;
    buckets.push_back(std::move(b));
  }
}

namespace {

// The elements [offset, offset + length) of t, as a 1-D view.
at::Tensor piece(const at::Tensor& t, int64_t offset, int64_t length) {
  return t.view({-1}).narrow(0, offset, length);
}

}  // namespace

ShardedAdamW::ShardedAdamW(std::vector<at::Tensor> params,
                           const std::vector<std::vector<size_t>>& buckets, AdamWOptions options,
                           Communicator& comm)
    : params_(std::move(params)), opt_(options), comm_(comm) {
  std::vector<int64_t> numels;
  for (const auto& p : params_) {
    if (!p.is_contiguous()) throw std::runtime_error("zero: parameters must be contiguous");
    numels.push_back(p.numel());
  }
  shards_ = BucketShards(buckets, numels, comm_.world());
  const auto o = params_.at(0).options().requires_grad(false);
  m_ = torch::zeros({shards_.shard_numel}, o);
  v_ = torch::zeros({shards_.shard_numel}, o);
  use_fused(params_.at(0).is_cuda());
}

at::Tensor ShardedAdamW::gradient_slice(size_t bucket) {
  const auto& b = shards_.buckets.at(bucket);
  return grad_shard_.narrow(0, b.shard_offset, b.layout.shard_numel);
}

void ShardedAdamW::use_gradient_shard() {
  grad_shard_ = torch::zeros({shards_.shard_numel}, params_.at(0).options().requires_grad(false));
}

int64_t ShardedAdamW::state_bytes() const { return 2 * m_.numel() * int64_t(m_.element_size()); }

int64_t ShardedAdamW::gradient_bytes() const {
  return grad_shard_.defined() ? grad_shard_.numel() * int64_t(grad_shard_.element_size()) : 0;
}

at::Tensor ShardedAdamW::gradient_piece(const ShardSegment& s) {
  if (grad_shard_.defined()) return grad_shard_.narrow(0, s.shard_offset, s.length);
  const auto& g = params_[s.param].grad();
  if (!g.defined()) {
    throw std::runtime_error(fmt::format("zero: parameter {} has no gradient", s.param));
  }
  return piece(g, s.param_offset, s.length);
}

double ShardedAdamW::clip_and_step(double max_norm, double lr) {
  torch::NoGradGuard no_grad;
  const auto& mine = shards_.of_rank[size_t(comm_.rank())];
  std::vector<at::Tensor> grads;
  for (const auto& s : mine) grads.push_back(gradient_piece(s));

  // The global norm: each rank's sum of squares over its shard, summed over ranks.
  const double sumsq = sum_of_squares(grads);  // one device synchronisation, not one per shard
  const double total = std::sqrt(sum_over_ranks(comm_, sumsq, params_[0].device()));
  // torch.nn.utils.clip_grad_norm_'s coefficient, as clip_grad_norm (optim.cc).
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  if (coef < 1.0) {
    for (auto& g : grads) g.mul_(coef);
  }

  // AdamW on the shard's pieces: AdamW::step's arithmetic (optim.cc).
  AdamWTensors pieces;
  for (size_t k = 0; k < mine.size(); ++k) {
    const auto& s = mine[k];
    pieces.add(piece(params_[s.param].detach(), s.param_offset, s.length), grads[k],
               m_.narrow(0, s.shard_offset, s.length), v_.narrow(0, s.shard_offset, s.length),
               params_[s.param].dim() >= 2);
  }
  adamw_update_tensors(pieces, opt_, ++steps_, lr, fused_);
  all_gather_parameters();
  return total;
}

std::vector<StatePiece> ShardedAdamW::pieces() {
  std::vector<StatePiece> out;
  for (const auto& s : shards_.of_rank[size_t(comm_.rank())]) {
    out.push_back({s.param, s.param_offset, s.length,
                   piece(params_[s.param].detach(), s.param_offset, s.length),
                   m_.narrow(0, s.shard_offset, s.length), v_.narrow(0, s.shard_offset, s.length)});
  }
  return out;
}

std::vector<StatePiece> ShardedAdamW::pieces_to_load() {
  std::vector<StatePiece> out = pieces();
  for (int r = 0; r < comm_.world(); ++r) {
    if (r == comm_.rank()) continue;
    for (const auto& s : shards_.of_rank[size_t(r)]) {
      out.push_back({s.param,
                     s.param_offset,
                     s.length,
                     piece(params_[s.param].detach(), s.param_offset, s.length),
                     {},
                     {}});
    }
  }
  return out;
}

// Each bucket's slices go round in chunks of at most kGatherChunk elements per rank: buffers of
// W + 1 chunks (4 MiB each in fp32) instead of a bucket's size (unit 0's embedding makes one
// bucket of ~150 MiB in GPT-2 small), which would raise zero1's peak.
constexpr int64_t kGatherChunk = int64_t(1) << 20;

void ShardedAdamW::all_gather_parameters() {
  torch::NoGradGuard no_grad;
  const int world = comm_.world(), rank = comm_.rank();
  const auto o = params_[0].options().requires_grad(false);
  int64_t largest = 0;
  for (const auto& b : shards_.buckets) largest = std::max(largest, b.layout.shard_numel);
  const int64_t chunk = std::min(largest, kGatherChunk);
  auto send_buffer = torch::empty({chunk}, o);
  auto out_buffer = torch::empty({world * chunk}, o);
  for (const auto& b : shards_.buckets) {
    const int64_t S = b.layout.shard_numel;
    // Calls f(piece of a parameter, offset in the chunk) for rank r's segments of bucket b in
    // its slice's [c0, c0 + n).
    auto pieces_in = [&](int r, int64_t c0, int64_t n, auto&& f) {
      for (const auto& s : b.layout.of_rank[size_t(r)]) {
        const int64_t a = std::max(c0, s.shard_offset);
        const int64_t z = std::min(c0 + n, s.shard_offset + s.length);
        if (a >= z) continue;
        const auto& p = params_[b.params[s.param]];
        f(piece(p.detach(), s.param_offset + (a - s.shard_offset), z - a), a - c0);
      }
    };
    for (int64_t c0 = 0; c0 < S; c0 += chunk) {
      const int64_t n = std::min(chunk, S - c0);
      auto send = send_buffer.narrow(0, 0, n);
      send.zero_();  // padding
      pieces_in(rank, c0, n,
                [&](const at::Tensor& p, int64_t at) { send.narrow(0, at, p.numel()).copy_(p); });
      auto out = out_buffer.narrow(0, 0, world * n);  // rank r's chunk at [r n, r n + n)
      comm_.all_gather_flat(out, send)->wait();
      for (int r = 0; r < world; ++r) {
        if (r == rank) continue;
        pieces_in(r, c0, n,
                  [&](at::Tensor p, int64_t at) { p.copy_(out.narrow(0, r * n + at, p.numel())); });
      }
    }
  }
}

}  // namespace hpc::train::dist
