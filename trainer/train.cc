// The training loop, read top to bottom: set up, then for each step: validate, sample, run
// the micro-steps (forward, backward), meet the other ranks, clip, update, report, checkpoint.
#include "train.h"

#include <chrono>
#include <csignal>
#include <cstdlib>

#include <fmt/format.h>
#include <torch/torch.h>

#include "atomic_file.h"
#include "checkpoint/checkpoint.h"
#include "data/data.h"
#include "device.h"
#include "dist/make_strategy.h"
#include "dist/rendezvous.h"
#include "dist/storage_bytes.h"
#include "dist/strategy.h"
#include "error.h"
#include "metrics/metrics.h"
#include "metrics/progress.h"
#include "model/model.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "resume.h"

#if HPC_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace hpc::train {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ----------------------------------------------------------------------------- runtime set-up

// SIGUSR1 or SIGUSR2 (job.signal, forwarded by the batch script before the time limit) or SIGTERM
// (Slurm's preemption, scancel; KillWait seconds before SIGKILL): finish the step, checkpoint,
// write the requeue marker, exit kExitStoppedForRequeue; the requeued job resumes from that
// checkpoint. Holds the signal.
volatile std::sig_atomic_t g_stop_requested = 0;
extern "C" void request_stop(int sig) { g_stop_requested = sig; }

const char* stop_signal_name(int sig) {
  return sig == SIGTERM ? "SIGTERM" : sig == SIGUSR2 ? "SIGUSR2" : "SIGUSR1";
}

void set_threads(const RuntimeOptions& r) {
  int n = r.threads;
  if (n <= 0 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    if (const char* s = std::getenv("SLURM_CPUS_PER_TASK")) n = std::atoi(s);
  }
  if (n > 0) at::set_num_threads(n);
}

int64_t head_chunk_rows(const RuntimeOptions& r, const at::Device& d) {
  if (r.head_chunk >= 0) return r.head_chunk;
  return d.is_cuda() ? 4096 : kHeadChunkAuto;
}

// --------------------------------------------------------------------------------- batches

struct Batch {
  at::Tensor x, y;  // [B, T] int64 inputs and targets
};

Batch next_batch(DataIterator& it, std::vector<int64_t>& window, int64_t B, int64_t T,
                 const at::Device& device) {
  it.next(window);
  auto all = torch::from_blob(window.data(), {B * T + 1}, torch::kLong);  // [B T + 1]
  // CUDA: one copy of the window into pinned memory (the caching host allocator's, which keeps a
  // block until the copy that reads it is done), then one asynchronous copy to the device that
  // overlaps the previous step's kernels; `window` is free for the next batch at once. CPU: a
  // copy, as `window` is refilled for the next batch.
  const at::Tensor on_device =
      device.is_cuda() ? all.pin_memory().to(device, /*non_blocking=*/true) : all.clone();
  Batch b;
  b.x = on_device.narrow(0, 0, B * T).view({B, T});
  b.y = on_device.narrow(0, 1, B * T).view({B, T});
  return b;
}

// Mean loss over `batches` batches from the start of `it` (which is reset first).
double evaluate(GptImpl& model, DataIterator& it, int64_t batches, int64_t B, int64_t T,
                const at::Device& device, bool bf16) {
  torch::NoGradGuard no_grad;
  it.reset();
  std::vector<int64_t> window;
  double sum = 0;
  for (int64_t i = 0; i < batches; ++i) {
    Batch b = next_batch(it, window, B, T, device);
    AutocastScope ac(bf16, device);
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
    if (id == '\n')
      out += "\\n";
    else if (id >= 32 && id < 127)
      out.push_back(char(id));
    else
      out += fmt::format("<{}>", id);
  }
  return out;
}

