// run_process: the launcher's run_command (common/subprocess_test.cc) plus the command line
// that a failed check shows.
#include "process.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

using hpc::test::ProcessOptions;
using hpc::test::run_process;

TEST_CASE("run_process names the command and how it ended in one line", "[process]") {
  auto r = run_process({"sh", "-c", "echo out; printf 'err\\nmore' >&2; exit 7"});
  CHECK(r.out == "out\n");
  CHECK(r.exit_code == 7);
  CHECK(r.command == "sh -c echo out; printf 'err\\nmore' >&2; exit 7");
  CHECK(r.summary() == "`" + r.command + "` exited 7; stderr: err more");

  ProcessOptions opts;
  opts.timeout = std::chrono::milliseconds(200);
  auto slow = run_process({"sleep", "30"}, opts);
  CHECK(slow.summary() == "`sleep 30` timed out killed by signal 9");

  auto missing = run_process({"hpc-no-such-program-here"});
  CHECK(missing.summary() ==
        "`hpc-no-such-program-here` could not start: No such file or directory");
}
