// The throughput of one run from its metrics: tokens/s of each step (the trainer's metrics.jsonl)
// and the steady state after the warm-up. What `report`, `diff`, sweeps and tunes measure with.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hpc {

// Steady-state throughput of one run.
struct Throughput {
  double mean = 0, std = 0;  // sample standard deviation (n - 1); 0 for one step
  int steps_used = 0, steps_total = 0, warmup = 0;
};

// tokens/s of each training step from a metrics.jsonl (trainer/metrics/metrics.h: one JSON object a
// line; lines without tokens_per_s, such as {"step", "val_loss"}, are skipped; a resumed run's
// repeated steps keep the last value). Throws std::runtime_error naming the line on bad JSON.
std::vector<double> tokens_per_s_from_metrics(const std::string& jsonl);

// Warm-up steps to drop: `warmup` when >= 0, else the larger of 3 and 20% of the steps.
// At least one step is always kept. Returns nullopt for no steps.
std::optional<Throughput> steady_state(const std::vector<double>& tokens_per_s, int warmup = -1);

}  // namespace hpc
