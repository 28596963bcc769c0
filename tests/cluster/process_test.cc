// run_process, the integration tests' way to run programs: no shell, stdin, timeouts.
#include "process.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

using hpc::test::ProcessOptions;
using hpc::test::run_process;

TEST_CASE("run_process captures stdout, stderr and the exit status", "[process]") {
  const auto r = run_process({"sh", "-c", "echo out; echo err >&2; exit 7"});
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  CHECK(r.exit_code == 7);
  CHECK_FALSE(r.ok());
  CHECK(r.summary().find("exited 7; stderr: err") != std::string::npos);
}

TEST_CASE("run_process passes arguments as written, without a shell", "[process]") {
  const std::string tricky = "$(touch /tmp/hpc-process-test-x) 'a b' ; *";
  const auto r = run_process({"printf", "%s", tricky});
  CHECK(r.ok());
  CHECK(r.out == tricky);
}

TEST_CASE("run_process feeds stdin, large amounts included", "[process]") {
  ProcessOptions opts;
  opts.stdin_data = std::string(1 << 20, 'x') + "\nend\n";
  const auto r = run_process({"tail", "-n", "1"}, opts);
  CHECK(r.ok());
  CHECK(r.out == "end\n");

  // Without stdin_data the program reads /dev/null, never the test runner's terminal.
  CHECK(run_process({"cat"}).out.empty());
  // A program that ignores its input must not kill us with SIGPIPE.
  opts.stdin_data = std::string(4 << 20, 'y');
  CHECK(run_process({"true"}, opts).ok());
}

TEST_CASE("run_process reads both pipes while the program runs", "[process]") {
  // 1 MiB on each stream: a reader that drained one pipe at a time would deadlock.
  const auto r = run_process(
      {"sh", "-c", "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2; echo done >&2"});
  CHECK(r.ok());
  CHECK(r.out.size() == 1048576);
  CHECK(r.err.size() == 1048576 + 5);
}

TEST_CASE("run_process kills a program and its children after the timeout", "[process]") {
  ProcessOptions opts;
  opts.timeout = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_process({"sh", "-c", "sleep 30 & sleep 30; echo never"}, opts);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(r.timed_out);
  CHECK_FALSE(r.ok());
  CHECK(r.term_signal == 9);
  CHECK(r.out.empty());
  CHECK(took < std::chrono::seconds(5));
}

TEST_CASE("run_process reports a program that cannot start", "[process]") {
  const auto r = run_process({"hpc-no-such-program-here"});
  CHECK_FALSE(r.ok());
  CHECK(r.spawn_error == "No such file or directory");
  CHECK(r.summary().find("could not start") != std::string::npos);
}

TEST_CASE("run_process sets environment variables and the working directory", "[process]") {
  ProcessOptions opts;
  opts.env = {"HPC_PROCESS_TEST=one two", "PATH=/usr/bin:/bin"};
  opts.cwd = "/";
  const auto r = run_process({"sh", "-c", "echo \"$HPC_PROCESS_TEST|$PATH|$(pwd)\""}, opts);
  CHECK(r.out == "one two|/usr/bin:/bin|/\n");
}
