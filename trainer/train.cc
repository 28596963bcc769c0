// The training loop, read top to bottom: set up, then for each step: validate, sample, run
// the micro-steps (forward, backward), meet the other ranks, clip, update, report, checkpoint.
#include "train.h"

#include <chrono>
#include <csignal>
#include <cstdlib>

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "checkpoint.h"
#include "data.h"
#include "dist/rendezvous.h"
#include "dist/make_strategy.h"
#include "dist/strategy.h"
#include "error.h"
#include "metrics.h"
#include "model.h"
#include "optim.h"
#include "schedule.h"

#if HPC_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace hpc::train {
namespace fs = std::filesystem;

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

namespace {

// ----------------------------------------------------------------------------- runtime set-up

// SIGUSR1 (forwarded by the batch script before the time limit) or SIGTERM (Slurm's preemption,
// scancel, the time limit; KillWait seconds before SIGKILL): finish the step, checkpoint, exit
// kExitStoppedForRequeue; the requeued job resumes from that checkpoint. Holds the signal.
volatile std::sig_atomic_t g_stop_requested = 0;
extern "C" void request_stop(int sig) { g_stop_requested = sig; }

const char* stop_signal_name(int sig) { return sig == SIGTERM ? "SIGTERM" : "SIGUSR1"; }

// A requeued Slurm job (SLURM_RESTART_COUNT >= 1) resumes by itself unless --resume says otherwise.
std::string resume_mode(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  if (restarts && std::atoi(restarts) >= 1) return "auto";
  return "";
}

void set_threads(const RuntimeOptions& r) {
  int n = r.threads;
  if (n <= 0 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    if (const char* s = std::getenv("SLURM_CPUS_PER_TASK")) n = std::atoi(s);
  }
  if (n > 0) at::set_num_threads(n);
}

at::Device pick_device(const RuntimeOptions& r, int local_rank) {
  const bool cuda = torch::cuda::is_available();
  if (r.device == "cpu" || (r.device == "auto" && !cuda)) return at::Device(at::kCPU);
  if (r.device == "cuda" || r.device == "auto") {
    if (!cuda) throw UserError("--device", "cuda was asked for but no CUDA device is usable",
                               "use --device cpu, or a CUDA build of LibTorch on a GPU node");
    const int n = int(torch::cuda::device_count());
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % n));
  }
  throw UserError("--device", fmt::format("unknown device '{}'", r.device), "use auto, cpu or cuda");
}

// bf16 autocast around the forward pass on CUDA (the recipe's precision); nothing on CPU.
class AutocastScope {
 public:
  explicit AutocastScope(bool on) : on_(on) {
    if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
#else
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
#endif
  }
  ~AutocastScope() {
    if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(at::kCUDA, false);
#else
    at::autocast::set_enabled(false);
#endif
    at::autocast::clear_cache();
  }

 private:
  bool on_;
};

int64_t head_chunk_rows(const RuntimeOptions& r, const at::Device& d) {
  if (r.head_chunk >= 0) return r.head_chunk;
  return d.is_cuda() ? 4096 : 512;
}

void synchronize(const at::Device& d) {
#if HPC_TORCH_CUDA
  if (d.is_cuda()) at::cuda::getCurrentCUDAStream(d.index()).synchronize();
#else
  (void)d;
#endif
}

int64_t memory_in_use(const at::Device& d) {
#if HPC_TORCH_CUDA
  if (d.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(d.index());
    return stats.allocated_bytes[0].peak;  // StatType::AGGREGATE
  }
#endif
  (void)d;
  return resident_memory_bytes();
}

// Peak dense bf16 FLOP/s of known GPUs, for MFU; 0 when unknown (CPUs).
double peak_flops(const at::Device& d, double peak_tflops_flag) {
  if (peak_tflops_flag > 0) return peak_tflops_flag * 1e12;
#if HPC_TORCH_CUDA
  if (d.is_cuda()) {
    const std::string name = at::cuda::getDeviceProperties(d.index())->name;
    if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos) return 989e12;
    if (name.find("A100") != std::string::npos) return 312e12;
    if (name.find("L40S") != std::string::npos) return 362e12;
    if (name.find("A40") != std::string::npos) return 150e12;
  }
#endif
  (void)d;
  return 0;
}

// --------------------------------------------------------------------------------- batches

