// Hostile outputs (docs/security.md, "Outputs"): what is at an output path decides how it is
// written. Regular files and new paths are replaced by rename; character devices and the
// standard streams are written through; a FIFO, socket, block device, directory or symbolic
// link is refused with exit 2 and nothing written (the link and what it points at untouched).
// A standard output that is full or closed is exit 74 with one line. Flags that would silently
// change what runs (an empty value, --steps 0, impossible tune sizes) are refused.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "hostile_cases.h"

using namespace cli_test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

std::vector<std::string> render_to(const std::string& out, const std::string& spec = "spec.json") {
  return {"render", "--preset", "1n2g", "--strategy", "ddp", "-o", out, "--spec-out", spec};
}

const std::string kGoodResults =
    results_file({"1n1g,ddp,1,1,1,COMPLETED,100,,", "1n2g,ddp,1,2,2,COMPLETED,180,,"});

Prepare fifo_at(const std::string& rel) {
  return [rel](const Sandbox& sb) { make_fifo(sb, rel); };
}
Prepare link_to(const std::string& rel, const std::string& target) {
  return [rel, target](const Sandbox& sb) { make_link(sb, rel, target); };
}

struct DeviceNode {
  dev_t rdev = 0;
  bool is_char = false;
};
DeviceNode device_at(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return {};
  return {st.st_rdev, S_ISCHR(st.st_mode)};
}

// One line on stderr, starting as every error does.
void check_one_error_line(const Run& r) {
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK_THAT(r.err, StartsWith("hpclaunch: error: "));
}

}  // namespace

TEST_CASE("hostile outputs: render -o and --spec-out onto what is not a regular file",
          "[hostile][outputs]") {
  const std::string kRefused = "write to a regular file or a new path";
  const std::string kLink = "neither replaces a link nor writes through it";
  check_all_prepared({
      {{"-o onto a FIFO", render_to("fifo"), {}, {"fifo", "named pipe (FIFO)", kRefused}},
       fifo_at("work/fifo")},
      {{"--spec-out onto a FIFO", render_to("out.sbatch", "fifo"), {}, {"fifo", "named pipe"}},
       fifo_at("work/fifo")},
      {{"-o onto a link to a file",
        render_to("link"),
        {{"work/target", "mine\n"}},
        {"link: is a symbolic link (to target)", kLink, "give the path of its target"}},
       link_to("work/link", "target")},
      {{"--spec-out onto a link to a file",
        render_to("out.sbatch", "link"),
        {{"work/target", "mine\n"}},
        {"link", kLink}},
       link_to("work/link", "target")},
      {{"-o onto a dangling link", render_to("link"), {}, {"link", "(to nowhere)", kLink}},
       link_to("work/link", "nowhere")},
      {{"-o onto a link to a directory", render_to("link"), {{"work/d", "<dir>"}}, {"link", kLink}},
       link_to("work/link", "d")},
      {{"-o onto a link loop", render_to("loop"), {}, {"loop", kLink}},
       link_to("work/loop", "loop")},
      {{"-o onto a link to /dev/null", render_to("null"), {}, {"null", "(to /dev/null)", kLink}},
       link_to("work/null", "/dev/null")},
      {{"-o onto a link outside the sandbox's work dir",
        render_to("bashrc"),
        {{"home/.bashrc", "alias ls=ls\n"}},
        {"bashrc", kLink}},
       link_to("work/bashrc", "../home/.bashrc")},
      {{"-o onto a socket", render_to("sock"), {}, {"sock", "is a socket", kRefused}},
       [](const Sandbox& sb) { make_socket(sb, "work/sock"); }},
      {{"--spec-out onto a directory",
        render_to("out.sbatch", "d"),
        {{"work/d", "<dir>"}},
        {"d: is a directory", "give a file name"}},
       {}},
      {{"-o /dev/stdin (a link to descriptor 0)",
        render_to("/dev/stdin"),
        {},
        {"/dev/stdin", kLink}},
       {}},
      {{"-o and --spec-out naming one file",
        render_to("same", "./same"),
        {},
        {"--spec-out", "names the same file as -o", "give the spec its own path"}},
       {}},
      {{"-o FIFO leaves a fine --spec-out unwritten",
        render_to("fifo", "fine.json"),
        {},
        {"fifo", "named pipe"}},
       fifo_at("work/fifo")},
  });
}

