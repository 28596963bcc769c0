// What the hostile-output tests share (hostile_outputs_test.cc, hostile_names_test.cc,
// hostile_jobs_test.cc): targets a file list cannot make (FIFOs, links, sockets, device nodes),
// a bad-input case that makes them first, and running hpclaunch with its standard output on a
// descriptor the test chooses (a pipe nobody reads, /dev/full). docs/security.md says which
// rule each case checks.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "bad_input.h"
#include "harness.h"

namespace cli_test {

// A value a user might put into any field, meant as text: command substitution, quotes,
// backslashes, globs, newlines, option look-alikes, template braces.
struct Hostile {
  std::string label;
  std::string value;
};
// "{root}" in a value is replaced by `root`, so a canary with an absolute path lands where the
// test looks (hostile_values_test.cc, hostile_containers_test.cc).
std::vector<Hostile> hostile_values(const std::string& root);

// Special files at `rel` (relative to the sandbox root). make_device returns false where the
// kernel refuses mknod (not root, or a container without CAP_MKNOD): the caller skips.
void make_fifo(const Sandbox& sb, const std::string& rel);
void make_link(const Sandbox& sb, const std::string& rel, const std::string& target);
void make_socket(const Sandbox& sb, const std::string& rel);
bool make_device(const Sandbox& sb, const std::string& rel, bool block);

// A bad-input case (bad_input.h: exit 2, one line, the fix, nothing written) whose sandbox
// `prepare` sets up first.
struct PreparedCase {
  BadCase c;
  Prepare prepare;
};
void check_all_prepared(const std::vector<PreparedCase>& cases);

// hpclaunch ARGS in sb.work() with sb.env(), stdin /dev/null, stdout on `stdout_fd` (the caller
// keeps and closes it), stderr captured; killed after `timeout`.
Run hpclaunch_with_stdout(const Sandbox& sb, const std::vector<std::string>& args, int stdout_fd,
                          std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A results.csv: the header hpclaunch sweep writes (its first 7 columns, then message and log),
// then `rows`, one line each.
std::string results_file(const std::vector<std::string>& rows);

}  // namespace cli_test
