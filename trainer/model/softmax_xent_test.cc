#include "model/softmax_xent.h"

#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

using namespace hpc::train;

namespace {

// Double-precision reference of one row: loss and scale * (softmax - onehot).
double reference(const std::vector<float>& row, int64_t t, double scale,
                 std::vector<double>& grad) {
  double m = -INFINITY;
  for (float v : row) m = std::max(m, double(v));
  double sum = 0;
  for (float v : row) sum += std::exp(double(v) - m);
  grad.resize(row.size());
  for (size_t j = 0; j < row.size(); ++j) grad[j] = scale * std::exp(double(row[j]) - m) / sum;
  grad[size_t(t)] -= scale;
  return std::log(sum) + m - double(row[size_t(t)]);
}

}  // namespace

TEST_CASE("softmax cross-entropy rows match a double-precision reference", "[head]") {
  INFO("best implementation here " << softmax_xent_isa());
  const auto isa = GENERATE(SoftmaxIsa::avx512, SoftmaxIsa::avx2, SoftmaxIsa::scalar);
  if (!softmax_xent_has(isa)) return;  // not on this CPU
  INFO("implementation " << int(isa));
  std::mt19937 gen(1);
  // 2048-float blocks (AVX-512): one, one and a bit, many with a short last one.
  for (int64_t V : {1, 7, 8, 9, 17, 257, 2048, 2049, 50304}) {
    const int64_t n = 3, ld = V + 5;
    std::normal_distribution<float> normal(0.f,
                                           V > 1000 ? 3.f : 20.f);  // wide: exercises exp's range
    std::vector<float> logits(size_t(n * ld));
    for (auto& v : logits) v = normal(gen);
    std::vector<int64_t> target(n);
    for (int64_t i = 0; i < n; ++i) target[i] = (i * 7919) % V;
    std::vector<float> loss(n), loss_only(n), copy = logits;
    softmax_xent_rows(copy.data(), n, V, ld, target.data(), loss_only.data(), 0.0f, isa);
    CHECK(copy == logits);  // no gradient asked: the logits stay
    const float scale = 1.0f / 1024;
    softmax_xent_rows(logits.data(), n, V, ld, target.data(), loss.data(), scale, isa);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> row(copy.begin() + i * ld, copy.begin() + i * ld + V);
      std::vector<double> grad;
      const double want = reference(row, target[i], scale, grad);
      INFO("V " << V << " row " << i);
      CHECK(loss[i] == Approx(want).epsilon(1e-6).margin(1e-6));
      CHECK(loss_only[i] == loss[i]);
      double worst = 0;
      for (int64_t j = 0; j < V; ++j) {
        worst = std::max(worst, std::abs(logits[size_t(i * ld + j)] - grad[size_t(j)]));
      }
      CHECK(worst <= 1e-6 * scale);
      CHECK(logits[size_t(i * ld + V)] == copy[size_t(i * ld + V)]);  // past V: untouched
    }
  }
}

TEST_CASE("a confident row has a tiny loss and a tiny gradient", "[head]") {
  const auto isa = GENERATE(SoftmaxIsa::avx512, SoftmaxIsa::avx2, SoftmaxIsa::scalar);
  if (!softmax_xent_has(isa)) return;
  INFO("implementation " << int(isa));
  // The maximum in the second 2048-float block: the first block's exponentials are rescaled.
  std::vector<float> row(5000, -50.0f);
  row[4242] = 50.0f;
  int64_t t = 4242;
  float loss = -1;
  softmax_xent_rows(row.data(), 1, 5000, 5000, &t, &loss, 1.0f, isa);
  CHECK(loss == Approx(0.0).margin(1e-6));
  CHECK(row[4242] == Approx(0.0).margin(1e-6));
  CHECK(row[0] == Approx(0.0).margin(1e-30));
}
