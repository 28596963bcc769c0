// What the model flags resolve to: a named shape with overrides, or a Hugging Face config.
#include <cstdlib>

#include "checkpoint/checkpoint.h"
#include "train.h"

namespace hpc::train {

GptConfig ModelOptions::resolve() const {
  GptConfig c;
  if (!init_from.empty()) {
    c = read_hf_config(init_from);
  } else {
    c = named_config(model);
    if (n_layer) c.n_layer = *n_layer;
    if (n_head) c.n_head = *n_head;
    if (n_embd) c.n_embd = *n_embd;
    if (block_size) c.block_size = *block_size;
    if (vocab_size) c.vocab_size = *vocab_size;
  }
  validate(c);
  return c;
}

// A requeued Slurm job (SLURM_RESTART_COUNT >= 1) resumes by itself unless --resume says otherwise.
std::string TrainOptions::resume_mode() const {
  if (!resume.empty()) return resume;
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  if (restarts && std::atoi(restarts) >= 1) return "auto";
  return "";
}

}  // namespace hpc::train
