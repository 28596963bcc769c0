#include "backends/local_plan.h"

#include <signal.h>

#include <catch2/catch.hpp>

#include "backends/backend.h"
#include "backends/sbatch_options.h"
#include "error.h"

using hpc::LocalJob;
using hpc::LocalJobPlace;
using hpc::LocalSubmitContext;
using hpc::SubmitRequest;

namespace {

LocalSubmitContext context() {
  LocalSubmitContext c;
  c.submit_dir = "/home/ada/proj";
  c.runs_root = "/home/ada/proj/runs";
  c.cpus = 8;
  c.user = "ada";
  c.submit_host = "laptop";
  c.uid = 1000;
  c.gid = 100;
  c.max_restarts = 3;
  c.kill_wait_seconds = 7;
  c.submit_time = 1700000000.5;
  return c;
}

SubmitRequest request(const std::string& sbatch_lines, const std::string& job_name = "train") {
  SubmitRequest r;
  r.script = "#!/bin/bash\n" + sbatch_lines + "srun hpctrain\n";
  r.job_name = job_name;
  return r;
}

LocalJob plan(const SubmitRequest& r, const LocalSubmitContext& c = context(),
              const std::string& id = "17") {
  hpc::SbatchOptions o = hpc::parse_sbatch_options(r.script);
  return hpc::plan_local_job(r, o, c, hpc::place_local_job(r, o, c), id);
}

}  // namespace

TEST_CASE("local plan: run directory, script and default output under the runs root",
          "[local_plan]") {
  LocalJob job = plan(request(""));
  CHECK(job.job_id == "17");
  CHECK(job.job_name == "train");
  CHECK(job.run_dir == "/home/ada/proj/runs/train-17");
  CHECK(job.runs_root == "/home/ada/proj/runs");
  CHECK(job.script == "/home/ada/proj/runs/train-17/script.sbatch");
  CHECK(job.workdir == "/home/ada/proj");
  CHECK(job.stdout_path == "/home/ada/proj/runs/train-17/slurm-17.out");
  CHECK(job.stderr_path == job.stdout_path);
  CHECK(job.time_limit_seconds == -1);
  CHECK(job.requeue_allowed);
  CHECK(job.max_restarts == 3);
  CHECK(job.kill_wait_seconds == 7);
  CHECK(job.submit_time == 1700000000.5);
}

TEST_CASE("local plan: #SBATCH options become the job's limits and files", "[local_plan]") {
  LocalJob job =
      plan(request("#SBATCH --job-name=probe\n#SBATCH --time=0:02:00\n"
                   "#SBATCH --signal=B:USR1@30\n#SBATCH --output=logs/%x-%j.out\n"
                   "#SBATCH --error=/tmp/%u-%j.err\n#SBATCH --open-mode=append\n"
                   "#SBATCH --no-requeue\n#SBATCH --chdir=work\n"));
  CHECK(job.job_name == "probe");
  // The directory keeps the request's (the spec's) name; the job's name is #SBATCH's.
  CHECK(job.run_dir == "/home/ada/proj/runs/train-17");
  CHECK(job.stdout_path == "/home/ada/proj/runs/train-17/logs/probe-17.out");
  CHECK(job.stderr_path == "/tmp/ada-17.err");
  CHECK(job.time_limit_seconds == 120);
  CHECK(job.signal_number == SIGUSR1);
  CHECK(job.signal_seconds == 30);
  CHECK(job.signal_batch_only);
  CHECK(job.open_mode_append);
  CHECK_FALSE(job.requeue_allowed);
  CHECK(job.workdir == "/home/ada/proj/work");
  CHECK(job.env.at("SLURM_JOB_NAME") == "probe");
}

