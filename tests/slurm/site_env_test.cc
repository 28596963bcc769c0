// The site's environment on the real cluster (docs/programs.md, "Site environment"):
// - a variable passed by name from the submitting shell (--env-pass) reaches every task, over
//   the slurm and the ssh backend, and its value is in no file of the run directory, the
//   workspace or the script;
// - a site's SBATCH_EXPORT=NONE does not cost the tasks MASTER_ADDR or the NCCL variables;
// - submitted from inside a running Slurm job (a JupyterLab session that is a job), the new job's
//   srun does not see the enclosing job's SLURM_MEM_PER_CPU, SLURM_TRES_PER_TASK or SLURM_NTASKS;
// - a name that is unset in the submitting shell: one line, exit 2, nothing submitted.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include "harness.h"
#include "shell.h"
#include "sha256.h"

using namespace slt;
namespace fs = std::filesystem;

namespace {

// A trainer that prints what each task sees: the secret's length and hash (never the value),
// the rendezvous and NCCL variables, and the allocation variables srun reads.
std::string write_env_probe(const Workspace& ws) {
  const std::string path = ws.dir() + "/envprobe.sh";
  std::ofstream(path) << R"SH(#!/bin/bash
printf 'envprobe rank=%s len=%s sha=%s addr=%s nccl=%s memcpu=%s tres=%s ntasks=%s\n' \
  "${SLURM_PROCID:-?}" "${#HPC_TEST_SECRET}" \
  "$(printf '%s' "${HPC_TEST_SECRET:-}" | sha256sum | cut -d' ' -f1)" \
  "${MASTER_ADDR:-unset}" "${NCCL_DEBUG:-unset}" "${SLURM_MEM_PER_CPU:-unset}" \
  "${SLURM_TRES_PER_TASK:-unset}" "${SLURM_NTASKS:-unset}"
)SH";
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  return path;
}

std::string random_secret() {
  std::random_device rd;
  return "hpc-secret-" + std::to_string(rd()) + "-" + std::to_string(rd());
}

// Every regular file under `dir` that contains `needle`.
std::vector<std::string> files_containing(const std::string& dir, const std::string& needle) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (!it->is_regular_file(ec)) continue;
    if (read_file(it->path().string()).find(needle) != std::string::npos)
      found.push_back(it->path().string());
  }
  return found;
}

// The envprobe lines of a job's output: each task saw the secret (by its hash), MASTER_ADDR,
// NCCL_DEBUG, and none of the enclosing allocation's variables.
void check_tasks(const std::string& output, const std::string& secret, int world) {
  std::regex line(
      R"(envprobe rank=(\d+) len=(\d+) sha=([0-9a-f]+) addr=(\S+) nccl=(\S+) memcpu=(\S+) )"
      R"(tres=(\S+) ntasks=(\S+))");
  std::set<int> ranks;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    INFO(m.str());
    ranks.insert(std::stoi(m[1]));
    CHECK(m[2] == std::to_string(secret.size()));
    CHECK(m[3] == hpc::sha256_hex(secret));
    CHECK(m[4] != "unset");
    CHECK(m[5] == "WARN");
    CHECK(m[6] == "unset");
    // Slurm 22.05 sets no SLURM_TRES_PER_TASK for these tasks; 24.11's srun sets its own from
    // the step's --cpus-per-task (cpu=1 here). Either way not the enclosing allocation's cpu:3.
    CHECK((m[7] == "unset" || m[7] == "cpu=1"));
    CHECK(m[8] == std::to_string(world));
  }
  CHECK(ranks.size() == static_cast<size_t>(world));
}

std::vector<std::string> probe_sets(const std::string& probe) {
  return {"--set",
          "trainer.program=" + probe,
          "--set",
          R"(profile.nccl.NCCL_DEBUG={"value": "WARN", "reason": "test: reaches every task"})",
          "--env-pass",
          "HPC_TEST_SECRET"};
}

}  // namespace

