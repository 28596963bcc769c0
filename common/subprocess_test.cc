// run_command: how the launcher (and the integration tests, through run_process) run programs.
#include "subprocess.h"

#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

using hpc::CommandOptions;
using hpc::run_command;

TEST_CASE("run_command captures stdout, stderr and the exit status", "[subprocess]") {
  auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 7"});
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  CHECK(r.exit_code == 7);
  CHECK_FALSE(r.ok());
  CHECK(r.summary("sh") == "sh exited with 7: err");
}

TEST_CASE("run_command passes arguments as written, without a shell", "[subprocess]") {
  const std::string tricky = "$(touch /tmp/hpc-subprocess-test-x) 'a b' ; *";
  auto r = run_command({"printf", "%s", tricky});
  CHECK(r.ok());
  CHECK(r.out == tricky);
}

TEST_CASE("run_command feeds stdin, large amounts included", "[subprocess]") {
  CommandOptions opts;
  opts.stdin_data = std::string(1 << 20, 'x') + "\nend\n";
  auto r = run_command({"tail", "-n", "1"}, opts);
  CHECK(r.ok());
  CHECK(r.out == "end\n");
  // Without stdin_data the program reads end of file at once, never our terminal.
  CHECK(run_command({"cat"}).out.empty());
  // A program that ignores its input must not end us with SIGPIPE.
  opts.stdin_data = std::string(4 << 20, 'y');
  CHECK(run_command({"true"}, opts).ok());
}

TEST_CASE("run_command reads both pipes while the program runs", "[subprocess]") {
  // 1 MiB on each stream: a reader that drained one pipe at a time would deadlock.
  auto r = run_command(
      {"sh", "-c", "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2; echo done >&2"});
  CHECK(r.ok());
  CHECK(r.out.size() == 1048576);
  CHECK(r.err.size() == 1048576 + 5);
}

TEST_CASE("run_command kills a program and its children after the timeout", "[subprocess]") {
  CommandOptions opts;
  opts.timeout = std::chrono::milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  auto r = run_command({"sh", "-c", "sleep 30 & sleep 30; echo never"}, opts);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(r.timed_out);
  CHECK_FALSE(r.ok());
  CHECK(r.term_signal == 9);
  CHECK(r.out.empty());
  CHECK(took < std::chrono::seconds(5));
  CHECK(r.summary("sh") == "sh timed out");
}

TEST_CASE("run_command: the timeout holds also for a program that closed its output",
          "[subprocess]") {
  CommandOptions opts;
  opts.timeout = std::chrono::milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  auto r = run_command({"sh", "-c", "echo bye; exec >&- 2>&-; sleep 30"}, opts);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(r.out == "bye\n");
  CHECK(r.timed_out);
  CHECK(r.term_signal == 9);
  CHECK(took < std::chrono::seconds(5));
}

TEST_CASE("run_command reports a program that cannot start", "[subprocess]") {
  auto r = run_command({"hpc-no-such-program-here"});
  CHECK_FALSE(r.ok());
  CHECK(r.spawn_error == "No such file or directory");
  CHECK(r.summary("hpc-no-such-program-here") ==
        "hpc-no-such-program-here: No such file or directory");
  CHECK_THROWS_AS(run_command({}), std::invalid_argument);
}

TEST_CASE("run_command sets environment variables and the working directory", "[subprocess]") {
  CommandOptions opts;
  opts.env = {"HPC_SUBPROCESS_TEST=one two", "PATH=/usr/bin:/bin"};
  opts.cwd = "/";
  auto r = run_command({"sh", "-c", "echo \"$HPC_SUBPROCESS_TEST|$PATH|$(pwd)\""}, opts);
  CHECK(r.out == "one two|/usr/bin:/bin|/\n");
  // merged_environment: ours, with the overrides replacing entries of the same name.
  auto env = hpc::merged_environment({"PATH=/nowhere", "HPC_SUBPROCESS_NEW=1"});
  int paths = 0;
  for (const auto& e : env) paths += e.rfind("PATH=", 0) == 0 ? 1 : 0;
  CHECK(paths == 1);
  CHECK(std::find(env.begin(), env.end(), "PATH=/nowhere") != env.end());
  CHECK(std::find(env.begin(), env.end(), "HPC_SUBPROCESS_NEW=1") != env.end());
}

TEST_CASE("run_command with env_only gives the program exactly that environment", "[subprocess]") {
  CommandOptions opts;
  opts.env = {"ONLY=this"};
  opts.env_only = true;
  auto r = run_command({"/usr/bin/env"}, opts);
  CHECK(r.ok());
  CHECK(r.out == "ONLY=this\n");
}

TEST_CASE("run_command looks argv[0] up in the PATH the program gets", "[subprocess]") {
  CommandOptions opts;
  opts.env = {"PATH=/nonexistent-hpc-dir"};
  opts.env_only = true;
  auto r = run_command({"sh", "-c", "true"}, opts);  // sh is in our PATH, not in its own
  CHECK(r.spawn_error == "No such file or directory");
  opts.env = {"PATH=/nonexistent-hpc-dir:/bin"};
  CHECK(run_command({"sh", "-c", "true"}, opts).ok());
  CHECK(hpc::find_in_path("sh", "/nonexistent-hpc-dir:/bin") == "/bin/sh");
  CHECK(hpc::find_in_path("hpc-no-such-program-here", "/bin:/usr/bin").empty());
}

// Issue 35: a command must not outlive hpclaunch. A signal handler calls
// kill_running_commands (end_commands_with_this_process); here it is called directly.
TEST_CASE("kill_running_commands ends a running command's whole process group", "[subprocess]") {
  hpc::CommandResult r;
  auto start = std::chrono::steady_clock::now();
  std::thread runner([&] { r = run_command({"sh", "-c", "sleep 30 & sleep 30; wait"}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  hpc::kill_running_commands();
  runner.join();
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 5);
  CHECK(r.term_signal == SIGKILL);
}

TEST_CASE("run_command reports a working directory that is not there", "[subprocess]") {
  CommandOptions o;
  o.cwd = "/nonexistent-hpc-dir";
  auto r = run_command({"true"}, o);
  CHECK(r.spawn_error == "No such file or directory");
}
