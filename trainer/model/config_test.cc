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

TEST_CASE("a named shape brings the batch it trains with", "[model][config]") {
  using hpc::train::train_defaults;
  // build-nanogpt's recipe for every GPT-2 size.
  for (const char* gpt2 : {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"}) {
    CHECK(train_defaults(gpt2).total_batch_tokens == 524288);
    CHECK(train_defaults(gpt2).micro_batch == 64);
    CHECK(train_defaults(gpt2).warmup_steps == 715);
  }
  // The CPU shapes: a step a 2-core machine takes in about a second, not minutes.
  CHECK(train_defaults("tiny").total_batch_tokens == 8192);
  CHECK(train_defaults("tiny").micro_batch == 8);
  CHECK(train_defaults("mini").total_batch_tokens == 16384);
  // Each divides into micro-batches of the shape's block size on 1, 2, 4 and 8 ranks.
  for (const auto& name : hpc::train::config_names()) {
    const auto d = train_defaults(name);
    const auto T = hpc::train::named_config(name).block_size;
    for (int64_t world : {1, 2, 4, 8}) {
      CAPTURE(name, world);
      CHECK(d.total_batch_tokens % (d.micro_batch * T * world) == 0);
    }
  }
}
