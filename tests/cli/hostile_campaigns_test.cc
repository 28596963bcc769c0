// Issue 35, part A: sweeps, tune grids and containers met by hostile input. Refusals are
// bad-input cases (bad_input.h: exit 2, one line with the fix, 20 s, the sandbox unchanged): a
// metric regex RE2 does not accept, sweeps past 10,000 runs (2^40 points, 10^9, an overflowing
// count), a sweep directory that is /, a link to /etc or someone else's folder, pyxis options
// through srun's abbreviations, enroot mount flags, reserved variable names in a tune grid and
// the profile's environment. The rest run for real and must end in bounded time: a metric regex
// against a 200 KB log line (std::regex crashed there), a dry run on a full disk (nothing left
// behind), and summary.md keeping URLs from messages as text.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "bad_input.h"
#include "harness.h"
#include "hostile_cases.h"

using namespace cli_test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// A sweep file over PRESETS x ddp with `axes` grid axes trainer.args.aN of `values` values each.
std::string axes_file(int axes, int values, const std::string& extra = "",
                      const std::string& presets = "[\"1n1g\"]") {
  std::string text = "{\"presets\": " + presets + ", \"strategies\": [\"ddp\"], " + extra +
                     "\"axes\": [";
  for (int a = 0; a < axes; ++a) {
    text += std::string(a ? ", " : "") + "{\"key\": \"trainer.args.a" + std::to_string(a) +
            "\", \"values\": [";
    for (int v = 0; v < values; ++v) text += std::string(v ? ", " : "") + std::to_string(v);
    text += "]}";
  }
  return text + "]}\n";
}

const std::vector<std::string> kDryRun = {"sweep", "--no-project", "--presets", "1n1g",
                                          "--strategy", "ddp", "--dry-run"};

std::vector<std::string> dry_run(std::vector<std::string> extra) {
  std::vector<std::string> a = kDryRun;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// render with pyxis and `options` (a JSON list) or `mounts`.
std::vector<std::string> pyxis(const std::string& key, const std::string& list) {
  return render_args({"--no-project", "--set", "container.runtime=pyxis", "--set",
                      "container.image=img.sqsh", "--set", "container." + key + "=" + list});
}

// The one line of a run that must fail with exit 2 and leave `before` as it was.
void check_refused(const Sandbox& sb, const Run& r,
                   const std::map<std::string, std::string>& before,
                   const std::vector<std::string>& expect) {
  INFO(r.describe());
  CHECK_FALSE(r.timed_out);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  REQUIRE_FALSE(r.err.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, StartsWith("hpclaunch: error: "));
  CHECK(has_fix_hint(r.err.substr(0, r.err.size() - 1)));
  for (const auto& e : expect) CHECK_THAT(r.err, Contains(e));
  CHECK(sb.snapshot() == before);
}

}  // namespace