// The persistent training state this rank holds (the memory report): the model's parameters and
// .grad tensors, the strategy's gradient buffers, and the optimiser's moments (whole, or the
// strategy's shard), measured on the storages (dist/storage_bytes.h).
StateBytes held_state(const std::vector<at::Tensor>& params, const dist::Strategy& strategy) {
  dist::StorageBytes parameters, gradients;
  for (const auto& p : params) {
    parameters.add(p);
    gradients.add(p.grad());
  }
  StateBytes s;
  s.parameters = parameters.bytes();
  s.gradients = gradients.bytes();
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
    throw UserError("--seq-len",
                    fmt::format("{} is outside 1..{} (the model's block size)", T, c.block_size),
                    "lower --seq-len or raise --block-size");
  }
}

void print0(int rank, const std::string& line) {
  if (rank != 0) return;
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// ------------------------------------------------------------------------------ train: set-up

void check_strategy_flags(const TrainOptions& o) {
  if (!dist::known_strategy(o.strategy)) {
    throw UserError("--strategy", fmt::format("unknown strategy '{}'", o.strategy),
                    "use none, ddp, zero1, zero2 or fsdp");
  }
  if ((o.strategy == "zero2" || o.strategy == "fsdp") && !o.dump_grads.empty()) {
    throw UserError("--dump-grads",
                    fmt::format("{} keeps only a shard of the gradients", o.strategy),
                    "use --strategy zero1 or ddp");
  }
}

// This rank's share of the training tokens, and the validation tokens (none without *val*
// shards).
struct TrainData {
  std::unique_ptr<DataIterator> train, val;
};

TrainData open_data(const TrainOptions& o, const dist::Rendezvous& rdv, const GptConfig& config,
                    int64_t B, int64_t T) {
  const TokenFormat format = parse_token_format(o.data_format);
  if (o.data.empty()) {
    throw UserError("--data", "is required", "point it at a token file or directory");
  }
  TrainData d;
  d.train = std::make_unique<DataIterator>(list_shards(o.data, "train"), format, B, T, rdv.rank,
                                           rdv.world, config.vocab_size);
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
    d.val = std::make_unique<DataIterator>(val_shards, format, B, T, rdv.rank, rdv.world,
                                           config.vocab_size);
  }
  return d;
}

at::Device set_up_device(const RuntimeOptions& r, int local_rank) {
  set_threads(r);
  const at::Device device = pick_device(r.device, local_rank);
  if (device.is_cuda()) {
#if HPC_TORCH_CUDA
    c10::cuda::set_device(device.index());  // else every rank's context lands on GPU 0
#endif
    at::globalContext().setAllowTF32CuBLAS(true);
  }
  return device;
}

dist::StrategyOptions strategy_options(const TrainOptions& o, const at::Device& device,
                                       bool resuming) {
  dist::StrategyOptions so;
  so.name = o.strategy;
  so.timeout_s = o.dist_timeout_s;
  so.bucket_cap_mb = o.bucket_cap_mb;
  so.first_bucket_mb = o.first_bucket_mb;
  so.device = device.str();
  so.bf16_params = use_bf16(o.runtime.precision, device);
  so.adamw = AdamWOptions{o.beta1, o.beta2, o.eps, o.weight_decay};
  so.parameters_from_checkpoint = resuming;
  return so;
}

// The model on its device: initialised from --seed, or Hugging Face weights (--init-from), or
// left for the checkpoint a resume loads. With `deferred` the parameters get no storage here:
// the strategy materialises them (attach).
Gpt build_model(const TrainOptions& o, const GptConfig& config, const at::Device& device, bool bf16,
                bool deferred, bool resuming) {
  torch::manual_seed(o.seed);
  const bool unfilled = resuming && o.model.init_from.empty();
  Gpt model(config, deferred   ? ParameterStorage::deferred
                    : unfilled ? ParameterStorage::unfilled
                               : ParameterStorage::allocated);
  if (!o.model.init_from.empty()) load_hf_weights(o.model.init_from, *model);
  if (deferred) {
    for (auto& b : model->buffers()) b.set_data(b.to(device));
  } else {
    model->to(device);
  }
  model->set_head_chunk_rows(head_chunk_rows(o.runtime, device));
  if (bf16) model->set_head_matmul_dtype(at::kBFloat16);
  return model;
}

