#include "optim/schedule.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "error.h"

using namespace hpc::train;

TEST_CASE("warm-up is linear and reaches max_lr", "[schedule]") {
  LrSchedule s{6e-4, 0.1, 10, 100};
  CHECK(s.at(0) == Approx(6e-5));
  CHECK(s.at(4) == Approx(3e-4));
  CHECK(s.at(9) == Approx(6e-4));
}

TEST_CASE("cosine decays to 10% and stays there", "[schedule]") {
  LrSchedule s{6e-4, 0.1, 10, 110};
  CHECK(s.at(10) == Approx(6e-4));
  CHECK(s.at(60) == Approx(6e-5 + 0.5 * (6e-4 - 6e-5)));
  CHECK(s.at(110) == Approx(6e-5));
  CHECK(s.at(500) == Approx(6e-5));
  for (int i = 11; i <= 110; ++i) CHECK(s.at(i) <= s.at(i - 1));
}

TEST_CASE("gradient accumulation divides the total batch", "[schedule]") {
  CHECK(grad_accum_steps(524288, 64, 1024, 1) == 8);
  CHECK(grad_accum_steps(524288, 16, 1024, 4) == 8);
  CHECK_THROWS_AS(grad_accum_steps(1000, 4, 64, 1), hpc::UserError);
  CHECK_THROWS_WITH(grad_accum_steps(1000, 4, 64, 1),
                    Catch::Contains("--total-batch-tokens") && Catch::Contains("256"));
  CHECK_THROWS_WITH(grad_accum_steps(1024, 0, 64, 1), Catch::Contains("--micro-batch"));
}
