#include "metrics/metrics.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "error.h"

namespace hpc::train {

std::string format_step_line(const StepMetrics& m) {
  return fmt::format(
      "step {:5d} | loss {:.6f} | lr {:.4e} | norm {:.4f} | dt {:.2f}ms | tok/s {:.1f}", m.step,
      m.loss, m.lr, m.grad_norm, m.step_ms, m.tokens_per_s);
}

MetricsLog::MetricsLog(const std::filesystem::path& path, bool append, int64_t first_step) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) {
    throw UserError(path.string(), fmt::format("cannot write metrics: {}", std::strerror(errno)),
                    "check --metrics");
  }
  if (append) write_resume(first_step);
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

namespace {
// The line of `j` with the wall-clock time it was written (seconds since the epoch), last.
std::string timed(nlohmann::ordered_json j) {
  j["time"] = unix_time_seconds();
  return j.dump();
}
}  // namespace

void MetricsLog::write_line(const std::string& line) {
  if (!file_) return;
  std::fputs(line.c_str(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);
}

void MetricsLog::write_step(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["grad_norm"] = m.grad_norm;
  j["step_ms"] = m.step_ms;
  j["tokens_per_s"] = m.tokens_per_s;
  j["mfu"] = m.mfu ? nlohmann::ordered_json(*m.mfu) : nlohmann::ordered_json(nullptr);
  j["memory"] = m.memory_bytes;
  j["cpu_ms"] = m.cpu_ms;
  j["param_bytes"] = m.state.parameters;
  j["grad_bytes"] = m.state.gradients;
  j["optimizer_bytes"] = m.state.optimizer;
  write_line(timed(std::move(j)));
}

void MetricsLog::write_val(int64_t step, double val_loss) {
  nlohmann::ordered_json j;
  j["step"] = step;
  j["val_loss"] = val_loss;
  write_line(timed(std::move(j)));
}

void MetricsLog::write_checkpoint(int64_t step, double save_seconds) {
  nlohmann::ordered_json j;
  j["checkpoint"] = step;
  j["save_s"] = save_seconds;
  write_line(timed(std::move(j)));
}

void MetricsLog::write_resume(int64_t first_step) {
  nlohmann::ordered_json j;
  j["resume_step"] = first_step;
  write_line(timed(std::move(j)));
}

double unix_time_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return double(ts.tv_sec) + 1e-6 * double(ts.tv_nsec / 1000);
}

double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int64_t resident_memory_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * int64_t(::sysconf(_SC_PAGESIZE));
}

}  // namespace hpc::train
