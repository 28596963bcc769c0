// The sharded optimiser on its own: which elements each rank owns (padding included, per bucket),
// that a world of one reproduces AdamW + clip_grad_norm bit for bit, and (LibTorch 2.4+) that
// its fused AdamW steps as the loop does.
#include "dist/zero.h"

#include <algorithm>

#include <torch/torch.h>
#include <catch2/catch.hpp>

using namespace hpc::train;
using namespace hpc::train::dist;

namespace {

// A world of one: collectives are copies.
class Alone final : public Communicator {
 public:
  class Done final : public Pending {
   public:
    void wait() override {}
  };
  int rank() const override { return 0; }
  int world() const override { return 1; }
  const char* backend() const override { return "gloo"; }
  const char* flat_collectives() const override { return "none (one rank)"; }
  std::unique_ptr<Pending> all_reduce_sum(at::Tensor&) override { return std::make_unique<Done>(); }
  void broadcast(std::vector<at::Tensor>&, int) override {}
  void all_gather(std::vector<at::Tensor>& out, const at::Tensor& in) override {
    out.at(0).copy_(in);
  }
  void barrier() override {}
  std::unique_ptr<Pending> send(at::Tensor&, int) override { return std::make_unique<Done>(); }
  std::unique_ptr<Pending> recv(at::Tensor&, int) override { return std::make_unique<Done>(); }
  std::string lost_ranks(std::chrono::milliseconds) override { return ""; }
  std::unique_ptr<Pending> all_gather_flat(at::Tensor& out, const at::Tensor& in) override {
    out.copy_(in);
    return std::make_unique<Done>();
  }
  std::unique_ptr<Pending> reduce_scatter_flat(at::Tensor& out, at::Tensor& in) override {
    out.copy_(in);
    return std::make_unique<Done>();
  }
};

}  // namespace

TEST_CASE("flat shards cover every element once, the last one padded", "[zero]") {
  // Parameters of 5, 3 and 2 elements: N = 10, W = 4 -> S = 3, two padding elements.
  FlatShards s({5, 3, 2}, 4);
  CHECK(s.total == 10);
  CHECK(s.shard_numel == 3);
  CHECK(s.flat_offset == std::vector<int64_t>{0, 5, 8});
  REQUIRE(s.of_rank.size() == 4);
  // rank 1 owns flat [3, 6): parameter 0's [3, 5) and parameter 1's [0, 1)
  REQUIRE(s.of_rank[1].size() == 2);
  CHECK(s.of_rank[1][0].param == 0);
  CHECK(s.of_rank[1][0].param_offset == 3);
  CHECK(s.of_rank[1][0].shard_offset == 0);
  CHECK(s.of_rank[1][0].length == 2);
  CHECK(s.of_rank[1][1].param == 1);
  CHECK(s.of_rank[1][1].param_offset == 0);
  CHECK(s.of_rank[1][1].shard_offset == 2);
  CHECK(s.of_rank[1][1].length == 1);
  // rank 3 owns flat [9, 12): one real element, two of padding
  REQUIRE(s.of_rank[3].size() == 1);
  CHECK(s.of_rank[3][0].param == 2);
  CHECK(s.of_rank[3][0].param_offset == 1);
  CHECK(s.of_rank[3][0].length == 1);
  int64_t covered = 0;
  for (const auto& rank : s.of_rank) {
    for (const auto& seg : rank) covered += seg.length;
  }
  CHECK(covered == 10);

  FlatShards tiny({1}, 4);  // fewer elements than ranks: ranks 1..3 own padding only
  CHECK(tiny.shard_numel == 1);
  CHECK(tiny.of_rank[0].size() == 1);
  CHECK(tiny.of_rank[1].empty());
  CHECK(tiny.of_rank[3].empty());
}

