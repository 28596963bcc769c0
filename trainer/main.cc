// hpctrain: GPT-2 training in C++ (LibTorch) — the binary hpclaunch's batch scripts start.
//   hpctrain train  --data PATH --max-steps N [--model NAME | shape flags] [--strategy
//   ddp|zero1|zero2|fsdp] ... hpctrain eval   --init-from DIR --data FILE --seq-len T --batches N
//   hpctrain export --to DIR [--from CHECKPOINT | --model NAME --seed S]
//   hpctrain bench-allreduce [--min 1K] [--max 1G] [--factor 2] [--iters N] [--json FILE] ...
//   hpctrain node-check [--only gemm|link] [--margin 0.2] [--slow-nodes-file FILE] ...
// Bad input: one line on stderr, exit status 2.
#include <malloc.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include "build_info.h"
#include "dist/bench_allreduce.h"
#include "dist/node_check.h"
#include "error.h"
#include "man_page.h"
#include "metrics/progress.h"
#include "model/config.h"
#include "train.h"
#include "version_line.h"

namespace {

using hpc::train::ModelOptions;
using hpc::train::RuntimeOptions;

// Which freed memory glibc's allocator keeps resident, by strategy.
//  none, ddp: all of it, for reuse. By default glibc hands every block over 32 MiB back to the
//    kernel, and the next step's allocation of the same size page-faults and zero-fills it again:
//    ~13% of a CPU step at the benchmark shape (the [V, C] head gradient alone is 51 MB). Their
//    buffers are the same every step, so the heap stops growing after the first.
//  zero1, zero2, fsdp: blocks of 1 MiB and up are mapped and unmapped, and free pages at the top
//    of the heap over 64 MiB are returned. The threshold is fixed (set, glibc stops raising it
//    to the size of each mapped block freed, up to 32 MiB): fsdp gathers and frees every unit
//    twice a step, and kept in the heap those buffers and the gradients' left the process ~0.9
//    GB above its live memory at GPT-2 124M, W=2 (docs/strategies.md#memory-per-rank). The
//    price: those buffers are faulted in afresh each time (fsdp's CPU time per step ~1.8x).
void configure_allocator(const std::string& strategy) {
  if (strategy == "zero1" || strategy == "zero2" || strategy == "fsdp") {
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    return;
  }
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();

// Shape flags left unset take the named config's value.
struct ShapeFlags {
  int64_t n_layer = kUnset, n_head = kUnset, n_embd = kUnset, block_size = kUnset,
          vocab_size = kUnset;
  void apply(ModelOptions& m) const {
    if (n_layer != kUnset) m.n_layer = n_layer;
    if (n_head != kUnset) m.n_head = n_head;
    if (n_embd != kUnset) m.n_embd = n_embd;
    if (block_size != kUnset) m.block_size = block_size;
    if (vocab_size != kUnset) m.vocab_size = vocab_size;
  }
};

void add_model_flags(CLI::App* app, ModelOptions& m, ShapeFlags& s) {
  app->add_option("--model", m.model,
                  "named shape: gpt2, gpt2-medium, gpt2-large, gpt2-xl, mini, tiny")
      ->capture_default_str();
  app->add_option("--n-layer", s.n_layer, "override the number of blocks");
  app->add_option("--n-head", s.n_head, "override the number of attention heads");
  app->add_option("--n-embd", s.n_embd, "override the embedding width");
  app->add_option("--block-size", s.block_size, "override the longest sequence (position table)");
  app->add_option("--vocab-size", s.vocab_size, "override the vocabulary size");
}

void add_runtime_flags(CLI::App* app, RuntimeOptions& r) {
  app->add_option("--device", r.device, "auto, cpu or cuda")->capture_default_str();
  app->add_option("--threads", r.threads,
                  "intra-op threads (default: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK)");
  app->add_option("--head-chunk", r.head_chunk,
                  "rows per chunk of the fused head + cross-entropy (default on CPU: the fewest "
                  "even chunks whose fp32 logits fit 256 MiB; 4096 on CUDA); 0 materialises "
                  "all logits");
  app->add_option("--precision", r.precision,
                  "auto (bf16 on CUDA, fp32 on the CPU), fp32, or bf16 (autocast; fsdp gathers "
                  "parameters in bf16; master weights, reductions and AdamW stay fp32)")
      ->capture_default_str();
}

// `hpctrain train`: the flags and where they land.
struct TrainFlags {
  hpc::train::TrainOptions options;
  ShapeFlags shape;
  int64_t seq_len = kUnset, decay = kUnset;
  int64_t total_batch_tokens = kUnset, micro_batch = kUnset, warmup_steps = kUnset;

  // Flags left unset take the named model's training defaults (model/config.h).
  void apply_batch_defaults() {
    auto& t = options;
    const auto d = hpc::train::train_defaults(t.model.model);
    t.total_batch_tokens = total_batch_tokens != kUnset ? total_batch_tokens : d.total_batch_tokens;
    t.micro_batch = micro_batch != kUnset ? micro_batch : d.micro_batch;
    t.warmup_steps = warmup_steps != kUnset ? warmup_steps : d.warmup_steps;
    std::vector<std::string> taken;
    if (total_batch_tokens == kUnset) taken.push_back("total batch");
    if (micro_batch == kUnset) taken.push_back("micro-batch");
    if (warmup_steps == kUnset) taken.push_back("warm-up");
    for (size_t i = 0; i < taken.size(); ++i)
      t.defaults_from += (i == 0 ? t.model.model + "'s defaults: " : ", ") + taken[i];
  }
};

CLI::App* add_train_command(CLI::App& app, TrainFlags& f) {
  hpc::train::TrainOptions& t = f.options;
  auto* train = app.add_subcommand("train", "train a GPT-2");
  add_model_flags(train, t.model, f.shape);
  train->add_option("--init-from", t.model.init_from,
                    "start from Hugging Face GPT-2 weights (DIR or .safetensors)");
  train->add_option("--data", t.data, "token file, or directory of *train*/*val* shards")
      ->required();
  train->add_option("--val-data", t.val_data,
                    "validation tokens (default: *val* shards of --data)");
  train->add_option("--data-format", t.data_format, "auto, npy, llmc, u16 or text")
      ->capture_default_str();
  train->add_option("--total-batch-tokens", f.total_batch_tokens,
                    "tokens per optimiser step, all ranks (default: the model's; gpt2 524288, "
                    "mini 16384, tiny 8192)");
  train->add_option("--micro-batch", f.micro_batch,
                    "sequences per forward pass (B; default: the model's; gpt2 64, mini and tiny "
                    "8)");
  train->add_option("--seq-len", f.seq_len, "tokens per sequence (T; default: the block size)");
  train->add_option("--max-steps", t.max_steps, "optimiser steps")->required();
  train->add_option("--max-lr", t.max_lr, "peak learning rate")->capture_default_str();
  train->add_option("--min-lr-ratio", t.min_lr_ratio, "cosine floor as a fraction of --max-lr")
      ->capture_default_str();
  train->add_option("--warmup-steps", f.warmup_steps,
                    "linear warm-up steps (default: the model's; gpt2 715, mini 20, tiny 5)");
  train->add_option("--decay-steps", f.decay,
                    "step where the cosine reaches its floor (default: --max-steps)");
  train->add_option("--weight-decay", t.weight_decay, "AdamW decay of 2+-dimensional tensors")
      ->capture_default_str();
  train->add_option("--beta1", t.beta1, "AdamW beta1")->capture_default_str();
  train->add_option("--beta2", t.beta2, "AdamW beta2")->capture_default_str();
  train->add_option("--eps", t.eps, "AdamW epsilon")->capture_default_str();
  train->add_option("--grad-clip", t.grad_clip, "clip the global gradient norm to this")
      ->capture_default_str();
  train->add_option("--seed", t.seed, "initialisation seed: a run is deterministic for a seed")
      ->capture_default_str();
  train->add_option("--metrics", t.metrics,
                    "JSON-lines metrics file (rank 0; default: $HPCTRAIN_METRICS)");
  train->add_option("--log-every", t.log_every, "print a step line every N steps")
      ->capture_default_str();
  train->add_option("--eval-every", t.eval_every, "validation loss every N steps (0: never)")
      ->capture_default_str();
  train->add_option("--val-batches", t.val_batches, "batches per validation")
      ->capture_default_str();
  train
      ->add_option("--sample-every", t.sample_every, "print a text sample every N steps (0: never)")
      ->capture_default_str();
  train->add_option("--sample-tokens", t.sample_tokens, "tokens per sample")->capture_default_str();
  train->add_option("--checkpoint-dir", t.checkpoint_dir, "where checkpoints go")
      ->capture_default_str();
  train->add_option("--checkpoint-every", t.checkpoint_every, "checkpoint every N steps (0: never)")
      ->capture_default_str();
  train->add_flag("--checkpoint-at-end", t.checkpoint_at_end,
                  "also checkpoint after the last step");
  train
      ->add_option("--keep-checkpoints", t.keep_checkpoints,
                   "keep the newest N checkpoints (0: all)")
      ->capture_default_str();
  train->add_option("--resume", t.resume,
                    "auto (newest whole one in --checkpoint-dir, if any), a checkpoint "
                    "(DIR/step_NNNNNNNN) or a directory of them; a requeued Slurm job "
                    "(SLURM_RESTART_COUNT >= 1) resumes as with auto");
  train->add_option("--dump-grads", t.dump_grads,
                    "write the first step's gradients to this .safetensors");
  train->add_option("--peak-tflops", t.peak_tflops, "device peak for MFU (default: known GPUs)");
  train
      ->add_option("--strategy", t.strategy,
                   "none, ddp, zero1 (sharded optimiser state), zero2 (and sharded gradients) or "
                   "fsdp (and sharded parameters)")
      ->capture_default_str();
  train->add_option("--master-suffix", t.master_suffix,
                    "appended to the first host of SLURM_JOB_NODELIST (JSC: i)");
  train->add_option("--dist-timeout", t.dist_timeout_s, "seconds before a collective gives up")
      ->capture_default_str();
  train->add_option("--bucket-cap-mb", t.bucket_cap_mb, "DDP gradient bucket size (MiB)")
      ->capture_default_str();
  train->add_option("--first-bucket-mb", t.first_bucket_mb, "DDP first bucket size (MiB)")
      ->capture_default_str();
  add_runtime_flags(train, t.runtime);
  return train;
}

CLI::App* add_eval_command(CLI::App& app, hpc::train::EvalOptions& e) {
  auto* eval = app.add_subcommand("eval", "mean cross-entropy of HF GPT-2 weights on a token file");
  eval->add_option("--init-from", e.init_from, "HF GPT-2 weights (DIR or .safetensors)")
      ->required();
  eval->add_option("--data", e.data, "token file")->required();
  eval->add_option("--data-format", e.data_format, "auto, npy, llmc, u16 or text")
      ->capture_default_str();
  eval->add_option("--seq-len", e.seq_len, "tokens per window (default: the block size)");
  eval->add_option("--batches", e.batches, "windows from the start of the file")
      ->capture_default_str();
  add_runtime_flags(eval, e.runtime);
  return eval;
}

CLI::App* add_export_command(CLI::App& app, hpc::train::ExportOptions& x, ShapeFlags& shape) {
  auto* exp =
      app.add_subcommand("export", "write HF GPT-2 weights (model.safetensors + config.json)");
  exp->add_option("--to", x.to, "output directory")->required();
  exp->add_option("--from", x.from,
                  "hpctrain checkpoint (DIR/step_NNNNNNNN, or the newest whole one in a directory "
                  "of them) or HF weights; default: a fresh init");
  add_model_flags(exp, x.model, shape);
  exp->add_option("--seed", x.seed, "seed of the fresh initialisation")->capture_default_str();
  add_runtime_flags(exp, x.runtime);
  return exp;
}

CLI::App* add_bench_allreduce_command(CLI::App& app, hpc::train::BenchAllreduceOptions& b) {
  auto* bench = app.add_subcommand(
      "bench-allreduce", "all-reduce bandwidth over the process group (Gloo/NCCL), as nccl-tests");
  bench->add_option("--min", b.min, "smallest size in bytes (K/M/G suffixes: powers of 1024)")
      ->capture_default_str();
  bench->add_option("--max", b.max, "largest size in bytes")->capture_default_str();
  bench->add_option("--factor", b.factor, "each size is the previous one times this")
      ->capture_default_str();
  bench->add_option("--iters", b.iters, "timed all-reduces per size")->capture_default_str();
  bench->add_option("--warmup", b.warmup, "untimed all-reduces per size before them")
      ->capture_default_str();
  bench->add_option("--dtype", b.dtype, "float32, float64, float16, bfloat16, int32 or int64")
      ->capture_default_str();
  bench->add_option("--json", b.json,
                    "rank 0 writes the table, world size, backend and hostnames here (default: "
                    "$HPCTRAIN_BENCH_JSON)");
  bench->add_option("--device", b.device, "auto, cpu (Gloo) or cuda (NCCL)")->capture_default_str();
  bench->add_option("--dist-timeout", b.dist_timeout_s, "seconds before a collective gives up")
      ->capture_default_str();
  bench->add_option("--master-suffix", b.master_suffix,
                    "appended to the first host of SLURM_JOB_NODELIST (JSC: i)");
  return bench;
}

CLI::App* add_node_check_command(CLI::App& app, hpc::train::NodeCheckOptions& c) {
  auto* check = app.add_subcommand(
      "node-check",
      "one rank per node: time a GEMM and the links to every peer; rank 0 names the nodes slower "
      "than the median by more than --margin (hpclaunch's job.preflight)");
  check->add_option("--only", c.only, "gemm or link (default: both)");
  check->add_option("--gemm-size", c.gemm_size,
                    "n of the n x n GEMM (default: 8192 bf16 on CUDA, 1024 fp32 on the CPU)");
  check->add_option("--gemm-iters", c.gemm_iters, "timed GEMMs (default: 50 CUDA, 10 CPU)");
  check->add_option("--link-bytes", c.link_bytes, "bytes per send (K/M/G suffixes)")
      ->capture_default_str();
  check->add_option("--link-iters", c.link_iters, "timed exchanges with each peer")
      ->capture_default_str();
  check->add_option("--margin", c.margin, "a node this fraction below the median is slow")
      ->capture_default_str();
  check->add_option("--slow-nodes-file", c.slow_nodes_file,
                    "rank 0 writes one line per slow node here (\"NODE why\"), empty when none");
  check->add_option("--device", c.device, "auto, cpu (Gloo) or cuda (NCCL)")->capture_default_str();
  check->add_option("--dist-timeout", c.dist_timeout_s, "seconds before a transfer gives up")
      ->capture_default_str();
  check->add_option("--master-suffix", c.master_suffix,
                    "appended to the first host of SLURM_JOB_NODELIST (JSC: i)");
  return check;
}

}  // namespace

int main(int argc, char** argv) {
  hpc::train::block_where_signal();  // before any thread starts: only sigwait takes SIGURG
  CLI::App app{"hpctrain: GPT-2 training with LibTorch (single process or DDP)"};
  app.require_subcommand(1);
  const std::string version =
      hpc::version_line("hpctrain") + "\n" + hpc::train::build_description();
  app.set_version_flag(
      "--version", version,
      "print the version, and the LibTorch, CUDA, NCCL and Gloo this hpctrain was built with");
  // A flag given twice takes its last value, so a script can append overrides to a preset line.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  TrainFlags tf;
  hpc::train::TrainOptions& t = tf.options;
  CLI::App* train = add_train_command(app, tf);
  hpc::train::EvalOptions e;
  CLI::App* eval = add_eval_command(app, e);
  hpc::train::ExportOptions x;
  ShapeFlags x_shape;
  add_export_command(app, x, x_shape);
  hpc::train::BenchAllreduceOptions b;
  CLI::App* bench = add_bench_allreduce_command(app, b);
  hpc::train::NodeCheckOptions nc;
  CLI::App* node_check = add_node_check_command(app, nc);
  if (argc == 2 && std::string(argv[1]) == "--help-man") {  // the build writes hpctrain.1
    std::fputs(hpc::man_page(app, {"hpctrain",
                                   hpc::version_line("hpctrain"),
                                   "hpctrain COMMAND [OPTIONS]",
                                   {{"See also", "hpclaunch(1)"}}})
                   .c_str(),
               stdout);
    return 0;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion& v) {
    return app.exit(v);
  } catch (const CLI::CallForHelp& h) {
    return app.exit(h);
  } catch (const CLI::CallForAllHelp& h) {
    return app.exit(h);
  } catch (const CLI::ParseError& err) {
    std::fprintf(
        stderr, "hpctrain: %s; see hpctrain %s--help\n", err.what(),
        app.get_subcommands().empty() ? "" : (app.get_subcommands()[0]->get_name() + " ").c_str());
    return hpc::kExitUsage;
  }

  configure_allocator(*train ? t.strategy : "none");

  try {
    if (*train) {
      // `hpclaunch run` puts the metrics into the run directory (see its batch template), so
      // that the launcher can show step and tokens/s while it follows the job.
      if (t.metrics.empty()) {
        if (const char* m = std::getenv("HPCTRAIN_METRICS"); m && *m) t.metrics = m;
      }
      tf.shape.apply(t.model);
      if (tf.seq_len != kUnset) t.seq_len = tf.seq_len;
      if (tf.decay != kUnset) t.decay_steps = tf.decay;
      tf.apply_batch_defaults();
      return hpc::train::run_train(t);
    }
    if (*eval) return hpc::train::run_eval(e);
    if (*bench) {
      // The batch template points this into the run directory (`hpclaunch tune` reads it there).
      if (b.json.empty()) {
        if (const char* j = std::getenv("HPCTRAIN_BENCH_JSON"); j && *j) b.json = j;
      }
      return hpc::train::run_bench_allreduce(b);
    }
    if (*node_check) return hpc::train::run_node_check(nc);
    x_shape.apply(x.model);
    return hpc::train::run_export(x);
  } catch (const hpc::UserError& err) {
    std::fprintf(stderr, "hpctrain: %s\n", err.what());
    return hpc::kExitUsage;
  } catch (const c10::Error& err) {
    std::fprintf(stderr, "hpctrain: error: %s\n", err.what_without_backtrace());
    return 1;
  } catch (const std::exception& err) {
    std::fprintf(stderr, "hpctrain: error: %s\n", err.what());
    return 1;
  }
}