// ------------------------------------------------------------------------ train: one step

// Mean validation loss over all ranks; rank 0 logs it.
void validate(GptImpl& model, DataIterator& val_data, const TrainOptions& o, int64_t step,
              int64_t B, int64_t T, const at::Device& device, dist::ProcessGroup& ranks,
              MetricsLog& metrics) {
  progress_phase(Phase::eval);
  model.eval();
  double v =
      evaluate(model, val_data, o.val_batches, B, T, device, use_bf16(o.runtime.precision, device));
  v = ranks.mean_over_ranks(v);
  print0(ranks.rank(), fmt::format("step {:5d} | val loss {:.6f}", step, v));
  if (ranks.rank() == 0) metrics.write_val(step, v);
}

// `accum` micro-steps of B x T tokens: forward, backward; the strategy reduces the gradients in
// the last one's backward pass. Returns this rank's mean loss over them (a scalar on the device).
at::Tensor forward_backward(GptImpl& model, dist::Strategy& strategy, DataIterator& data,
                            std::vector<int64_t>& window, int64_t accum, int64_t B, int64_t T,
                            const at::Device& device, bool bf16) {
  at::Tensor loss_accum = torch::zeros({}, torch::TensorOptions().device(device));
  for (int64_t micro = 0; micro < accum; ++micro) {
    progress_phase(Phase::data);
    Batch b = next_batch(data, window, B, T, device);
    strategy.set_gradient_sync(micro == accum - 1);
    at::Tensor loss;
    {
      progress_phase(Phase::forward);
      AutocastScope ac(bf16, device);
      loss = model.loss(b.x, b.y);  // scalar: mean over the B*T tokens
    }
    loss = loss / double(accum);  // the gradient of the mean over the whole step
    loss_accum += loss.detach();
    progress_phase(Phase::backward);
    loss.backward();
  }
  return loss_accum;
}

// Collective: every rank writes its pieces of the state after step `step` (it resumes at step +
// 1); rank 0 prints where and how much.
fs::path write_checkpoint(const TrainOptions& o, int64_t step, const GptConfig& config, int64_t B,
                          int64_t T, const std::vector<ParamShape>& layout,
                          dist::Strategy& strategy, const DataIterator& train_data) {
  progress_phase(Phase::checkpoint);
  Manifest info;
  info.next_step = step + 1;
  info.optimizer_steps = strategy.optimizer_steps();
  info.strategy = strategy.name();
  info.config = config;
  info.micro_batch = B;
  info.seq_len = T;
  info.total_batch_tokens = o.total_batch_tokens;
  info.seed = o.seed;
  info.tokens_consumed = (step + 1) * o.total_batch_tokens;
  info.params = layout;
  const auto c0 = Clock::now();
  dist::ProcessGroup& ranks = strategy.group();
  const auto saved = save_checkpoint(o.checkpoint_dir, info, strategy.pieces_to_save(),
                                     DataPosition{train_data.shard(), train_data.position()}, ranks,
                                     o.keep_checkpoints);
  print0(ranks.rank(),
         fmt::format(
             "step {:5d} | checkpoint {} ({:.1f} MB in {} files, {:.2f} s; SHA-256 {:.2f} CPU s "
             "beside the writes, waited for {:.2f} s{})",
             step, saved.dir.string(), double(saved.bytes) / 1e6, ranks.world(), seconds_since(c0),
             saved.hash_seconds, saved.hash_wait_seconds,
             saved.page_cache ? "; through the page cache: the file system refused O_DIRECT" : ""));
  return saved.dir;
}

// The batch script requeues the job when this file names its run (docs/trainer.md#signals):
// "restart=N step=S checkpoint=DIR", N = SLURM_RESTART_COUNT. Written whole (temporary file and
// rename) after the checkpoint's manifest is renamed into place, by rank 0 alone.
void write_requeue_marker(int64_t step, const fs::path& checkpoint) {
  const char* marker = std::getenv("HPCLAUNCH_REQUEUE_MARKER");
  if (!marker || !*marker) return;
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  const std::string restart = restarts && *restarts ? restarts : "0";
  hpc::write_file_atomically(marker, fmt::format("restart={} step={} checkpoint={}\n", restart,
                                                 step, checkpoint.string()));
}