TEST_CASE("hostile outputs: a block device is refused, a character device written through",
          "[hostile][outputs]") {
  Sandbox probe;
  if (!make_device(probe, "probe", false)) {
    WARN("mknod is not allowed here (needs root and CAP_MKNOD): device nodes not tested");
    return;
  }
  check_all_prepared({
      {{"-o onto a block device", render_to("blk"), {}, {"blk", "is a block device"}},
       [](const Sandbox& sb) { REQUIRE(make_device(sb, "work/blk", true)); }},
      {{"--spec-out onto a block device",
        render_to("out.sbatch", "blk"),
        {},
        {"blk", "is a block device"}},
       [](const Sandbox& sb) { REQUIRE(make_device(sb, "work/blk", true)); }},
  });
  Sandbox sb;
  REQUIRE(make_device(sb, "work/null", false));
  Run r = sb.hpclaunch(render_to("null"));
  INFO(r.describe());
  CHECK(r.status == 0);
  DeviceNode after = device_at((sb.work() / "null").string());
  CHECK(after.is_char);  // still the device node, not a file renamed over it
  CHECK(fs::is_regular_file(sb.work() / "spec.json"));
}

TEST_CASE("hostile outputs: /dev/null and the standard streams are written through",
          "[hostile][outputs]") {
  const DeviceNode null_before = device_at("/dev/null");
  REQUIRE(null_before.is_char);
  Sandbox sb;
  Run plain = sb.hpclaunch({"render", "--preset", "1n2g", "--strategy", "ddp"});
  REQUIRE(plain.status == 0);
  const std::string script_tail = plain.out.substr(plain.out.find("# Job:"));
  SECTION("/dev/null, as root too: still the system's character device") {
    Run r = sb.hpclaunch(render_to("/dev/null", "/dev/null"));  // both: a device twice is fine
    INFO(r.describe());
    CHECK(r.status == 0);
    DeviceNode after = device_at("/dev/null");
    CHECK(after.is_char);
    CHECK(after.rdev == null_before.rdev);
  }
  for (const char* stream : {"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"}) {
    DYNAMIC_SECTION("-o " << stream << ": the script on standard output") {
      Run r = sb.hpclaunch(render_to(stream));
      INFO(r.describe());
      CHECK(r.status == 0);
      CHECK_THAT(r.out, StartsWith("#!/bin/bash") && Contains(script_tail));
      CHECK(fs::is_regular_file(sb.work() / "spec.json"));
    }
  }
  SECTION("-o /dev/stderr: the script on standard error") {
    Run r = sb.hpclaunch(render_to("/dev/stderr"));
    CHECK(r.status == 0);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Contains(script_tail));
  }
  SECTION("--spec-out /dev/stdout: the spec on standard output, the script in a file") {
    Run r = sb.hpclaunch(render_to("out.sbatch", "/dev/stdout"));
    CHECK(r.status == 0);
    CHECK_THAT(r.out, StartsWith("{"));
    CHECK(fs::is_regular_file(sb.work() / "out.sbatch"));
  }
  SECTION("a regular file is replaced whole, an executable script") {
    sb.write("work/out.sbatch", "old\n");
    Run r = sb.hpclaunch(render_to("out.sbatch"));
    CHECK(r.status == 0);
    CHECK_THAT(read_file(sb.work() / "out.sbatch"), Contains(script_tail));
    CHECK((fs::status(sb.work() / "out.sbatch").permissions() & fs::perms::owner_exec) !=
          fs::perms::none);
  }
  CHECK(device_at("/dev/null").is_char);
}