TEST_CASE("local plan: the request's paths win over #SBATCH and are made absolute",
          "[local_plan]") {
  SubmitRequest r = request("#SBATCH --output=ignored.out\n#SBATCH --chdir=/ignored\n");
  r.runs_root = "elsewhere/runs/";
  r.workdir = "../data";
  r.output = "%x.out";
  r.error = "err/%j.txt";
  LocalJob job = plan(r);
  CHECK(job.runs_root == "/home/ada/proj/elsewhere/runs");
  CHECK(job.run_dir == "/home/ada/proj/elsewhere/runs/train-17");
  CHECK(job.workdir == "/home/ada/data");
  CHECK(job.stdout_path == "/home/ada/proj/elsewhere/runs/train-17/train.out");
  CHECK(job.stderr_path == "/home/ada/proj/elsewhere/runs/train-17/err/17.txt");
  CHECK(job.env.at("HPCLAUNCH_LOCAL_RUNS_ROOT") == "/home/ada/proj/elsewhere/runs");
  CHECK(job.env.at("HPCLAUNCH_RUN_DIR_PREFIX") == "/home/ada/proj/elsewhere/runs/train-");
}

TEST_CASE("local plan: a one-node allocation's SLURM_* variables", "[local_plan]") {
  LocalJob job = plan(request("#SBATCH --ntasks-per-node=2\n#SBATCH --cpus-per-task=3\n"));
  const auto& env = job.env;
  CHECK(env.at("SLURM_JOB_ID") == "17");
  CHECK(env.at("SLURM_JOBID") == "17");
  CHECK(env.at("SLURM_JOB_NODELIST") == "localhost");
  CHECK(env.at("SLURM_JOB_NUM_NODES") == "1");
  CHECK(env.at("SLURM_NTASKS") == "2");
  CHECK(env.at("SLURM_TASKS_PER_NODE") == "2");
  CHECK(env.at("SLURM_CPUS_PER_TASK") == "3");
  CHECK(env.at("SLURM_CPUS_ON_NODE") == "6");
  CHECK(env.at("SLURM_SUBMIT_DIR") == "/home/ada/proj");
  CHECK(env.at("SLURM_SUBMIT_HOST") == "laptop");
  CHECK(env.at("SLURM_JOB_USER") == "ada");
  CHECK(env.at("SLURM_JOB_UID") == "1000");
  CHECK(env.at("SLURM_JOB_GID") == "100");
  CHECK(env.at("HPCLAUNCH_LOCAL_RUN_DIR") == job.run_dir);
  CHECK(env.count("SLURM_RESTART_COUNT") == 0);  // the supervisor sets it per run
}

TEST_CASE("local plan: tasks x cpus-per-task never exceeds the machine's CPUs", "[local_plan]") {
  LocalSubmitContext c = context();
  c.cpus = 4;
  SubmitRequest r = request("#SBATCH --ntasks=2\n#SBATCH --cpus-per-task=8\n");
  CHECK(plan(r, c).env.at("SLURM_CPUS_PER_TASK") == "2");
  c.cpus = 1;  // fewer CPUs than tasks: each task still gets one
  CHECK(plan(r, c).env.at("SLURM_CPUS_PER_TASK") == "1");
  CHECK(plan(r, c).env.at("SLURM_CPUS_ON_NODE") == "2");
}

TEST_CASE("local plan: what the local backend cannot run is refused before an id is taken",
          "[local_plan]") {
  LocalSubmitContext c = context();
  SubmitRequest two_nodes = request("#SBATCH --nodes=2\n");
  hpc::SbatchOptions o = hpc::parse_sbatch_options(two_nodes.script);
  CHECK_THROWS_AS(hpc::place_local_job(two_nodes, o, c), hpc::UserError);
  CHECK_THROWS_WITH(hpc::place_local_job(two_nodes, o, c),
                    Catch::Contains("the local backend runs one node"));

  for (const char* bad : {"../escape", "/etc/passwd", ""}) {
    SubmitRequest r = request("");
    r.files = {{bad, "x"}};
    CAPTURE(bad);
    CHECK_THROWS_AS(hpc::place_local_job(r, hpc::parse_sbatch_options(r.script), c),
                    hpc::BackendError);
  }
}

TEST_CASE("local plan: a job without a name is 'sbatch', as sbatch names it", "[local_plan]") {
  LocalJob job = plan(request("", ""));
  CHECK(job.job_name == "sbatch");
  CHECK(job.run_dir == "/home/ada/proj/runs/sbatch-17");
}
