#include "local_harness.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <thread>

#ifndef HPCLAUNCH_BIN
#error "HPCLAUNCH_BIN must name the built hpclaunch binary"
#endif
#ifndef HPC_TEST_SOURCE_DIR
#error "HPC_TEST_SOURCE_DIR must name the source tree"
#endif

namespace local_test {
namespace {

// The probe "trainer": prints the variables a rank sees, then does what --mode says.
//   ok       exit 0                    short   sleep 2 s, exit 0
//   fail     rank 1 exits 3, the others sleep 30 s (kill-on-bad-exit must end them)
//   sleep    sleep 60 s                usr1    print each USR1, run 30 s
//   requeue  first run: "checkpoint" on USR1, rank 0 writes the requeue marker, exit 75
//            (hpctrain's stopped-for-a-requeue); after a requeue: exit 0 at once
constexpr const char* kProbe = R"(#!/bin/bash
mode=ok
while (($#)); do
  if [[ $1 == --mode ]]; then mode=$2; shift; fi
  shift
done
echo "probe rank=${SLURM_PROCID:-} local=${SLURM_LOCALID:-} node=${SLURM_NODEID:-} \
ntasks=${SLURM_NTASKS:-} step=${SLURM_STEP_ID:-} master=${MASTER_ADDR:-}:${MASTER_PORT:-} \
omp=${OMP_NUM_THREADS:-} cpus=${SLURM_CPUS_PER_TASK:-} restart=${SLURM_RESTART_COUNT:-} \
job=${SLURM_JOB_ID:-} cuda=${CUDA_VISIBLE_DEVICES:-none}"
echo "probe rank=${SLURM_PROCID:-} on stderr" >&2
case $mode in
  ok) exit 0 ;;
  short) sleep 2; echo "probe rank=$SLURM_PROCID done"; exit 0 ;;
  fail)
    if [[ $SLURM_PROCID == 1 ]]; then exit 3; fi
    sleep 30; echo "probe rank=$SLURM_PROCID survived"; exit 0 ;;
  sleep) sleep 60; echo "probe rank=$SLURM_PROCID survived"; exit 0 ;;
  usr1)
    trap 'echo "probe rank=$SLURM_PROCID got USR1"' USR1
    for _ in $(seq 150); do sleep 0.2; done
    echo "probe rank=$SLURM_PROCID survived" ;;
  requeue)
    if ((${SLURM_RESTART_COUNT:-0} >= 1)); then echo "probe rank=$SLURM_PROCID resumed"; exit 0; fi
    # Like hpctrain: every rank stops, they meet (a barrier through files), then all exit 75;
    # otherwise the first 75 ends the slower ranks (--kill-on-bad-exit) before their own stop.
    # Once stopping, the TERM that srun sends the others after the first 75 changes nothing
    # (hpctrain's TERM handler only asks for the stop that is already under way).
    stop_dir=".probe-stop-$SLURM_JOB_ID"
    trap 'trap "" TERM; echo "probe rank=$SLURM_PROCID checkpoint"
          mkdir -p "$stop_dir"; touch "$stop_dir/$SLURM_PROCID"
          while (($(find "$stop_dir" -type f | wc -l) < SLURM_NTASKS)); do sleep 0.05; done
          if [[ $SLURM_PROCID == 0 ]]; then
            echo "restart=${SLURM_RESTART_COUNT:-0}" >"$HPCLAUNCH_REQUEUE_MARKER.tmp"
            mv "$HPCLAUNCH_REQUEUE_MARKER.tmp" "$HPCLAUNCH_REQUEUE_MARKER"
          fi
          exit 75' USR1
    for _ in $(seq 150); do sleep 0.2; done
    echo "probe rank=$SLURM_PROCID survived" ;;
  *) echo "probe: unknown mode $mode" >&2; exit 9 ;;
esac
)";

}  // namespace

std::string hpclaunch_binary() { return HPCLAUNCH_BIN; }

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& path, const std::string& content, fs::perms mode) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
  fs::permissions(path, mode);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  for (auto& line : lines_of(text))
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

Sandbox::Sandbox() {
  std::string tmpl = (fs::temp_directory_path() / "hpclaunch-local-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  root_ = tmpl;
  for (const char* d : {"work", "runs", "xdg", "hp", "home"}) fs::create_directories(root_ / d);
  write_file(probe(), kProbe);
}

Sandbox::~Sandbox() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

hpc::CommandResult Sandbox::hpclaunch(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {hpclaunch_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  hpc::CommandOptions o;
  o.cwd = work().string();
  o.timeout = std::chrono::seconds(60);
  o.env = {"XDG_CONFIG_HOME=" + (root_ / "xdg").string(),
           "HPCLAUNCH_PATH=" + (root_ / "hp").string(), "HPCLAUNCH_DATA_DIR=" HPC_TEST_SOURCE_DIR,
           "HOME=" + (root_ / "home").string()};
  return hpc::run_command(argv, o);
}

std::string Sandbox::render(const std::string& preset, const std::string& mode,
                            const std::vector<std::string>& sets) const {
  std::vector<std::string> args = {
      "render", "--no-project", "--cluster", "generic", "--strategy",
      "ddp",    "--preset",     preset,      "--set",   "trainer.program=" + probe().string()};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  args.insert(args.end(), {"--", "--mode", mode});
  auto r = hpclaunch(args);
  INFO(r.summary("hpclaunch render") << "\n" << r.err);
  REQUIRE(r.ok());
  return r.out;
}

hpc::LocalBackend Sandbox::backend(hpc::LocalBackendOptions options) const {
  options.executable = hpclaunch_binary();
  return hpc::LocalBackend(runs().string(), options);
}

hpc::SubmitRequest Sandbox::request(const std::string& script) const {
  hpc::SubmitRequest r;
  r.script = script;
  r.job_name = "hpclaunch";
  r.runs_root = runs().string();
  r.workdir = work().string();
  r.files = {{"spec.json", "{}\n"}};
  return r;
}

bool is_final(const std::string& state) {
  return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT";
}

hpc::JobStatus wait_for_end(hpc::Backend& backend, const std::string& job_id,
                            std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  hpc::JobStatus s = backend.status(job_id);
  while (!is_final(s.state) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s = backend.status(job_id);
  }
  return s;
}

bool wait_for_text(const fs::path& path, const std::string& needle, int count,
                   std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (static_cast<int>(lines_with(read_file(path), needle).size()) >= count) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace local_test
