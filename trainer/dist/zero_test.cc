// The sharded optimiser on its own: which elements each rank owns (padding included), and that a
// world of one reproduces AdamW + clip_grad_norm bit for bit.
#include "dist/zero.h"

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
  ShardedAdamW sharded(b, AdamWOptions{}, comm);
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
