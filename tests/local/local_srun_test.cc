// The srun and scontrol a local job finds on its PATH: the built hpclaunch started under those
// names (symlinks, as in a run directory's bin/).
#include <catch2/catch.hpp>
#include <chrono>
#include <set>

#include "local_harness.h"

using namespace local_test;

namespace {

struct Shims {
  Sandbox sandbox;
  fs::path bin() const { return sandbox.root() / "bin"; }
  Shims() {
    fs::create_directories(bin());
    fs::create_symlink(hpclaunch_binary(), bin() / "srun");
    fs::create_symlink(hpclaunch_binary(), bin() / "scontrol");
  }
  // Runs `bash -c COMMAND` with the shims first on PATH and `env` added.
  hpc::CommandResult shell(const std::string& command, std::vector<std::string> env = {}) const {
    hpc::CommandOptions o;
    o.timeout = std::chrono::seconds(30);
    o.env = std::move(env);
    o.env.push_back("PATH=" + bin().string() + ":/usr/local/bin:/usr/bin:/bin");
    o.cwd = sandbox.work().string();
    return hpc::run_command({"bash", "-c", command}, o);
  }
};

}  // namespace

TEST_CASE("srun: one process per task with its rank variables, labelled lines") {
  Shims s;
  auto r = s.shell(
      "srun --ntasks-per-node=3 --cpus-per-task=2 --label bash -c "
      "'echo \"rank=$SLURM_PROCID local=$SLURM_LOCALID node=$SLURM_NODEID step=$SLURM_STEP_ID "
      "n=$SLURM_NTASKS/$SLURM_STEP_NUM_TASKS cpus=$SLURM_CPUS_PER_TASK omp=$OMP_NUM_THREADS\"; "
      "echo \"err $SLURM_PROCID\" >&2; printf \"tail $SLURM_PROCID\"'",
      {"OMP_NUM_THREADS=7", "SLURM_CPUS_PER_TASK=2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 3; ++rank) {
    std::string p = std::to_string(rank) + ": ";
    CHECK(lines_with(r.out, p + "rank=" + std::to_string(rank) + " local=" + std::to_string(rank) +
                                " node=0 step=0 n=3/3 cpus=2 omp=7")
              .size() == 1);
    // stderr stays stderr; a partial last line is flushed, labelled, on its own line.
    CHECK(lines_with(r.err, p + "err " + std::to_string(rank)).size() == 1);
    CHECK(lines_with(r.out, p + "tail " + std::to_string(rank)).size() == 1);
  }
  CHECK(lines_of(r.out).size() == 6);
}

TEST_CASE(
    "srun: labels are right-aligned to the width of the last rank, exit status is the largest") {
  Shims s;
  auto r = s.shell("srun -n 11 -l bash -c 'echo x; exit $((SLURM_PROCID % 5))'");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 4);
  CHECK(lines_with(r.out, " 0: x").size() == 1);
  CHECK(lines_with(r.out, " 9: x").size() == 1);
  CHECK(lines_with(r.out, "10: x").size() == 1);
  CHECK(lines_with(r.err, "task 4: Exited with exit code 4").size() == 1);
  // Without --label the lines pass through unchanged.
  auto plain = s.shell("srun -n 2 echo hello");
  CHECK(plain.exit_code == 0);
  CHECK(plain.out == "hello\nhello\n");
}

