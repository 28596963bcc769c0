// AdamW's two update paths agree: the hand-written loop (optim_cpu.cc, what the CPU runs) and
// LibTorch's fused kernel (what CUDA parameters use on LibTorch 2.4+), here both on the CPU; and
// the sum of squares is the same whether a tensor is summed on the host or on its device.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "optim/optim.h"

using hpc::train::AdamW;
using hpc::train::AdamWOptions;

namespace {

// A matrix (decayed) and a vector (not decayed), as a Linear's weight and bias.
std::vector<at::Tensor> make_params() {
  torch::manual_seed(7);
  return {torch::randn({8, 5}).requires_grad_(), torch::randn({5}).requires_grad_()};
}

std::vector<at::Tensor> run(bool fused, int steps) {
  auto params = make_params();
  AdamW opt(params, AdamWOptions{});
  opt.use_fused(fused);
  REQUIRE(opt.fused() == (fused && AdamW::fused_available()));
  torch::manual_seed(11);
  for (int s = 0; s < steps; ++s) {
    torch::NoGradGuard no_grad;
    for (auto& p : params) p.mutable_grad() = torch::randn(p.sizes()) * 0.5;
    opt.step(1e-2 * (s + 1));
  }
  return params;
}

}  // namespace

TEST_CASE("AdamW: the fused kernel steps as the loop does", "[optim]") {
  if (!AdamW::fused_available()) {
    // LibTorch 1.13 has no _fused_adamw_: asking for it leaves the loop on.
    auto params = make_params();
    AdamW opt(params, AdamWOptions{});
    opt.use_fused(true);
    CHECK_FALSE(opt.fused());
    return;
  }
  const auto loop = run(false, 4);
  const auto fused = run(true, 4);
  REQUIRE(loop.size() == fused.size());
  for (size_t i = 0; i < loop.size(); ++i) {
    const double diff = (loop[i] - fused[i]).abs().max().item<double>();
    INFO("parameter " << i << " max |loop - fused| = " << diff);
    CHECK(diff < 1e-6);
  }
}

TEST_CASE("sum_of_squares: host loop and device sum agree, undefined skipped", "[optim]") {
  torch::manual_seed(3);
  const auto a = torch::randn({100});                   // plain CPU float: the host loop
  const auto b = torch::randn({7, 3}).t();              // not contiguous: the device path
  const auto c = torch::randn({50}).to(at::kBFloat16);  // bf16: the device path
  const double expected = a.to(at::kDouble).pow(2).sum().item<double>() +
                          b.to(at::kDouble).pow(2).sum().item<double>() +
                          c.to(at::kDouble).pow(2).sum().item<double>();
  const double got = hpc::train::sum_of_squares({a, at::Tensor(), b, c});
  CHECK(got == Approx(expected).epsilon(1e-6));
}