// After SIGUSR1/SIGUSR2/SIGTERM, once the checkpoint is whole on every rank: the exit status.
int stop_on_signal(int64_t step, bool last, const fs::path& checkpoint, dist::ProcessGroup& ranks) {
  ranks.barrier();  // no rank leaves before the checkpoint is whole
  // A rank that saw no signal itself names the usual one: the batch script forwards USR1.
  const char* sig = stop_signal_name(g_stop_requested);
  if (last) {  // the run is complete: nothing to resume
    print0(ranks.rank(),
           fmt::format("step {:5d} | {}: the last step is done; stopping", step, sig));
    return 0;
  }
  if (ranks.rank() == 0) write_requeue_marker(step, checkpoint);
  ranks.barrier();  // the marker is written before any rank exits
  print0(ranks.rank(), fmt::format("step {:5d} | {}: stopping (exit {}); resume with --resume "
                                   "auto (automatic in a requeued Slurm job)",
                                   step, sig, kExitStoppedForRequeue));
  return kExitStoppedForRequeue;
}

}  // namespace

// ------------------------------------------------------------------------------------- train

int run_train(const TrainOptions& o) {
  const auto process_start = Clock::now();
  std::signal(SIGUSR1, request_stop);  // early: the default actions end the process
  std::signal(SIGUSR2, request_stop);
  std::signal(SIGTERM, request_stop);
  // --- who we are, what we train, on what ---
  check_strategy_flags(o);
  const bool distributed = o.strategy != "none";
  const auto rdv =
      dist::rendezvous_from_env(dist::process_environment(), o.master_suffix, distributed);
  const ProgressReporter progress(rdv.rank);  // rank-N files; answers SIGURG (metrics/progress.h)
  const GptConfig config = o.model.resolve();
  const int64_t B = o.micro_batch;
  const int64_t T = o.seq_len.value_or(config.block_size);
  check_seq_len(T, config);
  const int64_t accum = grad_accum_steps(o.total_batch_tokens, B, T, rdv.world);
  if (o.max_steps < 0) throw UserError("--max-steps", "must not be negative", "");
  TrainData data = open_data(o, rdv, config, B, T);
  const LrSchedule schedule{o.max_lr, o.min_lr_ratio, o.warmup_steps,
                            o.decay_steps.value_or(o.max_steps)};
  const std::string resume = o.resume_mode();
  const auto resume_from = resume_candidates(o, resume, config, T, rdv.rank);
  const at::Device device = set_up_device(o.runtime, rdv.local_rank);
  // A resume fills every parameter from the checkpoint (or fails): nothing to initialise.
  const bool resuming = !resume_from.empty();
  auto strategy = dist::make_strategy(strategy_options(o, device, resuming), rdv);
  dist::ProcessGroup& ranks = strategy->group();
  const int rank = ranks.rank();

  // --- the model; the strategy attaches to it and builds the optimiser ---
  // fsdp from --seed: no rank builds the whole model; each materialises unit after unit and
  // keeps its shard (the values are the unsharded model's: GptImpl::init_parameter).
  const bool deferred = strategy->shards_parameters() && o.model.init_from.empty();
  const bool bf16 = use_bf16(o.runtime.precision, device);
  SecondsBeforeResume before_resume{seconds_since(process_start)};
  const auto model_start = Clock::now();
  Gpt model = build_model(o, config, device, bf16, deferred, resuming);
  auto params = parameters_of(*model);
  // What checkpoints record and check (before attach: fsdp frees the parameters' storage).
  const std::vector<ParamShape> layout = param_layout(*model);
  dist::Strategy::ParameterInit init;
  if (deferred) {  // a resume leaves the values to the checkpoint
    init = [&model, resuming](size_t i, at::Tensor v) {
      if (!resuming) model->init_parameter(i, v);
    };
  }
  strategy->attach(params, model->parameter_units(), init);
  if (UnitHooks* hooks = strategy->unit_hooks()) model->set_unit_hooks(hooks);  // fsdp
  before_resume.model = seconds_since(model_start);
  int64_t first_step = 0;
  if (!resume_from.empty()) {
    first_step = resume_training(resume_from, resume, o, config, B, T, layout, *strategy,
                                 *data.train, before_resume);
  }

  MetricsLog metrics;
  if (rank == 0 && !o.metrics.empty()) {
    metrics = MetricsLog(o.metrics, /*append=*/!resume_from.empty(), first_step);
  }
  const double flops_per_token = training_flops_per_token(config, T);
  const double peak = peak_flops(device, o.peak_tflops);
  print0(rank,
         fmt::format("hpctrain: model {} ({:.2f}M parameters) | B {} T {} accumulation {} "
                     "world {} ({}) | total batch {} tokens{} | device {} threads {} | "
                     "precision {}",
                     describe(config), double(parameter_count(config)) / 1e6, B, T, accum,
                     rdv.world, strategy->name(), o.total_batch_tokens,
                     o.defaults_from.empty() ? "" : " (" + o.defaults_from + ")",
                     device.str(),
                     at::get_num_threads(), bf16 ? "bf16" : "fp32"));
  if (const std::string layout = strategy->layout(); !layout.empty()) {
    print0(rank, fmt::format("{}: {}", strategy->name(), layout));
  }

  std::vector<int64_t> window;
  for (int64_t step = first_step; step < o.max_steps; ++step) {
    const bool last = step == o.max_steps - 1;
    progress_step(step);
    // --- validation and samples: they read their own data and change no training state ---
    if (data.val && o.eval_every > 0 && (step % o.eval_every == 0 || last)) {
      validate(*model, *data.val, o, step, B, T, device, ranks, metrics);
    }
    // fsdp: every rank takes part in a forward pass (the units are gathered); rank 0 prints.
    if (o.sample_every > 0 && step > 0 && (step % o.sample_every == 0 || last) &&
        (rank == 0 || strategy->shards_parameters())) {
      const std::string text =
          sample_text(*model, o.sample_tokens, o.seed + uint64_t(step), device);
      print0(rank, fmt::format("step {:5d} | sample: {}", step, text));
    }

    // --- one optimiser step: accum micro-steps of B x T tokens on every rank ---
    model->train();
    synchronize(device);
    const auto t0 = Clock::now();
    const double cpu0 = process_cpu_seconds();
    for (auto& p : params) p.mutable_grad() = at::Tensor();  // the next backward writes them
    const at::Tensor loss =
        forward_backward(*model, *strategy, *data.train, window, accum, B, T, device, bf16);
    progress_phase(Phase::collective);
    strategy->finish_gradients();  // gradients are now the mean over ranks
    if (!o.dump_grads.empty() && step == first_step && rank == 0) {
      export_gradients(o.dump_grads, *model);
    }
    const double loss_value = ranks.mean_over_ranks(loss.item<double>());
    const double lr = schedule.at(step);
    progress_phase(Phase::optimizer);
    const double norm = strategy->clip_and_step(o.grad_clip, lr);  // the norm over all shards
    synchronize(device);
    const double dt = seconds_since(t0);

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
      print0(rank, fmt::format("rank 0 holds {} bytes of parameters, {} of gradients, {} of "
                               "optimiser state ({})",
                               m.state.parameters, m.state.gradients, m.state.optimizer,
                               strategy->name()));
    }
    if (rank == 0) metrics.write_step(m);

    // --- checkpoint: after the update, so it resumes at step + 1 ---
    const bool periodic = o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0;
    const bool stop = ranks.any_rank(g_stop_requested != 0);  // all ranks agree
    fs::path saved;
    if (periodic || (last && o.checkpoint_at_end) || stop) {  // every rank writes its pieces
      const auto c0 = Clock::now();
      saved = write_checkpoint(o, step, config, B, T, layout, *strategy, *data.train);
      metrics.write_checkpoint(step, seconds_since(c0));  // only rank 0's log is open
    }
    if (stop) return stop_on_signal(step, last, saved, ranks);
  }
  ranks.barrier();
  return 0;
}