TEST_CASE(
    "srun: --kill-on-bad-exit ends the other tasks, their signal is srun's status, as Slurm's") {
  Shims s;
  auto start = std::chrono::steady_clock::now();
  auto r = s.shell(
      "srun --kill-on-bad-exit=1 -n 2 -l bash -c "
      "'if ((SLURM_PROCID == 1)); then exit 3; fi; sleep 30; echo survived'");
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.out << r.err);
  // Slurm 22.05's srun on the test cluster, the same command: "task 1: Exited with exit code 3",
  // "task 0: Terminated", srun exits 143.
  CHECK(r.exit_code == 143);
  CHECK(r.out.find("survived") == std::string::npos);
  CHECK(seconds < 10);
  CHECK(r.err.find("Terminating StepId") != std::string::npos);
  CHECK(lines_with(r.err, "task 1: Exited with exit code 3").size() == 1);
  CHECK(lines_with(r.err, "task 0: Terminated").size() == 1);
  CHECK(r.err.find("task 1: Exited") <
        r.err.find("task 0: Terminated"));  // the first failure first

  // A task killed by a signal counts as bad too.
  start = std::chrono::steady_clock::now();
  auto killed = s.shell(
      "srun -K -n 2 bash -c 'if ((SLURM_PROCID == 0)); then kill -9 $$; fi; sleep 30; echo "
      "survived'");
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(killed.exit_code >= 128);
  CHECK(killed.out.find("survived") == std::string::npos);
  CHECK(seconds < 10);
  // srun exits 128 + the signal that killed a task, even when another task's exit code is larger
  // (Slurm 22.05: `exit 200` beside a task killed by TERM -> 143).
  CHECK(s.shell("srun -n 1 bash -c 'kill -9 $$'").exit_code == 137);
  // Task 0 is killed once task 1 has exited with 200 (it leaves a file just before).
  CHECK(s.shell("srun -n 2 bash -c 'if ((SLURM_PROCID == 1)); then touch exits.1; exit 200; fi; "
                "for _ in $(seq 200); do [[ -e exits.1 ]] && break; sleep 0.05; done; "
                "kill -TERM $$'")
            .exit_code == 143);
}

TEST_CASE("srun: --wait=N ends the rest N seconds after the first task exits") {
  Shims s;
  auto start = std::chrono::steady_clock::now();
  auto r =
      s.shell("srun --wait=1 -n 2 bash -c 'if ((SLURM_PROCID == 1)); then exit 0; fi; sleep 30'");
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.out << r.err);
  CHECK(r.exit_code == 128 + 15);
  CHECK(seconds < 8);
}

TEST_CASE("srun: forwards USR1 to every task") {
  Shims s;
  auto r = s.shell(
      "srun -n 2 -l bash -c 'trap \"echo got USR1; exit 0\" USR1; touch ready.$SLURM_PROCID; "
      "for _ in $(seq 100); do sleep 0.1; done; echo no-signal' & pid=$!; "
      "for _ in $(seq 200); do [[ -e ready.0 && -e ready.1 ]] && break; sleep 0.05; done; "
      "kill -USR1 $pid; wait $pid");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(lines_with(r.out, "got USR1").size() == 2);
  CHECK(r.out.find("no-signal") == std::string::npos);
}

TEST_CASE("srun: options the local srun does not know are refused with exit 2") {
  Shims s;
  auto r = s.shell("srun --mpi=pmix echo hi");
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("'--mpi=pmix'") != std::string::npos);
  CHECK(lines_of(r.err).size() == 1);
  auto two_nodes = s.shell("srun -N 2 echo hi");
  CHECK(two_nodes.exit_code == 2);
  CHECK(two_nodes.err.find("one node") != std::string::npos);
  CHECK(s.shell("srun -x node1 echo hi").exit_code == 2);
  CHECK(s.shell("srun --label").exit_code == 2);  // no command
  auto missing = s.shell("srun -n 1 /no/such/program");
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("/no/such/program") != std::string::npos);
}

TEST_CASE("scontrol: show hostnames, and nothing else but requeue") {
  Shims s;
  auto r = s.shell("scontrol show hostnames 'n[01-03],gpu-a[1-2]'");
  CHECK(r.exit_code == 0);
  CHECK(r.out == "n01\nn02\nn03\ngpu-a1\ngpu-a2\n");
  auto from_env = s.shell("scontrol show hostnames", {"SLURM_JOB_NODELIST=localhost"});
  CHECK(from_env.out == "localhost\n");
  auto bad_list = s.shell("scontrol show hostnames 'n[3-1]'");
  CHECK(bad_list.exit_code == 2);
  auto other = s.shell("scontrol show job 1");
  CHECK(other.exit_code == 2);
  CHECK(lines_of(other.err).size() == 1);
  // requeue needs a local job to requeue.
  auto requeue = s.shell("scontrol requeue 12");
  CHECK(requeue.exit_code == 1);
  CHECK(lines_of(requeue.err).size() == 1);
}