TEST_CASE(
    "env-pass: the secret reaches every task by name, with SBATCH_EXPORT=NONE and an "
    "enclosing allocation's variables in the submitting shell",
    "[slurm][siteenv]") {
  Workspace ws("siteenv");
  const std::string probe = write_env_probe(ws);
  const std::string secret = random_secret();
  auto args = ws.job_args("run", "2n2g", probe_sets(probe));
  args.insert(args.end(), {"--set", "shape.mem_per_gpu=100M"});
  // As in a JupyterLab session that is itself a Slurm job with --mem-per-cpu, and on a site that
  // sets SBATCH_EXPORT=NONE for every user.
  auto r = ws.hpclaunch(args, {"HPC_TEST_SECRET=" + secret, "SBATCH_EXPORT=NONE",
                               "SLURM_JOB_ID=999999", "SLURM_JOBID=999999", "SLURM_MEM_PER_CPU=100",
                               "SLURM_TRES_PER_TASK=cpu:3", "SLURM_NTASKS=7"});
  INFO("hpclaunch run: " << r.summary() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  check_tasks(r.out, secret, 4);
  CHECK(files_containing(ws.dir(), secret).empty());
  CHECK_FALSE(contains(r.out + r.err, secret));
  const std::string job = submitted_job_id(r.err);
  REQUIRE(!job.empty());
  // The names, and the site's NONE kept for everything else.
  auto runs = files_containing(ws.work() + "/runs", "--export=NONE,HPC_TEST_SECRET");
  CHECK(runs.size() == 1);  // run.json's submit_command
}

TEST_CASE("env-pass over SSH: the value travels on stdin, never in a file or argument",
          "[slurm][siteenv][ssh]") {
  Workspace ws("siteenv-ssh");
  const std::string probe = write_env_probe(ws);
  const std::string secret = random_secret();
  auto args = ws.job_args("run", "2n2g", probe_sets(probe));
  args.insert(args.end(), {"--host", "testlogin", "--ssh-config",
                           std::string(HPC_TESTCLUSTER_DIR) + "/ssh/config", "--remote-runs-dir",
                           ws.dir() + "/remote-runs"});
  auto r = ws.hpclaunch(args, {"HPC_TEST_SECRET=" + secret});
  INFO("hpclaunch run --host: " << r.summary() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  check_tasks(r.out, secret, 4);
  CHECK(files_containing(ws.dir(), secret).empty());
  CHECK(files_containing(ws.work() + "/runs", "--export=ALL,HPC_TEST_SECRET").size() == 1);
}

TEST_CASE("submitted from inside a running job: the new job's srun works", "[slurm][siteenv]") {
  // A real enclosing job (--mem-per-cpu, as a JupyterLab session's) runs `hpclaunch run`; the
  // job it submits asks --mem-per-gpu. With the outer SLURM_MEM_PER_CPU passed on, the inner
  // srun would stop with "SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are
  // mutually exclusive".
  Workspace ws("siteenv-nested");
  const std::string probe = write_env_probe(ws);
  const std::string secret = random_secret();
  auto args = ws.job_args("run", "2n2g", probe_sets(probe));
  args.insert(args.end(), {"--set", "shape.mem_per_gpu=100M"});
  std::string command = hpc::shell_quote(HPCLAUNCH_BIN);
  for (const auto& a : args) command += " " + hpc::shell_quote(a);
  const std::string outer = ws.dir() + "/outer.sbatch";
  std::ofstream(outer) << "#!/bin/bash\ncd " << hpc::shell_quote(ws.work()) << "\n"
                       << "echo \"outer: SLURM_MEM_PER_CPU=${SLURM_MEM_PER_CPU:-unset}\"\n"
                       << command << "\n";
  auto sub =
      run({"sbatch", "--parsable", "--job-name=" + ws.job_name(), "--nodes=1", "--ntasks=1",
           "--cpus-per-task=1", "--mem-per-cpu=100", "--output=" + ws.dir() + "/outer.out", outer},
          60s, ws.env({"HPC_TEST_SECRET=" + secret}), ws.work());
  INFO(sub.summary());
  REQUIRE(sub.exit_code == 0);
  const std::string outer_job = lines_of(sub.out).at(0);
  const std::string state = wait_job_state(outer_job, {"COMPLETED", "FAILED", "CANCELLED"}, 120s);
  const std::string log = read_file(ws.dir() + "/outer.out");
  INFO("outer job " << outer_job << " " << state << ":\n" << log);
  CHECK(contains(log, "outer: SLURM_MEM_PER_CPU=100"));  // the enclosing job's own
  CHECK_FALSE(contains(log, "mutually exclusive"));
  CHECK(state == "COMPLETED");
  check_tasks(log, secret, 4);
}

TEST_CASE("env-pass of a name unset in the submitting shell: one line, exit 2, nothing submitted",
          "[slurm][siteenv]") {
  Workspace ws("siteenv-unset");
  auto args = ws.job_args("submit", "1n1g", {"--env-pass", "HPC_TEST_SURELY_UNSET"});
  auto r = ws.hpclaunch(args);
  INFO(r.summary() << "\n" << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(contains(r.err, "HPC_TEST_SURELY_UNSET is not set in this shell"));
  CHECK_FALSE(fs::exists(ws.work() + "/runs"));
  auto q = run({"squeue", "--noheader", "--name=" + ws.job_name(), "--format=%i"});
  CHECK(q.out.empty());
}