TEST_CASE("hostile outputs: a full or closed standard output is exit 74 with one line",
          "[hostile][outputs][stdout]") {
  struct Case {
    std::vector<std::string> args;
    std::string names;  // what the line names: standard output, or the path written through
  };
  const std::vector<Case> cases = {
      {{"render", "--preset", "1n2g", "--strategy", "ddp"}, "standard output"},
      {{"render", "--preset", "1n2g", "--strategy", "ddp", "-o", "/dev/stdout"}, "/dev/stdout"},
      {{"presets", "list"}, "standard output"},
      {{"clusters", "show", "jsc"}, "standard output"},
      {{"hostlist", "expand", "node[1-3]"}, "standard output"},
      {{"--help"}, "standard output"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION("closed pipe: " << c.args[0] << " " << c.args.back()) {
      Sandbox sb;
      int p[2];
      REQUIRE(pipe(p) == 0);
      close(p[0]);  // the reader is gone before hpclaunch writes
      Run r = hpclaunch_with_stdout(sb, c.args, p[1]);
      close(p[1]);
      INFO(r.describe());
      CHECK_FALSE(r.timed_out);
      CHECK(r.status == 74);
      check_one_error_line(r);
      CHECK_THAT(r.err, Contains(c.names) && Contains("Broken pipe"));
    }
    DYNAMIC_SECTION("/dev/full: " << c.args[0] << " " << c.args.back()) {
      Sandbox sb;
      int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
      REQUIRE(full >= 0);
      Run r = hpclaunch_with_stdout(sb, c.args, full);
      close(full);
      INFO(r.describe());
      CHECK(r.status == 74);
      check_one_error_line(r);
      CHECK_THAT(r.err, Contains(c.names) && Contains("No space left on device"));
    }
  }
  SECTION("-o /dev/full: written through, and the failure is 74") {
    Sandbox sb;
    Run r = sb.hpclaunch(render_to("/dev/full"));
    INFO(r.describe());
    CHECK(r.status == 74);
    check_one_error_line(r);
    CHECK_THAT(r.err, Contains("/dev/full: cannot write (No space left on device)"));
  }
}

TEST_CASE("hostile flags: values that would silently change what runs are refused",
          "[hostile][flags]") {
  const std::string kEmpty = "an empty value; give one, or leave the flag out";
  auto empty = [&](const std::string& name, std::vector<std::string> args,
                   const std::string& flag) {
    return BadCase{name, std::move(args), {}, {flag + ": " + kEmpty}};
  };
  auto tune = [](std::vector<std::string> extra) {
    std::vector<std::string> a = {"tune", "--preset", "1n2g", "--local"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  check_all({
      empty("submit --host '' (was: the local Slurm)", {"submit", "--preset", "1n1g", "--host", ""},
            "--host"),
      empty("run --host ''", {"run", "--preset", "1n1g", "--host", ""}, "--host"),
      empty("render -o '' (was: standard output)", {"render", "--preset", "1n2g", "-o", ""},
            "--output"),
      empty("render --spec-out ''", {"render", "--preset", "1n2g", "--spec-out", ""}, "--spec-out"),
      empty("render --strategy '' (was: the default)",
            {"render", "--preset", "1n2g", "--strategy", ""}, "--strategy"),
      empty("render --cluster ''", {"render", "--preset", "1n2g", "--cluster", ""}, "--cluster"),
      empty("render --template ''", {"render", "--preset", "1n2g", "--template", ""}, "--template"),
      empty("render --project ''", {"render", "--preset", "1n2g", "--project", ""}, "--project"),
      empty("render --set ''", {"render", "--preset", "1n2g", "--set", ""}, "--set"),
      empty("status --runs-dir ''", {"status", "7", "--runs-dir", ""}, "--runs-dir"),
      empty("logs --rank ''", {"logs", "7", "--rank", ""}, "--rank"),
      empty("submit --remote-runs-dir ''",
            {"submit", "--preset", "1n1g", "--host", "x", "--remote-runs-dir", ""},
            "--remote-runs-dir"),
      empty("sweep --out ''", {"sweep", "--presets", "1n1g", "--strategy", "ddp", "--out", ""},
            "--out"),
      {"sweep --steps 0 (was: no step limit)",
       {"sweep", "--presets", "1n1g", "--strategy", "ddp", "--local", "--steps", "0"},
       {},
       {"--steps: must be at least 1", "leave it out to keep the trainer's own --max-steps"}},
      {"sweep --steps -1",
       {"sweep", "--presets", "1n1g", "--strategy", "ddp", "--local", "--steps", "-1"},
       {},
       {"--steps: must be at least 1"}},
      {"sweep file with \"steps\": 0",
       {"sweep", "-f", "sweep.json", "--local"},
       {{"work/sweep.json", "{\"presets\": [\"1n1g\"], \"strategies\": [\"ddp\"], \"steps\": 0}"}},
       {"sweep.json: steps", "must be at least 1", "remove \"steps\""}},
      {"tune --min 1G --max 1M (was: 8 jobs that fail)",
       tune({"--min", "1G", "--max", "1M"}),
       {},
       {"--min: 1G (1073741824 bytes) is more than --max 1M (1048576 bytes)", "swap them"}},
      {"tune --min 0", tune({"--min", "0"}), {}, {"--min: '0' is zero", "give bytes like"}},
      {"tune --max 0K", tune({"--max", "0K"}), {}, {"--max: '0K' is zero"}},
      {"tune --max 2048G (over 1T)", tune({"--max", "2048G"}), {}, {"--max", "larger than 1T"}},
      {"tune --min 1X", tune({"--min", "1X"}), {}, {"--min", "unknown unit"}},
      {"tune --max 2^64+", tune({"--max", "99999999999999999999999"}), {}, {"--max", "too large"}},
      {"tune --min +1K", tune({"--min", "+1K"}), {}, {"--min: '+1K' is not a size"}},
      {"tune --min ' 1K'", tune({"--min", " 1K"}), {}, {"--min: ' 1K' is not a size"}},
      {"tune --max 1.5M", tune({"--max", "1.5M"}), {}, {"--max", "unknown unit"}},
  });
}

TEST_CASE("hostile outputs: report, sweep and tune write only into what they may replace",
          "[hostile][outputs][report]") {
  const std::string kLink = "neither replaces a link nor writes through it";
  // `hpclaunch report sw` over a good results.csv, with `more` files and `prepare` first.
  auto report = [](const std::string& name, std::vector<std::pair<std::string, std::string>> more,
                   std::vector<std::string> expect, Prepare prepare) {
    more.emplace_back("work/sw/results.csv", kGoodResults);
    return PreparedCase{{name, {"report", "sw"}, more, expect}, prepare};
  };
  const std::vector<std::string> sweep = {"sweep", "--presets", "1n1g",  "--strategy",
                                          "ddp",   "--local",   "--out", "sw"};
  check_all_prepared({
      report("summary.md is a FIFO", {}, {"sw/summary.md", "named pipe"},
             fifo_at("work/sw/summary.md")),
      report("summary.md links to a file outside the sweep", {{"home/.profile", "export A=1\n"}},
             {"sw/summary.md", kLink}, link_to("work/sw/summary.md", "../../home/.profile")),
      {{"results.csv is a link (read, then never replaced)",
        {"report", "sw"},
        {{"work/elsewhere.csv", kGoodResults}},
        {"sw/results.csv", kLink}},
       link_to("work/sw/results.csv", "../elsewhere.csv")},
      report("plots/ links to another directory", {{"home/x", "x"}},
             {"sw/plots", "is a symbolic link, not a directory", "remove it"},
             link_to("work/sw/plots", "../../home")),
      report("plots is a file", {{"work/sw/plots", "x"}}, {"sw/plots", "is not a directory"}, {}),
      report("plots/speedup.png is a FIFO (gnuplot would block on it)", {},
             {"speedup.png", "named pipe"}, fifo_at("work/sw/plots/speedup.png")),
      report("plots/efficiency.svg links elsewhere (gnuplot would write through it)",
             {{"home/e.svg", "<svg/>"}}, {"efficiency.svg", kLink},
             link_to("work/sw/plots/efficiency.svg", "../../../home/e.svg")),
      report("plots/scaling-ddp.dat is a link", {{"home/d", "1 2\n"}}, {"scaling-ddp.dat", kLink},
             link_to("work/sw/plots/scaling-ddp.dat", "../../../home/d")),
      report("plots/speedup.gp is a directory", {{"work/sw/plots/speedup.gp", "<dir>"}},
             {"speedup.gp: is a directory"}, {}),
      {{"sweep.json is a FIFO (the read would block)",
        sweep,
        {},
        {"sw/sweep.json", "is a FIFO (named pipe)", "remove it"}},
       fifo_at("work/sw/sweep.json")},
      {{"tune's profile target is a dangling link (was: refused after every candidate ran)",
        {"tune", "--preset", "1n2g", "--local"},
        {},
        {"clusters/generic-tuned.json", kLink}},
       link_to("xdg/hpclaunch/clusters/generic-tuned.json", "nowhere")},
      {{"sweep.json is a link",
        sweep,
        {{"home/state.json", "{\"points\": []}"}},
        {"sw/sweep.json", "is a symbolic link"}},
       link_to("work/sw/sweep.json", "../../home/state.json")},
  });
}