TEST_CASE("bucket shards: each bucket padded to W slices, rank r owns slice r of each", "[zero]") {
  // Parameters of 5, 3, 2 and 4 elements in two buckets, filled in reverse order as ddp.cc does:
  // bucket 0 = {3, 2} (4 + 2 = 6 elements), bucket 1 = {1, 0} (3 + 5 = 8 elements). W = 4:
  // S_0 = 2 (no padding), S_1 = 2 (padding 0); W = 3: S_0 = 2, S_1 = 3 (one padding element).
  const std::vector<int64_t> numels{5, 3, 2, 4};
  const std::vector<std::vector<size_t>> buckets{{3, 2}, {1, 0}};
  BucketShards four(buckets, numels, 4);
  REQUIRE(four.buckets.size() == 2);
  CHECK(four.buckets[0].layout.shard_numel == 2);
  CHECK(four.buckets[1].layout.shard_numel == 2);
  CHECK(four.buckets[0].shard_offset == 0);
  CHECK(four.buckets[1].shard_offset == 2);
  CHECK(four.shard_numel == 4);

  BucketShards three(buckets, numels, 3);
  CHECK(three.buckets[0].layout.shard_numel == 2);
  CHECK(three.buckets[1].layout.shard_numel == 3);
  CHECK(three.shard_numel == 5);
  // Rank 1 owns bucket 0's [2, 4) = parameter 3's [2, 4), and bucket 1's [3, 6) = parameter 0's
  // [0, 3) (parameter 1 fills [0, 3)); its shard is [2 from bucket 0 | 3 from bucket 1].
  const auto& r1 = three.of_rank[1];
  REQUIRE(r1.size() == 2);
  CHECK(r1[0].param == 3);
  CHECK(r1[0].param_offset == 2);
  CHECK(r1[0].shard_offset == 0);
  CHECK(r1[0].length == 2);
  CHECK(r1[1].param == 0);
  CHECK(r1[1].param_offset == 0);
  CHECK(r1[1].shard_offset == 2);
  CHECK(r1[1].length == 3);
  // Rank 0: bucket 0's [0, 2) = parameter 3's [0, 2); bucket 1's [0, 3) = parameter 1 whole.
  // Rank 2: bucket 0's [4, 6) = parameter 2 whole; bucket 1's [6, 9) = parameter 0's [3, 5) and
  // one padding element: parameter 0 spans the boundary between ranks 1 and 2.
  const auto& r2 = three.of_rank[2];
  REQUIRE(r2.size() == 2);
  CHECK(r2[0].param == 2);
  CHECK(r2[0].length == 2);
  CHECK(r2[1].param == 0);
  CHECK(r2[1].param_offset == 3);
  CHECK(r2[1].shard_offset == 2);
  CHECK(r2[1].length == 2);
  // Every element of every parameter is owned once.
  for (const auto* layout : {&four, &three}) {
    std::vector<std::vector<int>> owners;
    for (int64_t n : numels) owners.emplace_back(size_t(n), 0);
    for (const auto& rank : layout->of_rank) {
      for (const auto& seg : rank) {
        CHECK(seg.shard_offset + seg.length <= layout->shard_numel);
        for (int64_t k = 0; k < seg.length; ++k) ++owners[seg.param][size_t(seg.param_offset + k)];
      }
    }
    for (const auto& p : owners) CHECK(std::count(p.begin(), p.end(), 1) == int64_t(p.size()));
  }
}

TEST_CASE("a world of one steps exactly as AdamW with clipping", "[zero]") {
  torch::manual_seed(7);
  auto make = [] {
    std::vector<at::Tensor> ps{torch::randn({4, 3}), torch::randn({5}), torch::randn({2, 2})};
    for (auto& p : ps) p.requires_grad_(true);
    return ps;
  };
  auto a = make();
  std::vector<at::Tensor> b;
  for (auto& p : a) b.push_back(p.detach().clone().requires_grad_(true));
  AdamW whole(a, AdamWOptions{});
  Alone comm;
  ShardedAdamW sharded(b, {{2, 1}, {0}}, AdamWOptions{}, comm);  // two buckets, as ddp.cc's
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < a.size(); ++i) {
      auto g = torch::randn(a[i].sizes()) * 3;  // norms above the clip
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    const double n1 = clip_grad_norm(a, 1.0);
    whole.step(1e-2);
    const double n2 = sharded.clip_and_step(1.0, 1e-2);
    CHECK(n2 == Approx(n1).epsilon(1e-12));
    for (size_t i = 0; i < a.size(); ++i) CHECK(torch::equal(a[i], b[i]));
  }
  CHECK(sharded.state_bytes() == 2 * (12 + 5 + 4) * 4);
}

TEST_CASE("the sharded AdamW's fused kernel steps as its loop does", "[zero]") {
  if (!AdamW::fused_available()) {
    // LibTorch 1.13 has no _fused_adamw_: asking for it leaves the loop on (checked in
    // optim_test.cc); nothing to compare.
    SUCCEED("no _fused_adamw_ in this LibTorch");
    return;
  }
  auto start = [] {
    torch::manual_seed(5);
    return std::vector<at::Tensor>{torch::randn({6, 4}), torch::randn({7}), torch::randn({3, 3})};
  };
  auto run = [&](bool fused) {
    auto ps = start();
    for (auto& p : ps) p.requires_grad_(true);
    Alone comm;
    ShardedAdamW opt(ps, {{2, 1}, {0}}, AdamWOptions{}, comm);
    opt.use_fused(fused);
    torch::manual_seed(9);
    for (int step = 0; step < 4; ++step) {
      for (auto& p : ps) p.mutable_grad() = torch::randn(p.sizes()) * 2;
      opt.clip_and_step(1.0, 1e-2 * (step + 1));
    }
    return ps;
  };
  const auto loop = run(false), fused = run(true), initial = start();
  for (size_t i = 0; i < loop.size(); ++i) {
    const double diff = (loop[i] - fused[i]).abs().max().item<double>();
    INFO("parameter " << i << " max |loop - fused| = " << diff);
    CHECK(diff < 1e-6);
    CHECK_FALSE(torch::equal(loop[i], initial[i]));  // they did move
  }
}
