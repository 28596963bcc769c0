#include "model/config.h"

#include <catch2/catch.hpp>

#include "error.h"

using namespace hpc::train;

TEST_CASE("named configs have GPT-2's shapes", "[config]") {
  auto g = named_config("gpt2");
  CHECK(g.n_layer == 12);
  CHECK(g.n_head == 12);
  CHECK(g.n_embd == 768);
  CHECK(g.block_size == 1024);
  CHECK(g.vocab_size == 50304);
  CHECK(named_config("gpt2-xl").n_embd == 1600);
  CHECK(named_config("tiny").vocab_size == 256);
  for (const auto& n : config_names()) CHECK_NOTHROW(validate(named_config(n)));
}

TEST_CASE("parameter counts match GPT-2 124M", "[config]") {
  GptConfig c = named_config("gpt2");
  c.vocab_size = 50257;
  // The published count: 124,439,808 with the tied head.
  CHECK(parameter_count(c) == 124439808);
}

TEST_CASE("unknown names and impossible shapes are user errors", "[config]") {
  CHECK_THROWS_WITH(named_config("gpt3"),
                    Catch::Contains("unknown model 'gpt3'") && Catch::Contains("tiny"));
  GptConfig c = named_config("tiny");
  c.n_head = 3;
  CHECK_THROWS_AS(validate(c), hpc::UserError);
  CHECK_THROWS_WITH(validate(c), Catch::Contains("--n-embd") && Catch::Contains("not divisible"));
  c = named_config("tiny");
  c.n_layer = 0;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("--n-layer"));
}
