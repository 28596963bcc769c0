#include "follow/follow.h"

#include <sstream>
#include <vector>

#include <catch2/catch.hpp>

#include "follow/jobs.h"
#include "support/scripted_backend.h"

using namespace std::chrono_literals;

namespace {

// Each status() call reports the next step (the last one repeats); the job's log grows by the
// text given with that step.
hpc::test::ScriptedBackend scripted(const std::string& id,
                                    std::vector<hpc::test::ScriptedStep> steps) {
  hpc::test::ScriptedBackend b;
  b.add_job(id, {std::move(steps), {}});
  return b;
}

hpc::FollowOptions fast() {
  hpc::FollowOptions o;
  o.log_interval = 1ms;
  o.state_interval = 1ms;
  o.requeue_settle = 50ms;
  return o;
}

}  // namespace

TEST_CASE("srun's task failure lines name the rank that failed first", "[follow]") {
  auto f = hpc::parse_srun_task_failure("srun: error: node02: task 3: Killed");
  REQUIRE(f);
  CHECK(f->ranks == "3");
  CHECK(f->node == "node02");
  CHECK(f->reason == "Killed");
  CHECK(hpc::describe_task_failure(*f) == "rank 3 on node02 failed first (Killed)");
  auto several =
      hpc::parse_srun_task_failure("srun: error: node01: tasks 0-1: Exited with exit code 1");
  REQUIRE(several);
  CHECK(hpc::describe_task_failure(*several) ==
        "ranks 0-1 on node01 failed first (Exited with exit code 1)");
  // Not failures: a requeue stop, a labelled task line, srun's other errors.
  CHECK_FALSE(
      hpc::parse_srun_task_failure("srun: error: node01: task 0: Exited with exit code 75"));
  CHECK_FALSE(hpc::parse_srun_task_failure("1: srun: error: node02: task 3: Killed"));
  CHECK_FALSE(
      hpc::parse_srun_task_failure("srun: error: Timed out waiting for job step to complete"));
}

TEST_CASE("status's requeue line: the count and the bound", "[follow][status]") {
  CHECK(hpc::describe_requeues(1, 3) == "1 of at most 3 (job.max_requeues)");
  CHECK(hpc::describe_requeues(0, 0) == "0 of at most 0 (job.max_requeues)");
  CHECK(hpc::describe_requeues(2, -1) == "2");  // a job hpclaunch did not submit
}

TEST_CASE("follow: a killed rank is named in the FAILED line", "[follow]") {
  auto b = scripted("7", {{"RUNNING", 0, "0: step 1\n"},
                          {"RUNNING", 0,
                           "srun: error: node02: task 3: Killed\n"
                           "1: hpctrain: error: rank 1: the ddp step's collectives failed\n"
                           "srun: error: node01: tasks 0-1: Exited with exit code 1\n"},
                          {"FAILED", 0, "", 137}});
  std::ostringstream out, err;
  int code = hpc::follow_job(b, "7", fast(), out, err);
  INFO(err.str());
  CHECK(code == 137);
  CHECK(err.str().find("job 7 FAILED with exit code 137") != std::string::npos);
  CHECK(err.str().find("rank 3 on node02 failed first (Killed)") != std::string::npos);
}

TEST_CASE("follow: through a requeue on the same job id, the log goes on, exit 0",
          "[follow][requeue]") {
  auto b = scripted("8", {{"RUNNING", 0, "0: step 1\n"},
                          {"RUNNING", 0, "srun: error: node01: task 0: Exited with exit code 75\n"},
                          {"PENDING", 1, ""},
                          {"RUNNING", 1, "0: resumed from checkpoint\n"},
                          {"COMPLETED", 1, "0: step 9\n", 0}});
  auto o = fast();
  o.max_requeues = 3;
  std::ostringstream out, err;
  int code = hpc::follow_job(b, "8", o, out, err);
  INFO(err.str());
  CHECK(code == 0);
  CHECK(err.str().find(
            "job 8 REQUEUED (restart 1 of at most 3), now PENDING; following the same job 8") !=
        std::string::npos);
  CHECK(out.str().find("0: step 1\n") != std::string::npos);
  CHECK(out.str().find("0: step 9\n") != std::string::npos);
  CHECK(err.str().find("failed first") == std::string::npos);
}

TEST_CASE("follow: PREEMPTED then requeued by Slurm is followed on", "[follow][requeue]") {
  auto b = scripted("9", {{"RUNNING", 0, "0: step 1\n"},
                          {"PREEMPTED", 0, ""},
                          {"PENDING", 1, ""},
                          {"COMPLETED", 1, "0: done\n", 0}});
  std::ostringstream out, err;
  int code = hpc::follow_job(b, "9", fast(), out, err);
  INFO(err.str());
  CHECK(code == 0);
  CHECK(err.str().find("job 9 PREEMPTED; watching whether Slurm requeues it") != std::string::npos);
  CHECK(err.str().find("job 9 REQUEUED (restart 1), now PENDING") != std::string::npos);
  CHECK(err.str().find("COMPLETED") != std::string::npos);
}