// -------------------------------------------------------------------------------------- eval

int run_eval(const EvalOptions& o) {
  if (o.init_from.empty()) {
    throw UserError("--init-from", "is required", "point it at HF GPT-2 weights");
  }
  ModelOptions mo;
  mo.init_from = o.init_from;
  const GptConfig config = mo.resolve();
  const int64_t T = o.seq_len > 0 ? o.seq_len : config.block_size;
  check_seq_len(T, config);
  if (o.batches <= 0) throw UserError("--batches", "must be positive", "");
  if (o.data.empty()) throw UserError("--data", "is required", "");
  set_threads(o.runtime);
  const at::Device device = pick_device(o.runtime.device, 0);
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
  const bool bf16 = use_bf16(o.runtime.precision, device);
  if (bf16) model->set_head_matmul_dtype(at::kBFloat16);
  const double loss = evaluate(*model, it, 1, o.batches, T, device, bf16);
  std::fputs(fmt::format("{{\"loss\": {:.9g}, \"batches\": {}, \"seq_len\": {}, \"tokens\": {}}}\n",
                         loss, o.batches, T, o.batches * T)
                 .c_str(),
             stdout);
  return 0;
}

// ------------------------------------------------------------------------------------ export

int run_export(const ExportOptions& o) {
  if (o.to.empty()) throw UserError("--to", "is required", "name the directory to write");
  set_threads(o.runtime);
  std::optional<Checkpoint> cp;
  Gpt model(nullptr);  // built from the checkpoint's config once its manifest is read
  ModelOptions mo = o.model;
  if (!o.from.empty()) {
    fs::path from = o.from;
    if (fs::is_directory(from) && fs::exists(from / "config.json")) {
      mo.init_from = from.string();  // HF weights: a round trip
    } else {
      const auto candidates = checkpoints_at(from);
      if (candidates.empty()) {
        throw UserError(
            "--from", fmt::format("no checkpoint at {}", o.from),
            "give a checkpoint (DIR/step_NNNNNNNN), a directory of them, or HF weights");
      }
      dist::SingleProcessGroup single;
      cp = load_checkpoint(
          candidates,
          [&](const Checkpoint& c) {
            torch::manual_seed(o.seed);
            model = Gpt(c.manifest.config);
            if (c.manifest.params != param_layout(*model)) {
              throw UserError((c.dir / "manifest.json").string(),
                              "its parameter names or shapes are not GPT-2's",
                              "export a checkpoint written by hpctrain train");
            }
            // Every parameter whole, from whichever ranks' files hold it; no optimiser state.
            std::vector<dist::StatePiece> pieces;
            auto params = parameters_of(*model);
            for (size_t i = 0; i < params.size(); ++i) {
              pieces.push_back({i, 0, params[i].numel(), params[i].detach().view({-1}), {}, {}});
            }
            return pieces;
          },
          single);
      if (!cp) {
        throw UserError("--from",
                        fmt::format("none of the {} checkpoint(s) at {} is whole (see the "
                                    "warnings above)",
                                    candidates.size(), o.from),
                        "");
      }
    }
  }
  const GptConfig config = cp ? cp->manifest.config : mo.resolve();
  if (!cp) {
    torch::manual_seed(o.seed);
    model = Gpt(config);
    if (!mo.init_from.empty()) load_hf_weights(mo.init_from, *model);
  }
  export_hf(o.to, *model);
  fmt::print("exported {}{} to {}\n", describe(config),
             cp ? fmt::format(" (step {}, saved by {} rank(s))", cp->manifest.next_step,
                              cp->manifest.world)
                : "",
             o.to);
  return 0;
}

}  // namespace hpc::train
