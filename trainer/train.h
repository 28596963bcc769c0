// The three commands of hpctrain: train, eval and export. Options are plain data filled by
// main.cc from the command line; the work happens in train.cc (the only place that runs steps).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/config.h"

namespace hpc::train {

// Which model: a named config with optional shape overrides, or Hugging Face weights.
struct ModelOptions {
  std::string model = "gpt2";
  std::optional<int64_t> n_layer, n_head, n_embd, block_size, vocab_size;
  std::string init_from;  // HF directory or .safetensors file; its config.json wins over the above

  GptConfig resolve() const;  // throws UserError for unknown names and impossible shapes
};

struct RuntimeOptions {
  std::string device = "auto";     // auto (CUDA when available), cpu, cuda
  int threads = 0;                 // 0: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else LibTorch's
  int64_t head_chunk = -1;         // rows per chunk of the fused head + cross-entropy; 0: plain;
                                   // -1: 512 on CPU (fits the benchmark's caches), 4096 on CUDA
  std::string precision = "auto";  // auto (bf16 on CUDA, fp32 on the CPU), fp32, bf16
};

struct TrainOptions {
  ModelOptions model;
  RuntimeOptions runtime;
  // Data
  std::string data;      // file, or directory of shards named *train* / *val*
  std::string val_data;  // default: the *val* shards of a --data directory
  std::string data_format = "auto";
  // Batch: total_batch_tokens = micro_batch * seq_len * world * accumulation steps
  int64_t total_batch_tokens = 524288;  // the defaults here and below: model/config.h
  std::string defaults_from;  // "tiny's defaults: micro-batch, warm-up": what filled unset flags
  int64_t micro_batch = 64;
  std::optional<int64_t> seq_len;  // default: the model's block size
  // Recipe
  int64_t max_steps = 19073;
  double max_lr = 6e-4;
  double min_lr_ratio = 0.1;
  int64_t warmup_steps = 715;
  std::optional<int64_t> decay_steps;  // default: max_steps
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;
  uint64_t seed = 1337;
  // Output
  std::string metrics;  // JSON lines
  int64_t log_every = 1;
  int64_t eval_every = 250;
  int64_t val_batches = 20;
  int64_t sample_every = 0;
  int64_t sample_tokens = 64;
  std::string checkpoint_dir = "checkpoints";
  int64_t checkpoint_every = 0;  // 0: only with --checkpoint-at-end
  bool checkpoint_at_end = false;
  int keep_checkpoints = 2;
  std::string resume;  // "", "auto" (newest in checkpoint_dir, if any), or a checkpoint file
  std::string resume_mode() const;  // --resume, or "auto" in a requeued Slurm job
  std::string dump_grads;           // write the first step's gradients (HF names and layout) here
  double peak_tflops = 0;           // for MFU; 0: known GPUs by name, none on CPU
  // Distributed
  std::string strategy = "none";  // none, ddp, zero1, zero2
  std::string master_suffix;      // appended to the first host of SLURM_JOB_NODELIST
  double dist_timeout_s = 300;
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;
};

struct EvalOptions {
  std::string init_from;
  std::string data;
  std::string data_format = "auto";
  int64_t seq_len = 0;  // default: the model's block size
  int64_t batches = 1;
  RuntimeOptions runtime;
};

struct ExportOptions {
  ModelOptions model;  // random init from --seed when there is no --from
  std::string from;    // hpctrain checkpoint file or directory (newest), or HF weights
  std::string to;
  uint64_t seed = 1337;
  RuntimeOptions runtime;
};

// run_train's exit status after SIGUSR1 or SIGTERM stopped it early: every rank finished the
// step and the checkpoint is whole, so a rerun with --resume auto loses nothing (sysexits'
// EX_TEMPFAIL: try again). hpclaunch's batch script requeues the job when srun returns it.
inline constexpr int kExitStoppedForRequeue = 75;

// Each returns the process exit status; UserError propagates to main (exit 2).
int run_train(const TrainOptions& o);
int run_eval(const EvalOptions& o);
int run_export(const ExportOptions& o);

}  // namespace hpc::train
