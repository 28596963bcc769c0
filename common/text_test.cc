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

TEST_CASE("plain numbers: one rule for flags, --set and files", "[text]") {
  for (const char* ok : {"0", "7", "10", "-1", "9223372036854775807", "-9223372036854775808"})
    CHECK(hpc::is_plain_whole_number(ok));
  for (const char* bad :
       {"", "-", "+2", " 2", "2 ", "\t2", "010", "00", "-01", "0x10", "1e3", "2.0", "1_000", "１"})
    CHECK_FALSE(hpc::is_plain_whole_number(bad));
  CHECK(hpc::parse_plain_whole_number("-42") == -42);
  CHECK_FALSE(hpc::parse_plain_whole_number("9223372036854775808").has_value());
  CHECK_FALSE(hpc::parse_plain_whole_number("010").has_value());

  for (const char* ok : {"0", "0.5", "2", "2.25", "-1.5", "10.0"})
    CHECK(hpc::is_plain_decimal_number(ok));
  for (const char* bad : {".5", "5.", "00.5", "+1.5", "1e3", "inf", "nan", "0x1p3", "1. 5", ""})
    CHECK_FALSE(hpc::is_plain_decimal_number(bad));
  CHECK(hpc::parse_plain_decimal_number("0.25") == 0.25);

  CHECK(hpc::plain_number_fix("010") ==
        "write 10 (plain decimal digits: no '+', blanks, leading zeros, 0x or exponent)");
  CHECK(hpc::plain_number_fix("+2").rfind("write 2 (", 0) == 0);
  CHECK(hpc::plain_number_fix(" -02 ").rfind("write -2 (", 0) == 0);
  CHECK(hpc::plain_number_fix("0x10") ==
        "write a number in plain decimal digits (no '+', blanks, leading zeros, 0x or "
        "exponent), e.g. 4");
}