struct Batch {
  at::Tensor x, y;  // [B, T] int64 inputs and targets
};

Batch next_batch(DataIterator& it, std::vector<int64_t>& window, int64_t B, int64_t T,
                 const at::Device& device) {
  it.next(window);
  auto all = torch::from_blob(window.data(), {B * T + 1}, torch::kLong);
  Batch b;
  b.x = all.narrow(0, 0, B * T).view({B, T}).to(device, /*non_blocking=*/false, /*copy=*/true);
  b.y = all.narrow(0, 1, B * T).view({B, T}).to(device, false, true);
  return b;
}

// Mean loss over `batches` batches from the start of `it` (which is reset first).
double evaluate(GptImpl& model, DataIterator& it, int64_t batches, int64_t B, int64_t T,
                const at::Device& device, bool autocast) {
  torch::NoGradGuard no_grad;
  it.reset();
  std::vector<int64_t> window;
  double sum = 0;
  for (int64_t i = 0; i < batches; ++i) {
    Batch b = next_batch(it, window, B, T, device);
    AutocastScope ac(autocast);
    sum += model.loss(b.x, b.y).item<double>();
  }
  return sum / double(batches);
}

// Text from the model with top-k 50 sampling; tokens < 256 are bytes (the byte tokenizer).
std::string sample_text(GptImpl& model, int64_t tokens, uint64_t seed, const at::Device& device) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<int64_t> ids = {'\n'};
  const int64_t V = model.config().vocab_size;
  if (V <= '\n') ids = {0};
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t T = std::min<int64_t>(int64_t(ids.size()), model.config().block_size);
    auto idx = torch::from_blob(ids.data() + ids.size() - T, {1, T}, torch::kLong).to(device);
    auto logits = model.logits(idx).select(1, T - 1).to(at::kCPU, at::kFloat);  // [1, V]
    auto probs = at::softmax(logits, -1);
    auto top = probs.topk(std::min<int64_t>(50, V), -1);
    auto pick = at::multinomial(std::get<0>(top), 1, false, gen);
    ids.push_back(std::get<1>(top).gather(-1, pick).item<int64_t>());
  }
  // One log line: newlines and other control bytes are escaped.
  std::string out;
  for (size_t i = 1; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id == '\n') out += "\\n";
    else if (id >= 32 && id < 127) out.push_back(char(id));
    else out += fmt::format("<{}>", id);
  }
  return out;
}

// The persistent training state this rank holds (the memory report): the model's parameters and
// .grad tensors, the strategy's gradient buffers, and the optimiser's moments (whole, or the
// strategy's shard).
StateBytes held_state(const std::vector<at::Tensor>& params, const dist::Strategy& strategy) {
  auto bytes = [](const at::Tensor& t) { return t.defined() ? t.numel() * int64_t(t.element_size()) : 0; };
  StateBytes s;
  for (const auto& p : params) {
    s.parameters += bytes(p);
    s.gradients += bytes(p.grad());
  }
  const auto held = strategy.held_bytes();
  if (held.parameters >= 0) s.parameters = held.parameters;  // fsdp: the shards
  s.gradients += held.gradients;
  s.optimizer = held.optimizer;
  return s;
}

std::vector<at::Tensor> parameters_of(GptImpl& model) {
  std::vector<at::Tensor> ps;
  for (auto& item : model.named_parameters()) ps.push_back(item.value());
  return ps;
}

void check_seq_len(int64_t T, const GptConfig& c) {
  if (T <= 0 || T > c.block_size) {
    throw UserError("--seq-len", fmt::format("{} is outside 1..{} (the model's block size)", T,
                                             c.block_size),
                    "lower --seq-len or raise --block-size");
  }
}

// A checkpoint for another model or batch shape is refused (the world size, the micro-batch and
// so the accumulation may change: the steps see the same sequences).
void check_resumable(const Manifest& m, const fs::path& dir, const GptConfig& config, int64_t T,
                     int64_t total_batch_tokens) {
  const std::string where = (dir / "manifest.json").string();
  if (!(m.config == config)) {
    throw UserError(where, fmt::format("checkpoint is for model {}, the flags say {}", describe(m.config),
                                       describe(config)),
                    "resume with the same model flags");
  }
  if (m.seq_len != T || m.total_batch_tokens != total_batch_tokens) {
    throw UserError(where,
                    fmt::format("checkpoint has seq-len {} and total batch {} tokens; this run has {} and {}",
                                m.seq_len, m.total_batch_tokens, T, total_batch_tokens),
                    "resume with the same --seq-len and --total-batch-tokens (the world size and "
                    "--micro-batch may change)");
  }
}

