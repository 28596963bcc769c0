// A sweep's axes beyond presets x strategies: any spec key (`shape.gpus_per_node`,
// `profile.nccl.NCCL_ALGO`), a program argument (`trainer.args.micro_batch`), the launch mode or
// a seed list, combined as a grid (every combination) or zipped (the i-th value of each axis),
// and the names of the points they make. docs/sweeps.md#axes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpc {

struct SweepAxis {
  std::string key;                  // "shape.gpus_per_node", "trainer.args.micro_batch", "seed"
  std::vector<std::string> values;  // as text; numbers as JSON writes them
};

struct SweepAxes {
  std::vector<SweepAxis> axes;
  bool zip = false;  // "combine": "zip"; default "grid"
};

// One point's values, in the order of the axes: {{"trainer.args.micro_batch", "8"}, ...}.
using AxisValues = std::vector<std::pair<std::string, std::string>>;

// Reads "axes": [{"key": K, "values": [...]}, ...] and "combine": "grid"|"zip" from a sweep file.
// `text` is the file's text, for line:column in errors. Throws UserError
// "file:L:C: axes[i].key: what; fix" for an unknown key, an empty or duplicated value list, values
// that are not strings, numbers or booleans, unequal lengths under zip.
SweepAxes read_sweep_axes(const std::string& file, const std::string& text,
                          const nlohmann::json& axes, const nlohmann::json* combine);

// Every combination (grid; the first axis varies slowest) or the zipped tuples. No axes: one
// empty combination.
std::vector<AxisValues> expand_axes(const SweepAxes& axes);

// How many combinations expand_axes makes (grid: the product of the axes' value counts; zip:
// their common length; no axes: 1), counted without building them; nullopt when the count does
// not fit 64 bits.
std::optional<std::uint64_t> axis_combination_count(const SweepAxes& axes);

// A sweep's jobs (points x repeats) may be at most this many: past it a typo, not a study (10^9
// points ended in std::bad_alloc, issue 35). docs/sweeps.md#how-big-a-sweep-may-be.
inline constexpr std::uint64_t kMaxSweepRuns = 10000;

// Counts presets x series x axis combinations x repeats with overflow-checked arithmetic before
// any point is built. Throws UserError("sweep", "N points (...) x R repeats ... over the limit
// of 10000 runs", fix) past kMaxSweepRuns or when the count overflows.
void check_sweep_size(const SweepAxes& axes, std::uint64_t presets, std::uint64_t series,
                      std::uint64_t repeats);

// A file-name-safe word for a value: letters, digits, '.', '_', '+', '-' kept; a value with any
// other character (or empty, or starting with '.') becomes those characters with the others as
// '_' and 8 hex digits of its SHA-256 appended, so two values never share a word. At most 40
// characters before the suffix.
std::string safe_value_word(const std::string& value);

// The short name of an axis in point names: the last component of its key ("micro_batch",
// "NCCL_ALGO", "seed").
std::string axis_short_name(const std::string& key);

// How a point's axis values reach its spec request.
struct AxisEffect {
  std::vector<std::string> sets;  // "key.path=value" for --set, after the sweep's own
  // Program arguments: {"--micro-batch", "8"}; each replaces an earlier one of the same flag.
  std::vector<std::pair<std::string, std::string>> args;
  std::string launch;  // a `launch` axis's value, or ""
  bool shape = false;  // some axis changes the shape (shape.*): not part of the series name
};
AxisEffect axis_effect(const AxisValues& values);

// `args` with each flag of `replace` set to its value (an earlier `--flag V` or `--flag=V`
// removed, then `--flag V` appended).
std::vector<std::string> with_program_args(
    std::vector<std::string> args, const std::vector<std::pair<std::string, std::string>>& replace);

}  // namespace hpc
