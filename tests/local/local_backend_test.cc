// The local backend end to end: scripts rendered by the built hpclaunch run on this machine
// through the supervisor and the srun/scontrol shims, with no Slurm anywhere.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <thread>

#include "error.h"
#include "local_harness.h"

using namespace local_test;

namespace {

std::string field(const std::string& line, const std::string& name) {
  std::smatch m;
  std::regex re("(?:^|\\s)" + name + "=(\\S*)");
  return std::regex_search(line, m, re) ? m[1].str() : "<missing>";
}

// The path of the output and the whole text once the job is over.
std::string output_of(const hpc::JobStatus& s) { return read_file(s.stdout_path); }

}  // namespace

TEST_CASE("a rendered 1n2g script runs: ranks, rendezvous, labels, the run directory") {
  Sandbox box;
  auto backend = box.backend();
  std::string script = box.render("1n2g", "ok");
  auto submitted = backend.submit(box.request(script));
  REQUIRE(!submitted.job_id.empty());
  CHECK(submitted.run_dir == (box.runs() / ("hpclaunch-" + submitted.job_id)).string());
  CHECK(read_file(fs::path(submitted.run_dir) / "script.sbatch") == script);
  CHECK((fs::status(fs::path(submitted.run_dir) / "script.sbatch").permissions() &
         fs::perms::owner_exec) != fs::perms::none);
  CHECK(read_file(fs::path(submitted.run_dir) / "spec.json") == "{}\n");
  CHECK(fs::read_symlink(fs::path(submitted.run_dir) / "bin" / "srun") == hpclaunch_binary());

  auto s = wait_for_end(backend, submitted.job_id);
  std::string out = output_of(s);
  INFO(out);
  REQUIRE(s.state == "COMPLETED");
  CHECK(s.exit_code == 0);
  CHECK(s.nodes == "localhost");
  CHECK(s.elapsed_seconds >= 0);
  // --output=%x-%j.out, relative: in the run directory; no --error: stderr goes there too. %x
  // is the script's job name, from the program when job.name is unset: the probe's.
  CHECK(s.stdout_path == submitted.run_dir + "/probe-" + submitted.job_id + ".out");
  CHECK(s.stderr_path == s.stdout_path);

  std::string port = std::to_string(20000 + std::stol(submitted.job_id) % 40000);
  auto probes = lines_with(out, "probe rank=");
  std::set<std::string> ranks;
  for (const auto& line : lines_with(out, "probe rank=")) {
    if (line.find("on stderr") != std::string::npos) continue;
    std::string rank = field(line, "rank");
    ranks.insert(rank);
    CHECK(line.rfind(rank + ": probe", 0) == 0);  // srun --label
    CHECK(field(line, "local") == rank);
    CHECK(field(line, "node") == "0");
    CHECK(field(line, "ntasks") == "2");
    CHECK(field(line, "master") == "127.0.0.1:" + port);
    CHECK(field(line, "job") == submitted.job_id);
    CHECK(field(line, "restart") == "0");
    CHECK(field(line, "cuda") == "none");
    // OMP_NUM_THREADS from SLURM_CPUS_PER_TASK: 8 asked, clamped so 2 tasks fit this machine.
    int omp = std::stoi(field(line, "omp"));
    CHECK(field(line, "cpus") == std::to_string(omp));
    unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    CHECK(omp == std::max(1, std::min(8, static_cast<int>(cpus) / 2)));
  }
  CHECK(ranks == std::set<std::string>{"0", "1"});
  CHECK(lines_with(out, "on stderr").size() == 2);
  CHECK(out.find("hpclaunch: job " + submitted.job_id +
                 ": 1 node(s), MASTER_ADDR=127.0.0.1 (localhost)") != std::string::npos);

  // read_log reads the same file, from an offset.
  auto chunk = backend.read_log(s.stdout_path, 0, 1 << 20);
  CHECK(chunk.exists);
  CHECK(chunk.data == out);
  auto rest = backend.read_log(s.stdout_path, chunk.next_offset, 1 << 20);
  CHECK(rest.data.empty());
  // The job leaves nothing running and its state on disk.
  auto state = hpc::read_local_state(submitted.run_dir);
  REQUIRE(state);
  CHECK(hpc::processes_in_session(state->pgid).empty());
  CHECK(state->end_time >= state->start_time);
}