TEST_CASE("hostile campaigns: regexes RE2 refuses, sweeps too big, reserved names, pyxis",
          "[hostile][campaigns]") {
  check_all({
      // 1. The metric regex is RE2's syntax; what it lacks is refused before anything runs.
      {"a metric regex with a backreference",
       {"sweep", "--no-project", "--presets", "1n1g", "--launch", "srun", "--local", "--out", "sw",
        "--metric-regex", "(a)\\1", "--", "true"},
       {},
       {"--metric-regex: \"(a)\\1\" is not a valid regular expression (RE2: ",
        "https://github.com/google/re2/wiki/Syntax"}},
      {"a sweep file's metric regex with a lookahead",
       {"sweep", "-f", "s.json", "--no-project", "--local", "--out", "sw", "--", "true"},
       {{"work/s.json",
         R"j({"presets": "1n1g", "launch": "srun", "metric": {"regex": "tps (?=1)"}})j"}},
       {"s.json: metric.regex: \"tps (?=1)\" is not a valid regular expression (RE2: ",
        "no backreferences or lookaround"}},
      // 2. Sweeps are counted before they are built: the count in the line, exit 2.
      {"40 axes of 2 values (2^40 points)",
       {"sweep", "-f", "s.json", "--no-project", "--dry-run", "--out", "sw"},
       {{"work/s.json", axes_file(40, 2)}},
       {"sweep: 1099511627776 points (1 preset x 1 series x 1099511627776 axis combinations)",
        "over the limit of 10000 runs", "pass fewer presets, axis values or --repeats"}},
      {"10^6 points (2 axes of 1000 values)",
       {"sweep", "-f", "s.json", "--no-project", "--dry-run", "--out", "sw"},
       {{"work/s.json", axes_file(2, 1000)}},
       {"sweep: 1000000 points", "= 1000000 runs, over the limit of 10000 runs"}},
      {"10^9 points (3 axes of 1000 values)",
       {"sweep", "-f", "s.json", "--no-project", "--dry-run", "--out", "sw"},
       {{"work/s.json", axes_file(3, 1000)}},
       {"sweep: 1000000000 points", "over the limit of 10000 runs"}},
      {"2^63 points x 2 repeats: the count overflows 64 bits",
       {"sweep", "-f", "s.json", "--no-project", "--out", "sw", "--local"},
       {{"work/s.json", axes_file(63, 2, "\"repeats\": 2, ")}},
       {"sweep: 9223372036854775808 points", "x 2 repeats, over the limit of 10000 runs"}},
      {"2^64 points: more than a 64-bit count",
       {"sweep", "-f", "s.json", "--no-project", "--dry-run", "--out", "sw"},
       {{"work/s.json", axes_file(64, 2)}},
       {"sweep: more than 18446744073709551615 points"}},
      {"200 points x 100 repeats",
       {"sweep", "-f", "s.json", "--no-project", "--dry-run", "--out", "sw", "--repeats", "100"},
       {{"work/s.json", axes_file(2, 10, "", "[\"1n1g\", \"1n2g\"]")}},
       {"200 points (2 presets x 1 series x 100 axis combinations) x 100 repeats = 20000 runs"}},
      {"--repeats 10^9", dry_run({"--repeats", "1000000000"}), {}, {"--repeats", "over the limit"}},
      {"--warmup-steps -1", dry_run({"--warmup-steps", "-1"}), {}, {"--warmup-steps", "negative"}},
      {"a sweep file's warmup_steps -1",
       {"sweep", "-f", "s.json", "--no-project", "--dry-run", "--out", "sw"},
       {{"work/s.json", R"({"presets": "1n1g", "strategies": "ddp", "warmup_steps": -1})"}},
       {"s.json: warmup_steps: -1 is negative", "write 0 or more"}},
      // 3. The sweep directory: new or a sweep's own.
      {"sweep --dry-run --out /", dry_run({"--out", "/"}), {},
       {"--out: /: is a system directory (/)", "choose a new directory"}},
      {"sweep --out / (not a dry run)",
       {"sweep", "--no-project", "--presets", "1n1g", "--strategy", "ddp", "--local", "--out", "/"},
       {},
       {"--out: /: is a system directory"}},
      {"sweep --dry-run --out /etc", dry_run({"--out", "/etc"}), {}, {"is a system directory"}},
      {"sweep --dry-run --out a link to /etc",
       dry_run({"--out", "etc"}),
       {{"work/etc", "<link>/etc"}},
       {"--out: etc: is a symbolic link", "choose a new directory"}},
      {"sweep --dry-run --out a link to a directory of one's own",
       dry_run({"--out", "sw"}),
       {{"work/mine", "<dir>"}, {"work/sw", "<link>mine"}},
       {"--out: sw: is a symbolic link"}},
      {"sweep --dry-run --out through a linked parent into /etc",
       dry_run({"--out", "etc/sw"}),
       {{"work/etc", "<link>/etc"}},
       {"--out: etc/sw: is a system directory (/etc/sw)"}},
      {"sweep --dry-run --out a folder of other files",
       dry_run({"--out", "notes"}),
       {{"work/notes/todo.txt", "mine\n"}},
       {"--out: notes: holds other files and is not a sweep's directory"}},
      {"sweep --dry-run --out a file", dry_run({"--out", "f"}), {{"work/f", "x"}},
       {"--out: f: is not a directory"}},
      // 4. Pyxis's options as srun's getopt_long reads them.
      {"pyxis: --container-imag= (a prefix of --container-image)",
       pyxis("options", R"(["--container-imag=evil"])"),
       {},
       {"container.options:", "--container-imag (srun reads it as --container-image) is rendered "
                              "from container.image", "set container.image instead"}},
      {"pyxis: --container-work= (a prefix of --container-workdir)",
       pyxis("options", R"(["--container-work=/etc"])"),
       {},
       {"--container-work (srun reads it as --container-workdir) is rendered from "
        "container.workdir"}},
      {"pyxis: --container-mo as its own word, the value next",
       pyxis("options", R"(["--container-mo", "/:/host"])"),
       {},
       {"--container-mo is ambiguous for srun (--container-mount-home, --container-mounts)",
        "write the option's full name"}},
      {"pyxis: --container-mounts spelt out", pyxis("options", R"(["--container-mounts=/:/h"])"),
       {},
       {"--container-mounts is rendered from container.mounts"}},
      {"pyxis: srun's own --container (an OCI bundle)",
       pyxis("options", R"(["--container=/bundle"])"),
       {},
       {"--container is rendered from container.image"}},
      {"pyxis: an unknown flag in a mount",
       pyxis("mounts", R"(["/data:/data:ro+bogus"])"),
       {},
       {"container.mounts:", "\"bogus\" is not an enroot mount flag", "ro+rprivate"}},
      {"pyxis: x-detach in a mount (unmounts instead)",
       pyxis("mounts", R"(["/data:/data:x-detach"])"),
       {},
       {"\"x-detach\" is not an enroot mount flag"}},
      // 5. One rule for variable names: tune grids, profile.env, --env-pass.
      {"tune grid setting PATH",
       {"tune", "--preset", "1n2g", "--local", "--grid", "grid.json"},
       {{"work/grid.json", R"({"variables": {"PATH": ["/tmp/evil"]}})"}},
       {"grid.json: variables.PATH: PATH is built in the job", "remove it from the grid"}},
      {"tune grid setting SLURM_JOB_ID in a candidate",
       {"tune", "--preset", "1n2g", "--local", "--grid", "grid.json"},
       {{"work/grid.json", R"({"candidates": [{"NCCL_ALGO": "Ring", "SLURM_JOB_ID": "1"}]})"}},
       {"grid.json: candidates[0].SLURM_JOB_ID: SLURM_JOB_ID is set by Slurm"}},
      {"tune grid setting HPCLAUNCH_RUN_DIR",
       {"tune", "--preset", "1n2g", "--local", "--grid", "grid.json"},
       {{"work/grid.json", R"({"variables": {"HPCLAUNCH_RUN_DIR": ["/tmp"]}})"}},
       {"HPCLAUNCH_RUN_DIR is hpclaunch's own"}},
      {"profile.env.PATH",
       render_args({"--no-project", "--set", "profile.env.PATH.value=/tmp/evil", "--set",
                    "profile.env.PATH.reason=x"}),
       {},
       {"profile.env.PATH", "PATH is built in the job", "remove it from profile.env"}},
      {"profile.env.SLURM_JOB_ID",
       render_args({"--no-project", "--set", "profile.env.SLURM_JOB_ID.value=1", "--set",
                    "profile.env.SLURM_JOB_ID.reason=x"}),
       {},
       {"profile.env.SLURM_JOB_ID", "SLURM_JOB_ID is set by Slurm"}},
      {"profile.nccl.HPCLAUNCH_X",
       render_args({"--no-project", "--set", "profile.nccl.HPCLAUNCH_X.value=1", "--set",
                    "profile.nccl.HPCLAUNCH_X.reason=x"}),
       {},
       {"profile.nccl.HPCLAUNCH_X", "HPCLAUNCH_X is hpclaunch's own"}},
      {"--env-pass PATH", render_args({"--no-project", "--env-pass", "PATH"}), {},
       {"job.env_from_submit", "PATH is built in the job", "your own variables"}},
  });
}