TEST_CASE("follow: attaching to a job that was requeued before says its restart, not REQUEUED",
          "[follow][requeue]") {
  auto b = scripted("12", {{"RUNNING", 2, "0: step 1\n"}, {"COMPLETED", 2, "", 0}});
  auto o = fast();
  o.max_requeues = 3;
  std::ostringstream out, err;
  CHECK(hpc::follow_job(b, "12", o, out, err) == 0);
  INFO(err.str());
  CHECK(err.str().find("job 12 RUNNING on node[01-02], restart 2 of at most 3") !=
        std::string::npos);
  CHECK(err.str().find("REQUEUED") == std::string::npos);
}

TEST_CASE("follow: PREEMPTED for good ends with 126 after the settle time", "[follow][requeue]") {
  auto b = scripted("10", {{"RUNNING", 0, "0: step 1\n"}, {"PREEMPTED", 0, ""}});
  std::ostringstream out, err;
  int code = hpc::follow_job(b, "10", fast(), out, err);
  INFO(err.str());
  CHECK(code == hpc::follow_exit::kPreempted);
  CHECK(b.polls("10") > 2);  // it looked again before giving up
}

TEST_CASE("follow: a job that stopped for a requeue that did not happen says so",
          "[follow][requeue]") {
  auto b =
      scripted("11", {{"RUNNING", 0, "srun: error: node01: task 0: Exited with exit code 75\n"},
                      {"FAILED", 0, "", 75}});
  std::ostringstream out, err;
  int code = hpc::follow_job(b, "11", fast(), out, err);
  INFO(err.str());
  CHECK(code == 75);
  CHECK(err.str().find("stopped for a requeue (exit 75) that did not happen") != std::string::npos);
}

TEST_CASE("follow: a dependency that can never be satisfied ends the wait, job left pending",
          "[follow][dependency]") {
  auto b = scripted("12", {{"PENDING", 0, "", -1, "Dependency"},
                           {"PENDING", 0, "", -1, "DependencyNeverSatisfied"}});
  std::ostringstream out, err;
  int code = hpc::follow_job(b, "12", fast(), out, err);
  INFO(err.str());
  CHECK(code == hpc::follow_exit::kDependencyNeverSatisfied);
  CHECK(code == 76);
  CHECK(err.str().find("job 12 will never start") != std::string::npos);
  CHECK(err.str().find("Remove it: hpclaunch cancel 12") != std::string::npos);
  CHECK(b.cancelled.empty());
}

TEST_CASE("follow: a job the controller does not know for a moment is followed on",
          "[follow][lost]") {
  // A controller restart: two "Invalid job id" answers in the middle of the run.
  auto b = scripted("12", {{"RUNNING", 0, "0: step 1\n"},
                           {"GONE"},
                           {"GONE"},
                           {"RUNNING", 0, "0: step 2\n"},
                           {"COMPLETED", 0, "0: step 3\n", 0}});
  auto o = fast();
  std::ostringstream out, err;
  CHECK(hpc::follow_job(b, "12", o, out, err) == 0);
  INFO(err.str());
  CHECK(out.str() == "0: step 1\n0: step 2\n0: step 3\n");
  CHECK(err.str().find("job 12 is not known to the scheduler right now (slurm_load_jobs error: "
                       "Invalid job id specified); asking again for up to 60 s") !=
        std::string::npos);
  CHECK(err.str().find("job 12 is known again; following it") != std::string::npos);
  CHECK(err.str().find("COMPLETED") != std::string::npos);
}

TEST_CASE("follow: a job that stays unknown for the grace time is lost", "[follow][lost]") {
  auto b = scripted("13", {{"RUNNING", 0, "0: step 1\n"}, {"GONE"}});
  auto o = fast();
  o.lost_grace = 100ms;
  std::ostringstream out, err;
  CHECK(hpc::follow_job(b, "13", o, out, err) == hpc::follow_exit::kLost);
  CHECK(b.polls("13") > 3);  // asked again during the grace time
  CHECK(err.str().find("job 13 is not known to the scheduler (slurm_load_jobs error") !=
        std::string::npos);
}

TEST_CASE("follow: a job never seen (logs -f of an old id) is not waited for", "[follow][lost]") {
  auto b = scripted("14", {{"GONE"}});
  auto o = fast();  // just_submitted = false, the default grace of 60 s
  std::ostringstream out, err;
  CHECK(hpc::follow_job(b, "14", o, out, err) == hpc::follow_exit::kLost);
  CHECK(b.polls("14") == 1);
  // Right after a submit, the same answer is asked again first.
  auto c = scripted("15", {{"GONE"}, {"PENDING"}, {"COMPLETED", 0, "done\n", 0}});
  o.just_submitted = true;
  std::ostringstream out2, err2;
  CHECK(hpc::follow_job(c, "15", o, out2, err2) == 0);
  CHECK(out2.str() == "done\n");
}