TEST_CASE(
    "a failing rank fails the job, kill-on-bad-exit ends the other rank: 143, as Slurm's srun") {
  Sandbox box;
  auto backend = box.backend();
  auto submitted = backend.submit(box.request(box.render("1n2g", "fail")));
  auto start = std::chrono::steady_clock::now();
  auto s = wait_for_end(backend, submitted.job_id);
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string out = output_of(s);
  INFO(out);
  CHECK(s.state == "FAILED");
  // srun's status is that of the task it terminated (Slurm 22.05 does the same); the log names
  // the task that failed first.
  CHECK(s.exit_code == 143);
  CHECK(s.exit_signal == 0);
  CHECK(out.find("task 1: Exited with exit code 3") < out.find("task 0: Terminated"));
  CHECK(out.find("survived") == std::string::npos);  // rank 0 slept 30 s: it was killed
  CHECK(seconds < 15);
  auto state = hpc::read_local_state(submitted.run_dir);
  REQUIRE(state);
  CHECK(hpc::processes_in_session(state->pgid).empty());
}

TEST_CASE("cancel ends every process of the job within seconds, cancelling again is a no-op") {
  Sandbox box;
  auto backend = box.backend();
  auto submitted = backend.submit(box.request(box.render("1n2g", "sleep")));
  auto running = backend.status(submitted.job_id);
  CHECK(running.state == "RUNNING");
  REQUIRE(wait_for_text(running.stdout_path, "probe rank=", 4));  // both ranks up, both streams
  auto state = hpc::read_local_state(submitted.run_dir);
  REQUIRE(state);
  REQUIRE(state->pgid > 0);
  CHECK(hpc::processes_in_session(state->pgid).size() >= 4);  // bash, srun, 2 probes (+ sleeps)

  auto start = std::chrono::steady_clock::now();
  backend.cancel(submitted.job_id);
  auto s = wait_for_end(backend, submitted.job_id, std::chrono::seconds(10));
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string out = output_of(s);
  INFO(out);
  CHECK(s.state == "CANCELLED");
  CHECK(s.exit_signal == 15);
  CHECK(seconds < 4);
  CHECK(out.find("*** JOB " + submitted.job_id + " ON localhost CANCELLED AT") !=
        std::string::npos);
  CHECK(out.find("survived") == std::string::npos);
  CHECK(hpc::processes_in_session(state->pgid).empty());
  CHECK(kill(-state->pgid, 0) != 0);  // not even the process group is left

  backend.cancel(submitted.job_id);
  CHECK(backend.status(submitted.job_id).state == "CANCELLED");
}

TEST_CASE("status and cancel of a job that is not there") {
  Sandbox box;
  auto backend = box.backend();
  auto s = backend.status("12345");
  CHECK_FALSE(s.found);
  CHECK_THROWS_AS(backend.cancel("12345"), hpc::BackendError);
  CHECK_FALSE(backend.status("../etc").found);
}

TEST_CASE("concurrent submits get distinct job ids") {
  Sandbox box;
  const std::string script =
      "#!/bin/bash\n#SBATCH --job-name=many\n#SBATCH --output=o-%j.txt\necho \"job "
      "$SLURM_JOB_ID\"\n";
  constexpr int kThreads = 6;
  std::vector<std::string> ids(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      try {
        auto backend = box.backend();
        auto request = box.request(script);
        request.job_name = "many";
        ids[static_cast<size_t>(i)] = backend.submit(request).job_id;
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(i)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) CHECK(e.empty());
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == kThreads);
  auto backend = box.backend();
  for (const auto& id : ids) {
    auto s = wait_for_end(backend, id);
    CHECK(s.state == "COMPLETED");
    CHECK(read_file(s.stdout_path) == "job " + id + "\n");
  }
}

TEST_CASE("a 2-node script is refused as bad input, nothing submitted") {
  Sandbox box;
  auto backend = box.backend();
  std::string script = box.render("2n2g", "ok");
  CHECK_THROWS_AS(backend.submit(box.request(script)), hpc::UserError);
  CHECK_THROWS_WITH(
      backend.submit(box.request(script)),
      Catch::Contains("the local backend runs one node; use a 1nXg preset or a Slurm backend"));
  CHECK(fs::is_empty(box.runs()));
}