void print0(int rank, const std::string& line) {
  if (rank != 0) return;
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace

// ------------------------------------------------------------------------------------- train

int run_train(const TrainOptions& o) {
  using Clock = std::chrono::steady_clock;
  std::signal(SIGUSR1, request_stop);  // early: USR1's and TERM's default actions end the process
  std::signal(SIGTERM, request_stop);
  // --- who we are, what we train, on what ---
  if (!dist::known_strategy(o.strategy)) {
    throw UserError("--strategy", fmt::format("unknown strategy '{}'", o.strategy),
                    "use none, ddp, zero1, zero2 or fsdp");
  }
  if ((o.strategy == "zero2" || o.strategy == "fsdp") && !o.dump_grads.empty()) {
    throw UserError("--dump-grads", fmt::format("{} keeps only a shard of the gradients", o.strategy),
                    "use --strategy zero1 or ddp");
  }
  const bool distributed = o.strategy != "none";
  const auto rdv = dist::rendezvous_from_env(dist::process_environment(), o.master_suffix, distributed);
  const GptConfig config = o.model.resolve();
  const int64_t B = o.micro_batch;
  const int64_t T = o.seq_len.value_or(config.block_size);
  check_seq_len(T, config);
  const int64_t accum = grad_accum_steps(o.total_batch_tokens, B, T, rdv.world);
  if (o.max_steps < 0) throw UserError("--max-steps", "must not be negative", "");
  const TokenFormat format = parse_token_format(o.data_format);
  if (o.data.empty()) throw UserError("--data", "is required", "point it at a token file or directory");
  DataIterator train_data(list_shards(o.data, "train"), format, B, T, rdv.rank, rdv.world,
                          config.vocab_size);
  std::unique_ptr<DataIterator> val_data;
  {
    std::vector<fs::path> val_shards;
    if (!o.val_data.empty()) {
      val_shards = list_shards(o.val_data, "val");
    } else if (fs::is_directory(o.data)) {
      try {
        val_shards = list_shards(o.data, "val");
      } catch (const UserError&) {  // no validation shards: no validation
      }
    }
    if (!val_shards.empty()) {
      val_data = std::make_unique<DataIterator>(val_shards, format, B, T, rdv.rank, rdv.world,
                                                config.vocab_size);
    }
  }
  LrSchedule schedule{o.max_lr, o.min_lr_ratio, o.warmup_steps, o.decay_steps.value_or(o.max_steps)};

  // Resume: which checkpoints (newest first); the newest readable one is checked against the
  // flags before anything is built. Which one is used is decided once the ranks can agree
  // (select_checkpoint: a damaged one is skipped for the previous one).
  std::vector<fs::path> resume_from;
  const std::string resume = resume_mode(o.resume);
  if (resume == "auto") {
    resume_from = list_checkpoints(o.checkpoint_dir);
    if (resume_from.empty() && has_single_file_checkpoints(o.checkpoint_dir) && rdv.rank == 0) {
      std::fputs(fmt::format("hpctrain: warning: {} holds only checkpoints of the earlier single-file "
                             "format (ckpt_*.safetensors), which this hpctrain does not read; "
                             "starting from step 0\n", o.checkpoint_dir).c_str(), stderr);
    }
  } else if (!resume.empty()) {
    resume_from = checkpoints_at(resume);
    if (resume_from.empty()) {
      throw UserError("--resume", fmt::format("no checkpoint at {}", resume),
                      "give a checkpoint (DIR/step_NNNNNNNN) or a directory of them, or auto");
    }
  }
  for (const auto& c : resume_from) {
    std::optional<Manifest> m;
    try {
      m = read_manifest(c);
    } catch (const UserError&) {
      continue;  // damaged: select_checkpoint reports it and falls back
    }
    check_resumable(*m, c, config, T, o.total_batch_tokens);
    break;
  }

  set_threads(o.runtime);
  const at::Device device = pick_device(o.runtime, rdv.local_rank);
  const bool autocast = device.is_cuda();
  if (device.is_cuda()) {
#if HPC_TORCH_CUDA
    c10::cuda::set_device(device.index());  // else every rank's context lands on GPU 0
#endif
    at::globalContext().setAllowTF32CuBLAS(true);
  }

  dist::StrategyOptions so;
  so.name = o.strategy;
  so.timeout_s = o.dist_timeout_s;
  so.bucket_cap_mb = o.bucket_cap_mb;
  so.first_bucket_mb = o.first_bucket_mb;
  so.device = device.str();
  so.adamw = AdamWOptions{o.beta1, o.beta2, o.eps, o.weight_decay};
  auto strategy = dist::make_strategy(so, rdv);
  dist::ProcessGroup& ranks = strategy->group();
  const int rank = ranks.rank();

  // --- the model and its optimiser ---
  torch::manual_seed(o.seed);
  Gpt model(config);
  if (!o.model.init_from.empty()) load_hf_weights(o.model.init_from, *model);
  model->to(device);
  model->set_head_chunk_rows(head_chunk_rows(o.runtime, device));
  if (autocast) model->set_head_matmul_dtype(at::kBFloat16);
  auto params = parameters_of(*model);
  // What checkpoints record and check (before attach: fsdp frees the parameters' storage).
  const std::vector<ParamShape> layout = param_layout(*model);
  strategy->attach(params, model->parameter_units());  // builds the optimiser
  if (UnitHooks* hooks = strategy->unit_hooks()) model->set_unit_hooks(hooks);  // fsdp

  int64_t first_step = 0;
  if (!resume_from.empty()) {
    const auto r0 = Clock::now();
    const auto cp = select_checkpoint(resume_from, ranks);
    if (!cp) {
      throw UserError(resume == "auto" ? o.checkpoint_dir : resume,
                      fmt::format("none of the {} checkpoint(s) is whole (see the warnings above)",
                                  resume_from.size()),
                      "resume from another copy, or start afresh without --resume");
    }
    const Manifest& m = cp->manifest;
    check_resumable(m, cp->dir, config, T, o.total_batch_tokens);
    if (m.params != layout) {
      throw UserError((cp->dir / "manifest.json").string(),
                      "its parameter names or shapes are not the model's", "resume with the same model flags");
    }
    load_pieces(*cp, strategy->pieces_to_load());
    strategy->set_optimizer_steps(m.optimizer_steps);
    strategy->after_load();
    first_step = m.next_step;
    // The data: each rank where it stood, or, with another world size or micro-batch, where
    // the world stood (rank 0's position) plus this rank's offset.
    if (m.world == rdv.world && m.micro_batch == B) {
      train_data.seek(m.files[size_t(rank)].data.shard, m.files[size_t(rank)].data.position);
    } else {
      train_data.seek(m.files[0].data.shard, m.files[0].data.position + B * T * rank);
    }
    print0(rank, fmt::format("resumed from {} at step {} (saved by {} rank(s) with {}; verified and "
                             "loaded in {:.2f} s)", cp->dir.string(), first_step, m.world, m.strategy,
                             std::chrono::duration<double>(Clock::now() - r0).count()));
  }

  MetricsLog metrics;
  if (rank == 0 && !o.metrics.empty()) metrics = MetricsLog(o.metrics, /*append=*/!resume_from.empty());
  const double flops_per_token = training_flops_per_token(config, T);
  const double peak = peak_flops(device, o.peak_tflops);
  print0(rank, fmt::format("hpctrain: model {} ({:.2f}M parameters) | B {} T {} accumulation {} "
                           "world {} ({}) | total batch {} tokens | device {} threads {}",
                           describe(config), double(parameter_count(config)) / 1e6, B, T, accum,
                           rdv.world, strategy->name(), o.total_batch_tokens, device.str(),
                           at::get_num_threads()));

  std::vector<int64_t> window;
  for (int64_t step = first_step; step < o.max_steps; ++step) {
    const bool last = step == o.max_steps - 1;
    // --- validation and samples: they read their own data and change no training state ---
    if (val_data && o.eval_every > 0 && (step % o.eval_every == 0 || last)) {
      model->eval();
      double v = evaluate(*model, *val_data, o.val_batches, B, T, device, autocast);
      v = ranks.mean_over_ranks(v);
      print0(rank, fmt::format("step {:5d} | val loss {:.6f}", step, v));
      if (rank == 0) metrics.write_val(step, v);
    }
    // fsdp: every rank takes part in a forward pass (the units are gathered); rank 0 prints.
    if (o.sample_every > 0 && step > 0 && (step % o.sample_every == 0 || last) &&
        (rank == 0 || strategy->shards_parameters())) {
      print0(rank, fmt::format("step {:5d} | sample: {}", step,
                               sample_text(*model, o.sample_tokens, o.seed + uint64_t(step), device)));
    }

    // --- one optimiser step: accum micro-steps of B x T tokens on every rank ---
    model->train();
    synchronize(device);
    const auto t0 = Clock::now();
    const double cpu0 = process_cpu_seconds();
    for (auto& p : params) p.mutable_grad() = at::Tensor();  // the next backward writes them
    at::Tensor loss_accum = torch::zeros({}, torch::TensorOptions().device(device));
    for (int64_t micro = 0; micro < accum; ++micro) {
      Batch b = next_batch(train_data, window, B, T, device);
      strategy->set_gradient_sync(micro == accum - 1);
      at::Tensor loss;
      {
        AutocastScope ac(autocast);
        loss = model->loss(b.x, b.y);  // scalar: mean over the B*T tokens
      }
      loss = loss / double(accum);  // the gradient of the mean over the whole step
      loss_accum += loss.detach();
      loss.backward();
    }
    strategy->finish_gradients();  // DDP: gradients are now the mean over ranks
    if (!o.dump_grads.empty() && step == first_step && rank == 0) export_gradients(o.dump_grads, *model);
    const double loss_value = ranks.mean_over_ranks(loss_accum.item<double>());
    const double lr = schedule.at(step);
    const double norm = strategy->clip_and_step(o.grad_clip, lr);  // the norm over all shards
    synchronize(device);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();

    // --- report ---
    StepMetrics m;
    m.step = step;
    m.loss = loss_value;
    m.lr = lr;
    m.grad_norm = norm;
    m.step_ms = dt * 1e3;
    m.cpu_ms = (process_cpu_seconds() - cpu0) * 1e3;
    m.tokens_per_s = double(o.total_batch_tokens) / dt;
    if (peak > 0) m.mfu = flops_per_token * m.tokens_per_s / (peak * rdv.world);
    m.memory_bytes = memory_in_use(device);
    m.state = held_state(params, *strategy);
    if (o.log_every > 0 && (step % o.log_every == 0 || last)) print0(rank, format_step_line(m));
    if (step == first_step) {
      print0(rank, fmt::format("rank 0 holds {} bytes of parameters, {} of gradients, {} of optimiser "
                               "state ({})", m.state.parameters, m.state.gradients,
                               m.state.optimizer, strategy->name()));
    }
    if (rank == 0) metrics.write_step(m);

    // --- checkpoint: after the update, so it resumes at step + 1 ---
    const bool periodic = o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0;
    const bool stop = ranks.any_rank(g_stop_requested != 0);  // all ranks agree
    if (periodic || (last && o.checkpoint_at_end) || stop) {  // every rank writes its pieces
      Manifest info;
      info.next_step = step + 1;
      info.optimizer_steps = strategy->optimizer_steps();
      info.strategy = strategy->name();
      info.config = config;
      info.micro_batch = B;
      info.seq_len = T;
      info.total_batch_tokens = o.total_batch_tokens;
      info.seed = o.seed;
      info.tokens_consumed = (step + 1) * o.total_batch_tokens;
      info.params = layout;
      const auto c0 = Clock::now();
      const auto saved = save_checkpoint(o.checkpoint_dir, info, strategy->pieces_to_save(),
                                         DataPosition{train_data.shard(), train_data.position()},
                                         ranks, o.keep_checkpoints);
      print0(rank, fmt::format("step {:5d} | checkpoint {} ({:.1f} MB in {} files, {:.2f} s)", step,
                               saved.dir.string(), double(saved.bytes) / 1e6, rdv.world,
                               std::chrono::duration<double>(Clock::now() - c0).count()));
    }
    if (stop) {
      ranks.barrier();  // no rank leaves before the checkpoint is whole
      // A rank that saw no signal itself names the usual one: the batch script forwards USR1.
      const char* sig = stop_signal_name(g_stop_requested);
      if (last) {  // the run is complete: nothing to resume
        print0(rank, fmt::format("step {:5d} | {}: the last step is done; stopping", step, sig));
        return 0;
      }
      print0(rank, fmt::format("step {:5d} | {}: stopping (exit {}); resume with --resume auto "
                               "(automatic in a requeued Slurm job)", step, sig, kExitStoppedForRequeue));
      return kExitStoppedForRequeue;
    }
  }
  ranks.barrier();
  return 0;
}

// -------------------------------------------------------------------------------------- eval

int run_eval(const EvalOptions& o) {
  if (o.init_from.empty()) throw UserError("--init-from", "is required", "point it at HF GPT-2 weights");
  ModelOptions mo;
  mo.init_from = o.init_from;
  const GptConfig config = mo.resolve();
  const int64_t T = o.seq_len > 0 ? o.seq_len : config.block_size;
  check_seq_len(T, config);
  if (o.batches <= 0) throw UserError("--batches", "must be positive", "");
  if (o.data.empty()) throw UserError("--data", "is required", "");
  set_threads(o.runtime);
  const at::Device device = pick_device(o.runtime, 0);
  // Window i: inputs tokens[i*T, i*T+T), targets shifted by one: the DataIterator's first batch
  // of `batches` rows on rank 0.
  DataIterator it({fs::path(o.data)}, parse_token_format(o.data_format), o.batches, T, 0, 1,
                  config.vocab_size);
  torch::manual_seed(0);
  Gpt model(config);
  load_hf_weights(o.init_from, *model);
  model->to(device);
  model->eval();
  model->set_head_chunk_rows(head_chunk_rows(o.runtime, device));
  if (device.is_cuda()) model->set_head_matmul_dtype(at::kBFloat16);
  const double loss = evaluate(*model, it, 1, o.batches, T, device, device.is_cuda());
  std::fputs(fmt::format("{{\"loss\": {:.9g}, \"batches\": {}, \"seq_len\": {}, \"tokens\": {}}}\n",
                         loss, o.batches, T, o.batches * T).c_str(),
             stdout);
  return 0;
}

// ------------------------------------------------------------------------------------ export

int run_export(const ExportOptions& o) {
  if (o.to.empty()) throw UserError("--to", "is required", "name the directory to write");
  set_threads(o.runtime);
  std::optional<Checkpoint> cp;
  ModelOptions mo = o.model;
  if (!o.from.empty()) {
    fs::path from = o.from;
    if (fs::is_directory(from) && fs::exists(from / "config.json")) {
      mo.init_from = from.string();  // HF weights: a round trip
    } else {
      const auto candidates = checkpoints_at(from);
      if (candidates.empty()) {
        throw UserError("--from", fmt::format("no checkpoint at {}", o.from),
                        "give a checkpoint (DIR/step_NNNNNNNN), a directory of them, or HF weights");
      }
      dist::SingleProcessGroup single;
      cp = select_checkpoint(candidates, single);
      if (!cp) {
        throw UserError("--from", fmt::format("none of the {} checkpoint(s) at {} is whole (see the "
                                              "warnings above)", candidates.size(), o.from), "");
      }
    }
  }
  GptConfig config = cp ? cp->manifest.config : mo.resolve();
  torch::manual_seed(o.seed);
  Gpt model(config);
  if (!mo.init_from.empty()) load_hf_weights(mo.init_from, *model);
  if (cp) {
    if (cp->manifest.params != param_layout(*model)) {
      throw UserError((cp->dir / "manifest.json").string(), "its parameter names or shapes are not GPT-2's",
                      "export a checkpoint written by hpctrain train");
    }
    // Every parameter whole, from whichever ranks' files hold it; no optimiser state.
    std::vector<dist::StatePiece> pieces;
    auto params = parameters_of(*model);
    for (size_t i = 0; i < params.size(); ++i) {
      pieces.push_back({i, 0, params[i].numel(), params[i].detach().view({-1}), {}, {}});
    }
    load_pieces(*cp, pieces);
  }
  export_hf(o.to, *model);
  fmt::print("exported {}{} to {}\n", describe(config),
             cp ? fmt::format(" (step {}, saved by {} rank(s))", cp->manifest.next_step, cp->manifest.world) : "",
             o.to);
  return 0;
}

}  // namespace hpc::train
