#include "model/config.h"

#include <map>

#include <fmt/format.h>

#include "error.h"

namespace hpc::train {
namespace {

const std::map<std::string, GptConfig>& table() {
  //                                              L   H     C     T      V
  static const std::map<std::string, GptConfig> t = {
      {"gpt2", GptConfig{12, 12, 768, 1024, 50304}},
      {"gpt2-medium", GptConfig{24, 16, 1024, 1024, 50304}},
      {"gpt2-large", GptConfig{36, 20, 1280, 1024, 50304}},
      {"gpt2-xl", GptConfig{48, 25, 1600, 1024, 50304}},
      {"mini", GptConfig{4, 4, 256, 256, 50304}},
      {"tiny", GptConfig{2, 2, 64, 64, 256}},
  };
  return t;
}

}  // namespace

GptConfig named_config(const std::string& name) {
  auto it = table().find(name);
  if (it == table().end()) {
    throw UserError("--model", fmt::format("unknown model '{}'", name),
                    fmt::format("use one of {}", fmt::join(config_names(), ", ")));
  }
  return it->second;
}

TrainDefaults train_defaults(const std::string& name) {
  //                          tokens a step  B  warm-up
  if (name == "mini") return {16384, 8, 20};
  if (name == "tiny") return {8192, 8, 5};
  return {};
}

std::vector<std::string> config_names() {
  return {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "mini", "tiny"};
}

void validate(const GptConfig& c) {
  auto positive = [](int64_t v, const char* flag) {
    if (v <= 0) throw UserError(flag, fmt::format("must be positive, got {}", v), "");
  };
  positive(c.n_layer, "--n-layer");
  positive(c.n_head, "--n-head");
  positive(c.n_embd, "--n-embd");
  positive(c.block_size, "--block-size");
  positive(c.vocab_size, "--vocab-size");
  if (c.n_embd % c.n_head != 0) {
    throw UserError("--n-embd",
                    fmt::format("{} is not divisible by --n-head {}", c.n_embd, c.n_head),
                    "choose n_embd as a multiple of n_head");
  }
}

int64_t parameter_count(const GptConfig& c) {
  const int64_t C = c.n_embd;
  const int64_t per_layer = 2 * 2 * C              // ln_1, ln_2
                            + (C * 3 * C + 3 * C)  // attn.c_attn
                            + (C * C + C)          // attn.c_proj
                            + (C * 4 * C + 4 * C)  // mlp.c_fc
                            + (4 * C * C + C);     // mlp.c_proj
  return c.vocab_size * C + c.block_size * C + c.n_layer * per_layer + 2 * C;
}

int64_t non_embedding_parameter_count(const GptConfig& c) {
  return parameter_count(c) - c.block_size * c.n_embd;
}

double training_flops_per_token(const GptConfig& c, int64_t seq_len) {
  const double N = static_cast<double>(non_embedding_parameter_count(c));
  return 6.0 * N + 12.0 * static_cast<double>(c.n_layer * c.n_embd * seq_len);
}

std::string describe(const GptConfig& c) {
  return fmt::format("L{} H{} C{} T{} V{}", c.n_layer, c.n_head, c.n_embd, c.block_size,
                     c.vocab_size);
}

}  // namespace hpc::train