TEST_CASE("hostile campaigns: a metric regex against a 200 KB log line ends, measured",
          "[hostile][campaigns][regex]") {
  Sandbox sb;
  // Rank 0 prints a 200 KB line ending in the figure, and a 30-character line for (a+)+$.
  sb.write("work/prog.sh",
           "#!/bin/bash\n[[ \"${RANK:-0}\" == 0 ]] || exit 0\n"
           "head -c 200000 /dev/zero | tr '\\0' a\nprintf ' tps 42\\n'\n"
           "printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaab\\n'\n");
  fs::permissions(sb.work() / "prog.sh", fs::perms::owner_all);
  struct Case {
    std::string regex;
    int status;  // 0: measured; 1: nothing to measure (the point's row says why)
  };
  int n = 0;
  for (const Case& c : {Case{".*tps ([0-9]+)", 0}, Case{"(a|b)*x", 1}, Case{"(a+)+$", 1}}) {
    DYNAMIC_SECTION(c.regex) {
      const std::string out = "sw" + std::to_string(n++);
      Run r = spawn({hpclaunch_binary(), "sweep", "--no-project", "--presets", "1n1g", "--launch",
                     "srun", "--local", "--poll", "0.2", "--metric-regex", c.regex, "--out", out,
                     "--", "./prog.sh"},
                    sb.work(), sb.env(), std::chrono::seconds(20));
      INFO(r.describe());
      CHECK_FALSE(r.timed_out);
      CHECK(r.signal == 0);  // was SIGSEGV: std::regex's recursion
      CHECK(r.status == c.status);
      const std::string csv = read_file(sb.work() / out / "results.csv");
      // Measured, or a row saying why not (no line matched, or what matched is no number).
      CHECK_THAT(csv, Contains(c.status == 0 ? "COMPLETED,42.00," : "COMPLETED,,"));
    }
  }
}

