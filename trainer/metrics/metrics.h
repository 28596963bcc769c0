// What a training run reports: the rank-0 log line and the JSON-lines metrics file. No LibTorch.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

namespace hpc::train {

// Bytes a rank holds from step to step (activations and temporaries not counted).
struct StateBytes {
  int64_t parameters = 0;
  int64_t gradients = 0;  // .grad tensors and the strategy's gradient buffers
  int64_t optimizer = 0;  // AdamW's moments (a 1/W shard under zero1/zero2)
};

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;  // mean over the step's tokens (all ranks)
  double lr = 0;
  double grad_norm = 0;  // before clipping
  double step_ms = 0;
  double cpu_ms = 0;          // CPU time of this process during the step (all its threads)
  double tokens_per_s = 0;    // all ranks
  std::optional<double> mfu;  // model FLOP utilisation, when the device's peak is known
  int64_t memory_bytes = 0;   // CUDA: peak allocated; CPU: resident set size
  StateBytes state;           // rank 0's, after the step (every rank's is the same size)
};

// "step    12 | loss 5.123456 | lr 6.0000e-04 | norm 1.2345 | dt 123.45ms | tok/s 12345.6"
std::string format_step_line(const StepMetrics& m);

// One JSON object per line: {"step":..,"loss":..,"lr":..,"grad_norm":..,"step_ms":..,
// "tokens_per_s":..,"mfu":..|null,"memory":..,"cpu_ms":..,"param_bytes":..,"grad_bytes":..,
// "optimizer_bytes":..,"time":..}; validation lines {"step":..,"val_loss":..,"time":..};
// a checkpoint written after step S {"checkpoint":S,"save_s":..,"time":..}; a run that resumed
// {"resume_step":S,"time":..} (S: the first step it trains). "time" is the wall clock when the
// line was written, Unix seconds with microseconds: `hpclaunch report` places each line on the
// job's timeline (docs/goodput.md). Only step lines carry "tokens_per_s" and "loss".
// Each line is flushed as written so a crashed run keeps what it measured.
class MetricsLog {
 public:
  MetricsLog() = default;
  // append: keep lines of an earlier run and add a resume line naming first_step (the run
  // resumed there); otherwise start empty. Throws UserError.
  MetricsLog(const std::filesystem::path& path, bool append, int64_t first_step = 0);
  MetricsLog(MetricsLog&& o) noexcept : file_(o.file_) { o.file_ = nullptr; }
  MetricsLog& operator=(MetricsLog&& o) noexcept {
    std::swap(file_, o.file_);
    return *this;
  }
  ~MetricsLog();

  void write_step(const StepMetrics& m);
  void write_val(int64_t step, double val_loss);
  void write_checkpoint(int64_t step, double save_seconds);
  void write_resume(int64_t first_step);
  bool enabled() const { return file_ != nullptr; }

 private:
  void write_line(const std::string& line);
  std::FILE* file_ = nullptr;
};

int64_t resident_memory_bytes();
// The wall clock: Unix seconds, with microseconds.
double unix_time_seconds();
double process_cpu_seconds();

}  // namespace hpc::train
