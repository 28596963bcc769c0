#include "text.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "posix_io.h"

TEST_CASE("trim and first_line: the line of an error text worth quoting", "[text]") {
  CHECK(hpc::trim("  a b \t\r\n") == "a b");
  CHECK(hpc::trim(" \n\t") == "");
  CHECK(hpc::first_line("\n  \nsbatch: error: Batch job submission failed  \nmore\n") ==
        "sbatch: error: Batch job submission failed");
  CHECK(hpc::first_line("one line") == "one line");
  CHECK(hpc::first_line("\n\n") == "");
  CHECK(hpc::first_line("") == "");
}

TEST_CASE("all_digits and starts_with", "[text]") {
  CHECK(hpc::all_digits("12345"));
  CHECK_FALSE(hpc::all_digits(""));
  CHECK_FALSE(hpc::all_digits("12a"));
  CHECK_FALSE(hpc::all_digits("-1"));
  CHECK(hpc::starts_with("SLURM_JOB_ID", "SLURM_"));
  CHECK_FALSE(hpc::starts_with("SLUR", "SLURM_"));
}

TEST_CASE("signal_from_name: Slurm's and ssh's ways of naming a signal", "[text]") {
  CHECK(hpc::signal_from_name("USR1") == SIGUSR1);
  CHECK(hpc::signal_from_name("SIGTERM") == SIGTERM);
  CHECK(hpc::signal_from_name("term") == SIGTERM);
  CHECK(hpc::signal_from_name("9") == SIGKILL);
  CHECK(hpc::signal_from_name("SEGV") == SIGSEGV);
  CHECK(hpc::signal_from_name("FOO") == 0);
  CHECK(hpc::signal_from_name("0") == 0);
  CHECK(hpc::signal_from_name("65") == 0);
}

TEST_CASE("write_all writes everything, and says when the descriptor refused", "[text]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  CHECK(hpc::write_all(fds[1], "hello"));
  char buf[8] = {};
  CHECK(read(fds[0], buf, sizeof buf) == 5);
  CHECK(std::string(buf) == "hello");
  close(fds[0]);
  auto previous = signal(SIGPIPE, SIG_IGN);
  CHECK_FALSE(hpc::write_all(fds[1], "to nobody"));
  signal(SIGPIPE, previous);
  close(fds[1]);
}
