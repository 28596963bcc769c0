// The rendered batch script run the way Slurm would, with stub scontrol/getent/srun
// (slurm_stubs.h): the requeue marker decides the requeue (not srun's status), job.signal and
// TERM both ask for a checkpoint, a run outside a job and a loopback MASTER_ADDR on several
// nodes stop with one line, and the binding options reach srun.
#include <catch2/catch.hpp>

#include "harness.h"
#include "slurm_stubs.h"

using namespace cli_test;

namespace {

fs::path render_job(const Sandbox& sb, std::vector<std::string> sets) {
  std::vector<std::string> args = {"render", "--preset", "2n2g", "-o", "job.sbatch"};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  Run r = sb.hpclaunch(args);
  INFO(r.describe());
  REQUIRE(r.status == 0);
  return sb.work() / "job.sbatch";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The lines a script wrote to stderr that start with "hpclaunch:".
std::vector<std::string> hpclaunch_lines(const std::string& err) {
  std::vector<std::string> out;
  for (const auto& line : split_lines(err))
    if (line.rfind("hpclaunch:", 0) == 0) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("job script: the requeue marker decides, not srun's status", "[requeue]") {
  Sandbox sb;
  install_slurm_stubs(sb);
  render_job(sb, {});
  const fs::path requeue = sb.root() / "log" / "requeue";

  SECTION("marker written, srun ends with 3: requeued") {
    Run job = run_job_script(sb, "job.sbatch", {"STUB_SRUN_USR1_PARENT=1", "STUB_SRUN_STATUS=3"});
    INFO(job.describe());
    CHECK(job.status == 0);
    REQUIRE(fs::exists(requeue));
    CHECK(read_file(requeue) == "requeue 4242\n");
    CHECK(
        has(job.err, "requeue marker: restart=0 step=7 checkpoint=ck (tasks ended with status 3)"));
  }
  SECTION("srun ends with 75 but no marker: not requeued, the job fails with 75 and says why") {
    Run job = run_job_script(sb, "job.sbatch", {"STUB_SRUN_USR1_PARENT=1", "STUB_SRUN_MARKER=0"});
    INFO(job.describe());
    CHECK(job.status == 75);
    CHECK_FALSE(fs::exists(requeue));
    CHECK(has(job.err,
              "USR1: the tasks ended with status 75 and wrote no requeue marker for "
              "restart 0"));
  }
  SECTION("a marker of an earlier run (restart=0 in restart 1) is not this run's") {
    write_file(sb.work() / ".hpclaunch-requeue-4242", "restart=0 step=3 checkpoint=old\n");
    Run job = run_job_script(sb, "job.sbatch", {"SLURM_RESTART_COUNT=1"});
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK_FALSE(fs::exists(requeue));
    CHECK_FALSE(fs::exists(sb.work() / ".hpclaunch-requeue-4242"));  // removed at the start
  }
  SECTION("the marker is named to the tasks, in the run directory under hpclaunch run") {
    fs::create_directories(sb.root() / "runs" / "x-4242");
    Run job = run_job_script(sb, "job.sbatch",
                             {"HPCLAUNCH_RUN_DIR_PREFIX=" + (sb.root() / "runs" / "x-").string()});
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK(srun_env(sb)["HPCLAUNCH_REQUEUE_MARKER"] ==
          (sb.root() / "runs" / "x-4242" / "requeue-marker").string());
  }
}

TEST_CASE("job script: job.signal=USR2 and TERM to the batch shell ask for a checkpoint",
          "[requeue]") {
  Sandbox sb;
  install_slurm_stubs(sb);
  const fs::path requeue = sb.root() / "log" / "requeue";
  SECTION("USR2 is trapped and forwarded as USR2") {
    std::string script = read_file(render_job(sb, {"job.signal=USR2"}));
    CHECK(sbatch_options(script)["--signal"] == "B:USR2@90");
    Run job = run_job_script(sb, "job.sbatch", {"STUB_SRUN_USR1_PARENT=1", "STUB_SIGNAL=USR2"});
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK(fs::exists(requeue));
    CHECK(has(job.err, "hpclaunch: USR2: asking the tasks to checkpoint"));
  }
  SECTION("TERM to the batch shell is forwarded to srun as job.signal") {
    render_job(sb, {});
    Run job =
        run_job_script(sb, "job.sbatch", {"STUB_SRUN_USR1_PARENT=1", "STUB_PARENT_SIGNAL=TERM"});
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK(fs::exists(requeue));
    CHECK(has(job.err, "hpclaunch: TERM: asking the tasks to checkpoint"));
  }
  SECTION("a second stop is not passed on: the tasks save once") {
    render_job(sb, {});
    Run job = run_job_script(sb, "job.sbatch",
                             {"STUB_SRUN_USR1_PARENT=1", "STUB_SECOND_SIGNAL=TERM"});
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK(fs::exists(requeue));
    CHECK(read_file(sb.root() / "log" / "srun.usr1") == "forwarded\n");
    CHECK(has(job.err, "hpclaunch: TERM: the tasks were asked to checkpoint on USR1 already: "
                       "not asked again"));
  }
}

TEST_CASE("job script: run with bash outside a job, it says so in one line and exits 2",
          "[guards]") {
  Sandbox sb;
  install_slurm_stubs(sb);
  render_job(sb, {});
  for (const char* unset : {"SLURM_JOB_ID", "SLURM_JOB_NODELIST"}) {
    INFO(unset);
    std::vector<std::string> env;
    for (const auto& v : job_env(sb))
      if (v.rfind(std::string(unset) + "=", 0) != 0) env.push_back(v);
    Run job = spawn({"/bin/bash", "job.sbatch"}, sb.work(), env);
    INFO(job.describe());
    CHECK(job.status == 2);
    CHECK(split_lines(job.err).size() == 1);
    CHECK(has(job.err, "hpclaunch: not inside a Slurm job"));
    CHECK(has(job.err, "sbatch FILE"));
    CHECK_FALSE(has(job.err, "unbound variable"));
    CHECK_FALSE(fs::exists(sb.root() / "log" / "srun.argv"));
  }
}

TEST_CASE("job script: a loopback MASTER_ADDR on several nodes is refused in one line",
          "[guards][rendezvous]") {
  Sandbox sb;
  install_slurm_stubs(sb);
  SECTION("getent gives 127.0.1.1 (Debian's /etc/hosts line), the node's address is not loopback") {
    render_job(sb, {});
    Run job =
        run_job_script(sb, "job.sbatch", {"STUB_HOST_ADDR=127.0.1.1", "STUB_NODE_ADDR=node01"});
    INFO(job.describe());
    CHECK(job.status == 1);
    auto lines = hpclaunch_lines(job.err);
    REQUIRE(lines.size() == 1);
    CHECK(has(lines[0],
              "MASTER_ADDR 127.0.1.1 (node01) is a loopback address (127.0.1.1) on a "
              "2-node job"));
    CHECK(has(lines[0], "/etc/hosts"));
    CHECK_FALSE(fs::exists(sb.root() / "log" / "srun.argv"));
  }
  SECTION("unresolved MASTER_ADDR (resolve_master_addr=false) naming a loopback host") {
    render_job(sb, {"profile.resolve_master_addr=false"});
    Run job =
        run_job_script(sb, "job.sbatch", {"STUB_HOST_ADDR=127.0.1.1", "STUB_NODE_ADDR=10.1.2.3"});
    INFO(job.describe());
    CHECK(job.status == 1);
    CHECK(has(job.err, "MASTER_ADDR node01 (node01) is a loopback address (127.0.1.1)"));
  }
  SECTION("Slurm reaches the node at a loopback address (several slurmd on one machine): kept") {
    render_job(sb, {});
    Run job =
        run_job_script(sb, "job.sbatch", {"STUB_HOST_ADDR=127.0.0.1", "STUB_NODE_ADDR=127.0.0.1"});
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK(srun_env(sb)["MASTER_ADDR"] == "127.0.0.1");
  }
  SECTION("a routable address: kept") {
    render_job(sb, {});
    Run job =
        run_job_script(sb, "job.sbatch", {"STUB_HOST_ADDR=10.1.2.3", "STUB_NODE_ADDR=node01"});
    INFO(job.describe());
    CHECK(job.status == 0);
    CHECK(srun_env(sb)["MASTER_ADDR"] == "10.1.2.3");
  }
}

TEST_CASE("job script: profile.cpu_bind and gpu_bind reach srun, SRUN_CPUS_PER_TASK its tasks",
          "[binding]") {
  Sandbox sb;
  install_slurm_stubs(sb);
  render_job(sb, {"profile.cpu_bind=cores", "profile.gpu_bind=closest"});
  Run job = run_job_script(sb, "job.sbatch");
  INFO(job.describe());
  REQUIRE(job.status == 0);
  CHECK(srun_argv(sb) == std::vector<std::string>{"--export=ALL", "--kill-on-bad-exit=1",
                                                  "--wait=60", "--ntasks-per-node=2",
                                                  "--cpus-per-task=8", "--cpu-bind=cores",
                                                  "--gpu-bind=closest", "--label", "hpctrain",
                                                  "train", "--strategy", "ddp"});
  auto env = srun_env(sb);
  CHECK(env["SRUN_CPUS_PER_TASK"] == "8");
  CHECK(env["OMP_NUM_THREADS"] == "8");
}
