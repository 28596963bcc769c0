// GPT-2 model shapes: the named configurations and the checks a shape must pass.
// No LibTorch here: the CLI and the tests use it without paying for torch headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpc::train {

struct GptConfig {
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  int64_t block_size = 1024;   // longest sequence the position table covers (HF: n_positions)
  int64_t vocab_size = 50304;  // GPT-2's 50257 padded to a multiple of 128 for fast matmuls

  bool operator==(const GptConfig& o) const {
    return n_layer == o.n_layer && n_head == o.n_head && n_embd == o.n_embd &&
           block_size == o.block_size && vocab_size == o.vocab_size;
  }
};

// gpt2 (124M), gpt2-medium (350M), gpt2-large (774M), gpt2-xl (1558M): OpenAI's shapes with the
// vocabulary padded to 50304. tiny and mini are for CPUs: tiny (L2 H2 C64 T64, byte vocabulary 256)
// for tests and demos on text; mini (L4 H4 C256 T256 V50304) is the benchmark shape.
// Throws hpc::UserError listing the known names when `name` is not one of them.
GptConfig named_config(const std::string& name);
std::vector<std::string> config_names();

// The batch and warm-up a named shape trains with unless a flag says otherwise. gpt2*: build-
// nanogpt's recipe (524,288 tokens a step, 715 warm-up steps); the CPU shapes a batch that a
// 2-core machine steps through in about a second, so that a demo of 50 steps ends in a minute
// (tiny), and the benchmark's batch (mini).
struct TrainDefaults {
  int64_t total_batch_tokens = 524288;
  int64_t micro_batch = 64;
  int64_t warmup_steps = 715;
};
TrainDefaults train_defaults(const std::string& name);  // name: one of config_names()

// Throws hpc::UserError (where: "--n-embd" etc.) when a shape is impossible: non-positive sizes,
// n_embd not divisible by n_head.
void validate(const GptConfig& c);

// Parameters of the model (tied head counted once), and the same without the position table
// (the count nanoGPT uses for FLOP estimates).
int64_t parameter_count(const GptConfig& c);
int64_t non_embedding_parameter_count(const GptConfig& c);

// Training FLOPs per token at sequence length T (forward + backward): 6 N + 12 L C T, where N
// counts all weights except the position table (PaLM appendix B, as nanoGPT estimates MFU).
double training_flops_per_token(const GptConfig& c, int64_t seq_len);

std::string describe(const GptConfig& c);  // "L12 H12 C768 T1024 V50304"

}  // namespace hpc::train
