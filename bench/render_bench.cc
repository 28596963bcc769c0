// Prints how long rendering takes:
//   1. the whole `hpclaunch render` process (fork + exec + resolve + render + write), median of
//      N runs (target: <= 5 ms, issue 34);
//   2. resolving and rendering 1,000 sweep points in one process (target: <= 1 s).
// Usage: render_bench [HPCLAUNCH_BINARY] [RUNS]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "render/render.h"
#include "spec/catalog.h"
#include "spec/spec.h"

extern char** environ;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double run_once(const std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  auto t0 = Clock::now();
  pid_t pid;
  if (posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), environ) != 0) {
    std::perror("posix_spawn");
    std::exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double ms = ms_since(t0);
  posix_spawn_file_actions_destroy(&actions);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "hpclaunch render failed (status %d)\n", status);
    std::exit(1);
  }
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bin = argc > 1 ? argv[1] : HPCLAUNCH_BINARY;
  int runs = argc > 2 ? std::atoi(argv[2]) : 200;
  setenv("HPCLAUNCH_DATA_DIR", HPC_SOURCE_DIR, 1);
  setenv("HPCLAUNCH_PATH", "", 1);

  std::vector<std::string> cmd = {bin,
                                  "render",
                                  "--no-project",
                                  "--preset",
                                  "2n4g",
                                  "--strategy",
                                  "fsdp",
                                  "--cluster",
                                  "jsc",
                                  "--set",
                                  "profile.account=bench",
                                  "--",
                                  "--model",
                                  "gpt2"};
  for (int i = 0; i < 5; ++i) run_once(cmd);  // warm the page cache
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) times.push_back(run_once(cmd));
  std::printf(
      "hpclaunch render (whole process): median %.2f ms, min %.2f ms, max %.2f ms over %d runs "
      "(target <= 5 ms)\n",
      median(times), *std::min_element(times.begin(), times.end()),
      *std::max_element(times.begin(), times.end()), runs);

  // A sweep: presets x strategies x clusters, with a distinct job name and step count per point.
  fs::path data = HPC_SOURCE_DIR;
  hpc::Catalog catalog({{data / "presets", data / "templates", "built-in"}});
  auto tmpl = hpc::ScriptTemplate::from_file(catalog.default_template());
  std::vector<std::string> presets = {"1n1g", "1n2g", "2n2g", "2n4g", "4n4g"};
  std::vector<std::string> clusters = {"generic", "daic", "jsc", "baskerville"};
  size_t bytes = 0;
  auto t0 = Clock::now();
  for (int point = 0; point < 1000; ++point) {
    hpc::SpecRequest r;
    r.preset = presets[point % presets.size()];
    r.cluster = clusters[(point / presets.size()) % clusters.size()];
    r.strategy = hpc::known_strategies()[point % 4];
    r.read_project_file = false;
    r.sets = {"profile.account=bench", "profile.qos=bench",  // what the site profiles require
              "job.name=sweep-" + std::to_string(point)};
    r.trainer_args = std::vector<std::string>{"--max-steps", std::to_string(100 + point)};
    hpc::Spec spec = hpc::resolve_spec(catalog, r);
    bytes += tmpl.render(spec, {"bench", {"hpclaunch", "sweep"}}).size();
  }
  double sweep_ms = ms_since(t0);
  std::printf(
      "1000 sweep points resolved + rendered in one process: %.1f ms (%.3f ms/point, %zu bytes; "
      "target <= 1000 ms)\n",
      sweep_ms, sweep_ms / 1000, bytes);
  return 0;
}