TEST_CASE("bad #SBATCH values and a missing output directory are refused before anything runs") {
  Sandbox box;
  auto backend = box.backend();
  CHECK_THROWS_WITH(backend.submit(box.request("#!/bin/bash\n#SBATCH --time=later\necho\n")),
                    Catch::Contains("batch script:2"));
  auto request = box.request("#!/bin/bash\necho\n");
  request.output = (box.root() / "no-such-dir" / "x.out").string();
  CHECK_THROWS_WITH(backend.submit(request), Catch::Contains("does not exist"));
  request = box.request("#!/bin/bash\necho\n");
  request.workdir = (box.root() / "missing").string();
  CHECK_THROWS_AS(backend.submit(request), hpc::UserError);
}

TEST_CASE("output and error patterns: separate files, absolute paths, Slurm's default name") {
  Sandbox box;
  auto backend = box.backend();
  auto request =
      box.request("#!/bin/bash\n#SBATCH --job-name=pat\necho out; echo err >&2; exit 4\n");
  request.output = (box.root() / "logs-%x-%j.out").string();
  request.error = "err-%j.txt";
  auto submitted = backend.submit(request);
  auto s = wait_for_end(backend, submitted.job_id);
  CHECK(s.state == "FAILED");
  CHECK(s.exit_code == 4);
  CHECK(s.stdout_path == (box.root() / ("logs-pat-" + submitted.job_id + ".out")).string());
  CHECK(s.stderr_path == submitted.run_dir + "/err-" + submitted.job_id + ".txt");
  CHECK(read_file(s.stdout_path) == "out\n");
  CHECK(read_file(s.stderr_path) == "err\n");

  auto plain =
      backend.submit(box.request("#!/bin/bash\necho \"$SLURM_JOB_NAME $SLURM_NTASKS "
                                 "$SLURM_JOB_NUM_NODES $SLURM_SUBMIT_DIR $(pwd)\"\n"));
  auto p = wait_for_end(backend, plain.job_id);
  CHECK(p.state == "COMPLETED");
  CHECK(p.stdout_path == plain.run_dir + "/slurm-" + plain.job_id + ".out");
  std::string cwd = fs::current_path().string();
  CHECK(read_file(p.stdout_path) == "hpclaunch 1 1 " + cwd + " " + box.work().string() + "\n");
}

TEST_CASE("the job outlives the process that submitted it, and its Ctrl-C") {
  Sandbox box;
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  std::string script = box.render("1n2g", "short");
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);  // not Catch2's handlers: this process stands for a plain hpclaunch
    signal(SIGTERM, SIG_DFL);
    close(pipe_fds[0]);
    try {
      auto backend = box.backend();
      std::string id = backend.submit(box.request(script)).job_id + "\n";
      if (write(pipe_fds[1], id.data(), id.size()) < 0) _exit(2);
    } catch (...) {
      _exit(1);
    }
    close(pipe_fds[1]);
    pause();
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string id;
  char c;
  while (read(pipe_fds[0], &c, 1) == 1 && c != '\n') id += c;
  close(pipe_fds[0]);
  REQUIRE(!id.empty());
  // What a terminal's Ctrl-C does to the submitting process group, then a hard kill.
  kill(-child, SIGINT);
  kill(-child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);

  auto backend = box.backend();
  CHECK(backend.status(id).state == "RUNNING");
  auto s = wait_for_end(backend, id);
  std::string out = output_of(s);
  INFO(out);
  CHECK(s.state == "COMPLETED");
  CHECK(lines_with(out, "done").size() == 2);
}

// A 1n2g job of sleeping probes whose supervisor was then killed (SIGKILL): its state as the
// supervisor last wrote it (its session's id: pgid).
hpc::LocalJobState kill_supervisor_of_running_job(Sandbox& box, hpc::LocalBackend& backend,
                                                  hpc::SubmitResult& submitted) {
  submitted = backend.submit(box.request(box.render("1n2g", "sleep")));
  auto state = hpc::read_local_state(submitted.run_dir);
  REQUIRE(state);
  REQUIRE(wait_for_text(backend.status(submitted.job_id).stdout_path, "probe rank=", 2));
  REQUIRE(kill(state->supervisor_pid, SIGKILL) == 0);
  return *state;
}