TEST_CASE("hostile campaigns: a dry run on a full disk leaves nothing behind",
          "[hostile][campaigns][outputs]") {
  Sandbox sb;
  const auto before = sb.snapshot();
  // A file-size limit of 1 KiB, its signal ignored: the first script's write fails (EFBIG), as
  // on a full disk.
  Run r = spawn({"/bin/bash", "-c", "trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"",
                 hpclaunch_binary(), "sweep", "--no-project", "--presets", "1n1g,1n2g",
                 "--strategy", "ddp", "--dry-run", "--out", "sw"},
                sb.work(), sb.env(), std::chrono::seconds(20));
  check_refused(sb, r, before, {"sw/.scripts.tmp/", "cannot write", "check the disk space"});
  CHECK_FALSE(fs::exists(sb.work() / "sw"));

  // An existing sweep directory keeps what it had, and gets no staging folder.
  fs::create_directories(sb.work() / "old" / "scripts");
  sb.write("work/old/scripts/a.sbatch", "#!/bin/bash\n");
  const auto with_old = sb.snapshot();
  r = spawn({"/bin/bash", "-c", "trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"",
             hpclaunch_binary(), "sweep", "--no-project", "--presets", "1n1g", "--strategy", "ddp",
             "--dry-run", "--out", "old"},
            sb.work(), sb.env(), std::chrono::seconds(20));
  check_refused(sb, r, with_old, {"old/.scripts.tmp/", "cannot write"});
}

TEST_CASE("hostile campaigns: summary.md keeps URLs from messages as text",
          "[hostile][campaigns][summary]") {
  Sandbox sb;
  sb.write("work/sw/results.csv",
           results_file({"1n1g,ddp,1,1,7,COMPLETED,100,,",
                         "1n2g,ddp,1,2,8,FAILED,,see https://evil.example/x or "
                         "www.evil.example or mail ada@evil.example,runs/x.out"}));
  Run r = sb.hpclaunch({"report", "sw"});
  INFO(r.describe());
  CHECK_FALSE(r.timed_out);
  if (!find_program("gnuplot").empty()) CHECK(r.status == 0);
  const std::string md = read_file(sb.work() / "sw/summary.md");
  CHECK_THAT(md, Contains("see https\\://evil.example/x"));
  CHECK_THAT(md, Contains("www\\.evil.example"));
  CHECK_THAT(md, Contains("ada\\@evil.example"));
  CHECK(md.find("https://") == std::string::npos);
  CHECK(md.find(" www.") == std::string::npos);
}
