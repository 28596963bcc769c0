// Hostile values in a run's record (docs/records.md): the batch script's run-record block writes
// JSON from values a user chose (container.image, trainer.program) and from the job's
// environment; they come back as the same text through the reader `hpclaunch diff` uses, and no
// command in them runs. `rerun` and `diff` given a hostile run name answer with one line, exit 2.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "follow/run_diff.h"
#include "hostile_cases.h"
#include "shell.h"
#include "slurm_stubs.h"
#include "text.h"

using namespace cli_test;
using Catch::Matchers::Contains;

namespace {

// What the record keeps of a value: printable ASCII, tabs and newlines; the shell's command
// substitution drops trailing newlines, and the reader trims.
std::string as_recorded(const std::string& value) {
  std::string kept;
  for (unsigned char c : value)
    if (c == '\t' || c == '\n' || (c >= 0x20 && c < 0x7f)) kept += char(c);
  return hpc::trim(kept);
}

}  // namespace

TEST_CASE("hostile values reach the run record as text, and nothing in them runs",
          "[hostile][records]") {
  for (const auto& h : hostile_values("")) {
    // container.image refuses control characters and a leading '-' (an option look-alike).
    if (hpc::has_control_chars(h.value) || h.value[0] == '-') continue;
    DYNAMIC_SECTION(h.label) {
      Sandbox sb;
      install_slurm_stubs(sb);
      Run r = sb.hpclaunch({"render", "--no-project", "--preset", "1n2g", "-o", "job.sbatch",
                            "--set", "container.runtime=apptainer", "--container", h.value, "--set",
                            "trainer.program=" + h.value});
      INFO(r.describe());
      REQUIRE(r.status == 0);
      fs::create_directories(sb.work() / "CANARY_DIR");
      const std::string prefix = (sb.root() / "runs" / "r-").string();
      Run job = run_job_script(sb, (sb.work() / "job.sbatch").string(),
                               {"HPCLAUNCH_RUN_DIR_PREFIX=" + prefix, "SLURM_RESTART_COUNT=0"});
      INFO("job script: " << job.describe());
      CHECK(job.status == 0);
      CHECK(canaries(sb).empty());
      const fs::path file = sb.root() / "runs" / "r-4242" / "record" / "restart-0.json";
      REQUIRE(fs::exists(file));
      hpc::RestartRecord record = hpc::parse_restart_record(read_file(file), file.string());
      CHECK(record.problem.empty());
      CHECK(record.restart == 0);
      CHECK(record.nodelist == "node[01-02]");
      CHECK(record.versions["container_image"] == as_recorded(h.value));
      CHECK_FALSE(fs::exists(file.string() + ".tmp"));
    }
  }
}

TEST_CASE("rerun and diff of a hostile run name: one line, exit 2, nothing written",
          "[hostile][records]") {
  for (const auto& h : hostile_values("")) {
    DYNAMIC_SECTION(h.label) {
      Sandbox sb;
      const auto before = sb.snapshot();
      for (const std::vector<std::string>& args :
           {std::vector<std::string>{"rerun", h.value}, {"diff", h.value, "12"}}) {
        Run r = sb.hpclaunch(args);
        INFO(r.describe());
        CHECK(r.status == 2);
        CHECK(r.err.find('\n') == r.err.size() - 1);
        if (h.value[0] != '-') CHECK_THAT(r.err, Contains("hpclaunch list"));
      }
      CHECK(sb.snapshot() == before);
      CHECK(canaries(sb).empty());
    }
  }
}

TEST_CASE("list shows a run directory's names and fields as printable text, one line each",
          "[hostile][records]") {
  Sandbox sb;
  // A damaged or shared runs folder: an escape sequence in run.json's preset, a terminal title
  // sequence and a newline in the directory's name.
  const fs::path runs = sb.work() / "runs";
  const std::string odd_dir = "esc\x1b]0;pwn\x07-601";
  const std::string nl_dir = "two\nlines-602";
  for (const auto& [dir, id] : {std::pair{odd_dir, "601"}, std::pair{nl_dir, "602"}}) {
    fs::create_directories(runs / dir);
    write_file(runs / dir / "run.json",
               std::string(R"({"job_id": ")") + id +
                   R"(", "backend": "slurm", "preset": "\u001b[5m", "strategy": "ddp",
                   "submitted_at": "2026-11-27T00:00:00Z", "world_size": 2})");
    write_file(runs / dir / "final_state", "COMPLETED\n");
  }
  Run r = sb.hpclaunch({"list"});
  INFO(r.describe());
  REQUIRE(r.status == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x07') == std::string::npos);
  // The header and one line per run: the newline in a name is shown as \n.
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 3);
  CHECK_THAT(r.out, Contains("two\\nlines-602"));
  CHECK_THAT(r.out, Contains("\\x1b[5m"));
  CHECK_THAT(r.out, Contains(" COMPLETED "));
}