// Issue 35: status said FAILED and cancel "already ended" while the job's processes ran on.
TEST_CASE("a supervisor that died: status says what still runs, and cancel ends all of it") {
  Sandbox box;
  auto backend = box.backend();
  hpc::SubmitResult submitted;
  const hpc::LocalJobState state = kill_supervisor_of_running_job(box, backend, submitted);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const size_t left = hpc::processes_in_session(state.pgid).size();
  REQUIRE(left >= 4);  // the job itself still runs: bash, srun, 2 probes
  hpc::JobStatus s = backend.status(submitted.job_id);
  CHECK(s.state == "RUNNING");
  CHECK_FALSE(s.terminal());
  CHECK_THAT(s.detail, Catch::Contains("the local supervisor died") &&
                           Catch::Contains("process(es) of the job still run"));
  backend.cancel(submitted.job_id);
  // (Zombies may stay: with the supervisor gone, their parent is init, which in a container
  // may not reap them; they run nothing.)
  CHECK(hpc::processes_in_session(state.pgid).empty());
  s = backend.status(submitted.job_id);
  CHECK(s.state == "CANCELLED");
  CHECK(s.terminal());
}

// With nothing of the job left, a dead supervisor's job is FAILED, as before.
TEST_CASE("a supervisor that died with its job is reported FAILED") {
  Sandbox box;
  auto backend = box.backend();
  hpc::SubmitResult submitted;
  const hpc::LocalJobState state = kill_supervisor_of_running_job(box, backend, submitted);
  hpc::signal_session(state.pgid, SIGKILL);
  for (int i = 0; i < 100 && !hpc::processes_in_session(state.pgid).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  hpc::JobStatus s = wait_for_end(backend, submitted.job_id);
  CHECK(s.state == "FAILED");
  CHECK(s.detail == "local supervisor died");
}

TEST_CASE("time limit: USR1 to the batch shell before it, TIMEOUT at it") {
  // shape.time=0:04 is 4 seconds (minutes:seconds); USR1 comes 2 s before the limit.
  Sandbox box;
  auto backend = box.backend();
  auto submitted = backend.submit(
      box.request(box.render("1n2g", "usr1", {"shape.time=0:04", "job.signal_seconds=2"})));
  auto s = wait_for_end(backend, submitted.job_id, std::chrono::seconds(20));
  std::string out = output_of(s);
  INFO(out);
  CHECK(s.state == "TIMEOUT");
  CHECK(out.find("hpclaunch: USR1: asking the tasks to checkpoint") != std::string::npos);
  // Each rank got the USR1 before the limit. At the limit the batch shell's TERM trap forwards
  // USR1 again while the tasks get their own TERM: whether they print it once more before they
  // die is a race (it did under a loaded CI run), so only what came before the limit counts.
  const size_t limit = out.find("CANCELLED AT");
  REQUIRE(limit != std::string::npos);
  CHECK(lines_with(out.substr(0, limit), "got USR1").size() == 2);
  CHECK(out.find("DUE TO TIME LIMIT") != std::string::npos);
  CHECK(out.find("survived") == std::string::npos);
  CHECK(s.elapsed_seconds >= 4);
  CHECK(s.elapsed_seconds <= 8);
  auto state = hpc::read_local_state(submitted.run_dir);
  REQUIRE(state);
  CHECK(hpc::processes_in_session(state->pgid).empty());
}

TEST_CASE(
    "requeue: USR1, checkpoint, scontrol requeue, the script runs again with "
    "SLURM_RESTART_COUNT=1") {
  Sandbox box;
  auto backend = box.backend();
  auto submitted = backend.submit(box.request(box.render(
      "1n2g", "requeue", {"shape.time=0:04", "job.signal_seconds=2", "job.max_requeues=1"})));
  auto s = wait_for_end(backend, submitted.job_id, std::chrono::seconds(20));
  std::string out = output_of(s);
  INFO(out);
  CHECK(s.state == "COMPLETED");
  CHECK(s.restarts == 1);
  CHECK(lines_with(out, "probe rank=0 checkpoint").size() == 1);
  CHECK(lines_with(out, "probe rank=1 checkpoint").size() == 1);
  CHECK(lines_with(out, "resumed").size() == 2);
  CHECK(lines_with(out, "restart=1").size() == 2);
  CHECK(out.find("requeueing job " + submitted.job_id + " (restart 1 of at most 1)") !=
        std::string::npos);
  auto state = hpc::read_local_state(submitted.run_dir);
  REQUIRE(state);
  CHECK(state->restarts == 1);
  CHECK(state->max_restarts == 5);
}

TEST_CASE(
    "requeue bound reached: the tasks stop with 75, the script says so, the job FAILS with 75") {
  Sandbox box;
  auto backend = box.backend();
  auto submitted = backend.submit(box.request(box.render(
      "1n2g", "requeue", {"shape.time=0:04", "job.signal_seconds=2", "job.max_requeues=0"})));
  auto s = wait_for_end(backend, submitted.job_id, std::chrono::seconds(20));
  std::string out = output_of(s);
  INFO(out);
  CHECK(s.state == "FAILED");
  CHECK(s.exit_code == 75);
  CHECK(s.restarts == 0);
  CHECK(lines_with(out, "checkpoint").size() >= 2);
  CHECK(
      out.find(
          "stopped for a requeue, but it was requeued 0 time(s) already (job.max_requeues = 0)") !=
      std::string::npos);
  CHECK(out.find("resumed") == std::string::npos);
}

TEST_CASE("cancel: a job that ignores SIGTERM gets SIGKILL after KillWait") {
  Sandbox box;
  hpc::LocalBackendOptions options;
  options.kill_wait_seconds = 1;
  auto backend = box.backend(options);
  auto submitted =
      backend.submit(box.request("#!/bin/bash\n#SBATCH --output=out.txt\ntrap '' TERM\necho "
                                 "started\nsleep 30 &\nwait\necho survived\n"));
  auto running = backend.status(submitted.job_id);
  REQUIRE(wait_for_text(running.stdout_path, "started", 1));
  auto state = hpc::read_local_state(submitted.run_dir);
  REQUIRE(state);
  auto start = std::chrono::steady_clock::now();
  backend.cancel(submitted.job_id);
  auto s = wait_for_end(backend, submitted.job_id, std::chrono::seconds(10));
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(s.state == "CANCELLED");
  CHECK(seconds >= 0.9);
  CHECK(seconds < 5);
  CHECK(read_file(s.stdout_path).find("survived") == std::string::npos);
  CHECK(hpc::processes_in_session(state->pgid).empty());
}

TEST_CASE("scontrol requeue is bounded by the restart limit and refused for --no-requeue") {
  Sandbox box;
  hpc::LocalBackendOptions options;
  options.max_restarts = 2;
  auto backend = box.backend(options);
  // A script that asks for a requeue on every run: it runs 1 + 2 times.
  auto submitted = backend.submit(
      box.request("#!/bin/bash\n#SBATCH --output=out.txt\n#SBATCH --open-mode=append\n"
                  "echo \"run $SLURM_RESTART_COUNT\"\nscontrol requeue \"$SLURM_JOB_ID\" || echo "
                  "\"refused $?\"\n"));
  auto s = wait_for_end(backend, submitted.job_id);
  std::string out = read_file(s.stdout_path);
  INFO(out);
  CHECK(s.state == "COMPLETED");
  CHECK(s.restarts == 2);
  CHECK(lines_with(out, "run ").size() == 3);
  CHECK(lines_with(out, "run 2").size() == 1);
  CHECK(lines_with(out, "refused 1").size() == 1);
  auto state = hpc::read_local_state(submitted.run_dir);
  REQUIRE(state);
  CHECK(state->max_restarts == 2);

  auto no_requeue =
      backend.submit(box.request("#!/bin/bash\n#SBATCH --no-requeue\nscontrol requeue "
                                 "\"$SLURM_JOB_ID\" || echo \"refused $?\"\n"));
  auto n = wait_for_end(backend, no_requeue.job_id);
  CHECK(n.state == "COMPLETED");
  CHECK(n.restarts == 0);
  CHECK(lines_with(read_file(n.stdout_path), "refused 1").size() == 1);
}
