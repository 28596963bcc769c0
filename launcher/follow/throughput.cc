#include "follow/throughput.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace hpc {

using json = nlohmann::json;

std::vector<double> tokens_per_s_from_metrics(const std::string& jsonl) {
  std::map<long, double> by_step;
  size_t start = 0;
  int line = 0;
  while (start < jsonl.size()) {
    size_t end = jsonl.find('\n', start);
    if (end == std::string::npos) end = jsonl.size();
    std::string text = jsonl.substr(start, end - start);
    start = end + 1;
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      // A last line cut short by a job that was killed mid-write is not an error.
      if (start >= jsonl.size()) break;
      throw std::runtime_error("line " + std::to_string(line) + " is not a JSON object");
    }
    if (!j.contains("tokens_per_s") || !j["tokens_per_s"].is_number()) continue;
    long step = j.contains("step") && j["step"].is_number_integer()
                    ? j["step"].get<long>()
                    : static_cast<long>(by_step.size());
    by_step[step] = j["tokens_per_s"].get<double>();
  }
  std::vector<double> out;
  for (const auto& [step, v] : by_step) out.push_back(v);
  return out;
}

std::optional<Throughput> steady_state(const std::vector<double>& v, int warmup) {
  if (v.empty()) return std::nullopt;
  int n = static_cast<int>(v.size());
  int skip = warmup >= 0 ? warmup : std::max(3, static_cast<int>(std::ceil(0.2 * n)));
  skip = std::min(skip, n - 1);
  Throughput t;
  t.steps_total = n;
  t.warmup = skip;
  t.steps_used = n - skip;
  double sum = 0;
  for (int i = skip; i < n; ++i) sum += v[i];
  t.mean = sum / t.steps_used;
  if (t.steps_used > 1) {
    double sq = 0;
    for (int i = skip; i < n; ++i) sq += (v[i] - t.mean) * (v[i] - t.mean);
    t.std = std::sqrt(sq / (t.steps_used - 1));
  }
  return t;
}

}  // namespace hpc
