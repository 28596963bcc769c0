// Fuzz target: results.csv (launcher/campaigns/plot.h), which `hpclaunch report DIR` reads from a
// sweep folder that colleagues share and edit by hand. The input is the file's whole text.
//
// Properties, besides the sanitizers:
//   - parse_results_csv returns rows or throws a one-line UserError (property.h);
//   - compute_scaling (what report does next) runs on any rows it returns;
//   - the rows written (results_csv) read back to the same text fields and counts, and to the
//     same numbers rounded as written (tokens/s to 2 decimals, speedup and efficiency to 4);
//   - writing a file read back from a written one gives that file again. (Not the first written
//     file: its tokens_per_s_per_gpu column is derived from the unrounded tokens/s.)
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "campaigns/plot.h"
#include "property.h"

namespace {

// Whether `b` is `a` written with `decimals` decimals and read back.
bool rounded(const std::optional<double>& a, const std::optional<double>& b, int decimals) {
  if (!a || !b) return !a && !b;
  if (std::isnan(*a) || std::isnan(*b)) return std::isnan(*a) && std::isnan(*b);
  if (*a == *b) return true;
  return std::fabs(*a - *b) <= 0.5 * std::pow(10.0, -decimals) * (1 + 1e-9) + std::fabs(*a) * 1e-15;
}

bool same_fields(const hpc::ResultRow& a, const hpc::ResultRow& b) {
  return a.preset == b.preset && a.strategy == b.strategy && a.nodes == b.nodes &&
         a.gpus == b.gpus && a.job_id == b.job_id && a.state == b.state &&
         a.steps_used == b.steps_used && a.run_dir == b.run_dir && a.log == b.log &&
         a.message == b.message && rounded(a.tokens_per_s, b.tokens_per_s, 2) &&
         rounded(a.tokens_per_s_std, b.tokens_per_s_std, 2) && rounded(a.speedup, b.speedup, 4) &&
         rounded(a.efficiency, b.efficiency, 4);
}

// Parses what results_csv wrote, which must never be refused.
std::vector<hpc::ResultRow> read_written(const std::string& written) {
  std::vector<hpc::ResultRow> rows;
  auto refused = hpc::fuzz::refusal([&] { rows = hpc::parse_results_csv(written, "written"); });
  hpc::fuzz::check(!refused, "what results_csv writes is read again",
                   refused.value_or("") + " <- " + written);
  return rows;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<hpc::ResultRow> rows;
  if (hpc::fuzz::refusal([&] { rows = hpc::parse_results_csv(text, "results.csv"); })) return 0;
  hpc::compute_scaling(rows);

  const std::string written = hpc::results_csv(rows);
  const std::vector<hpc::ResultRow> back = read_written(written);
  hpc::fuzz::check(back.size() == rows.size(), "a written row reads back as one row", written);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    hpc::fuzz::check(same_fields(rows[i], back[i]), "a written row reads back the same", written);
  }
  const std::string again = hpc::results_csv(back);
  hpc::fuzz::check(hpc::results_csv(read_written(again)) == again,
                   "writing a file read back from a written one changes nothing", again);
  return 0;
}
