// SshHost's verbs against the test cluster's login node (sshd on 127.0.0.1, alias testlogin).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "backends/ssh_host.h"
#include "ssh_test_support.h"

using hpc::CommandOptions;
using hpc::CommandResult;
using hpc::SshHost;
using namespace hpc::test;

namespace {

std::vector<std::string> split_nul(const std::string& s) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t end; (end = s.find('\0', begin)) != std::string::npos; begin = end + 1)
    out.push_back(s.substr(begin, end - begin));
  return out;
}

std::string remote_home(SshHost& host) {
  CommandResult r = host.run({"printenv", "HOME"});
  REQUIRE(r.ok());
  return r.out.substr(0, r.out.find('\n'));
}

}  // namespace

TEST_CASE("connects through the ssh config alias and runs hostname and sbatch", "[ssh][run]") {
  SshHost host(login_options());
  CHECK(host.name() == login_user() + "@127.0.0.1:" + std::to_string(ssh_port()));

  CommandResult r = host.run({"hostname"});
  INFO(r.summary("hostname"));
  REQUIRE(r.ok());
  CHECK(!r.out.empty());

  r = host.run({"sbatch", "--version"});
  INFO(r.summary("sbatch"));
  REQUIRE(r.ok());
  CHECK(r.out.rfind("slurm", 0) == 0);  // "slurm-wlm 22.05.8" on Debian
  // The login node's sshd gives sessions the cluster's SLURM_CONF (sshd_config SetEnv).
  r = host.run({"printenv", "SLURM_CONF"});
  CHECK(r.out == cluster_dir() + "/etc/slurm.conf\n");
  CHECK(host.reconnects() == 0);
}

TEST_CASE("one session serves every call", "[ssh][run]") {
  SshHost host(login_options());
  // $PPID of a command is the sshd process of our connection: the same for every channel.
  CommandResult a = host.run({"sh", "-c", "echo $PPID"});
  host.make_dirs(scratch_dir("session") + "/x");
  CommandResult b = host.run({"sh", "-c", "echo $PPID"});
  REQUIRE(a.ok());
  CHECK(a.out == b.out);
}

TEST_CASE("hostile arguments arrive verbatim", "[ssh][run]") {
  const std::string dir = scratch_dir("hostile");
  const std::vector<std::string> args = {"$(touch CANARY)",
                                         "`touch CANARY`",
                                         "it's",
                                         "\"double\"",
                                         "a b  c",
                                         "line1\nline2",
                                         "",
                                         "*",
                                         ";",
                                         "&& touch CANARY",
                                         "|",
                                         "\\",
                                         "$HOME",
                                         "-n",
                                         "~",
                                         "'",
                                         "\t",
                                         "#x",
                                         "é"};
  SshHost host(login_options());
  std::vector<std::string> argv = {"printf", "%s\\0"};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions o;
  o.cwd = dir;
  CommandResult r = host.run(argv, o);
  INFO(r.summary("printf"));
  REQUIRE(r.ok());
  CHECK(split_nul(r.out) == args);
  CHECK_FALSE(local_exists(dir + "/CANARY"));
}

TEST_CASE("stdin is written, then closed", "[ssh][run]") {
  SshHost host(login_options());
  // More than one SSH window (2 MiB in libssh's default), with every byte value.
  std::string data;
  for (int i = 0; i < 3 * 1024 * 1024; ++i) data += static_cast<char>((i * 7 + i / 251) & 0xff);
  CommandOptions o;
  o.stdin_data = data;
  CommandResult r = host.run({"cat"}, o);
  REQUIRE(r.ok());
  CHECK(r.out.size() == data.size());
  CHECK(r.out == data);

  // No stdin_data: the command reads end-of-file at once.
  r = host.run({"wc", "-c"});
  REQUIRE(r.ok());
  CHECK(r.out == "0\n");
  // A command that ignores its stdin still finishes.
  o.stdin_data = std::string(100000, 'x');
  r = host.run({"true"}, o);
  CHECK(r.ok());
}

TEST_CASE("exit status, stderr, signals and missing programs", "[ssh][run]") {
  SshHost host(login_options());
  CommandResult r = host.run({"sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(r.exit_code == 3);
  CHECK(r.term_signal == 0);
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  CHECK_FALSE(r.ok());

  r = host.run({"sh", "-c", "kill -TERM $$"});
  CHECK(r.term_signal == SIGTERM);
  CHECK(r.exit_code == -1);

  r = host.run({"no-such-program-hpclaunch"});
  CHECK_FALSE(r.ok());
  CHECK(r.exit_code == 127);
  CHECK(r.spawn_error.find("no-such-program-hpclaunch") != std::string::npos);
}

TEST_CASE("env entries and the working directory", "[ssh][run]") {
  const std::string dir = scratch_dir("env cwd $(x)");
  SshHost host(login_options());
  CommandOptions o;
  o.env = {"HPC_A=x y $(touch CANARY) 'q'", "HPC_B="};
  o.cwd = dir;
  CommandResult r = host.run({"sh", "-c",
                              "printf '%s|%s|%s|%s' \"$HPC_A\" \"${HPC_B-unset}\" "
                              "\"$PWD\" \"$SLURM_CONF\""},
                             o);
  INFO(r.summary("sh"));
  REQUIRE(r.ok());
  CHECK(r.out == "x y $(touch CANARY) 'q'||" + dir + "|" + cluster_dir() + "/etc/slurm.conf");
  CHECK_FALSE(local_exists(dir + "/CANARY"));

  o = {};
  o.cwd = "~";
  r = host.run({"pwd"}, o);
  CHECK(r.out == remote_home(host) + "\n");

  o.cwd = dir + "/missing";
  r = host.run({"true"}, o);
  CHECK_FALSE(r.ok());
}

TEST_CASE("a command that outlives its timeout is stopped", "[ssh][run]") {
  SshHost host(login_options());
  CommandOptions o;
  o.timeout = std::chrono::milliseconds(500);
  auto start = std::chrono::steady_clock::now();
  CommandResult r = host.run({"sh", "-c", "echo $$ >&2; exec sleep 31.4159"}, o);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(r.timed_out);
  CHECK_FALSE(r.ok());
  CHECK(took < std::chrono::seconds(3));
  // sshd refuses the KILL that SshHost sends for root logins (it needs privilege separation),
  // so the sleep may still be there: end it by its pid.
  REQUIRE(!r.err.empty());
  const pid_t sleeper = std::stoi(r.err);
  if (kill(sleeper, 0) == 0 &&
      read_local("/proc/" + std::to_string(sleeper) + "/cmdline").rfind("sleep", 0) == 0) {
    kill(sleeper, SIGKILL);
  }
  // The session is still good.
  CHECK(host.run({"true"}).ok());
  CHECK(host.reconnects() == 0);
}

TEST_CASE("make_dirs, write_file and read_file over SFTP", "[ssh][files]") {
  const std::string dir = scratch_dir("files");
  SshHost host(login_options());

  SECTION("make_dirs creates every missing component and is idempotent") {
    host.make_dirs(dir + "/a/b/c");
    CHECK(local_exists(dir + "/a/b/c"));
    host.make_dirs(dir + "/a/b/c");
    host.make_dirs(dir + "/a/b/c/");
    write_local(dir + "/plain", "x");
    try {
      host.make_dirs(dir + "/plain/sub");
      FAIL("make_dirs under a file succeeded");
    } catch (const hpc::BackendError& e) {
      std::string what = e.what();
      CHECK(what.find("not a directory") != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
  }

  SECTION("write_file writes whole files with their mode, also over an existing one") {
    const std::string f = dir + "/script.sbatch";
    host.write_file(f, "#!/bin/bash\necho one\n", 0755);
    CHECK(read_local(f) == "#!/bin/bash\necho one\n");
    struct stat st {};
    REQUIRE(stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
    host.write_file(f, "two", 0640);
    CHECK(read_local(f) == "two");
    REQUIRE(stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0640);
    host.write_file(dir + "/empty", "", 0644);
    CHECK(local_exists(dir + "/empty"));
    std::string big(1500000, 'z');
    host.write_file(dir + "/big", big, 0644);
    CHECK(read_local(dir + "/big") == big);
    // No temp files left behind.
    CommandResult ls = host.run({"ls", "-A", dir});
    CHECK(ls.out == "big\nempty\nscript.sbatch\n");
    // Into a directory that is not there: one clear error.
    CHECK_THROWS_AS(host.write_file(dir + "/nope/x", "x", 0644), hpc::BackendError);
  }

  SECTION("read_file follows a growing file from offsets") {
    const std::string log = dir + "/job.out";
    hpc::LogChunk c = host.read_file(log, 0, 1 << 20);
    CHECK_FALSE(c.exists);
    CHECK(c.next_offset == 0);

    host.write_file(log, "abc", 0644);
    c = host.read_file(log, 0, 1 << 20);
    CHECK(c.exists);
    CHECK(c.data == "abc");
    CHECK(c.next_offset == 3);
    // Appended on the remote side between reads.
    REQUIRE(host.run({"sh", "-c", "printf 'def\\nghi' >> job.out"},
                     [&] {
                       CommandOptions o;
                       o.cwd = dir;
                       return o;
                     }())
                .ok());
    c = host.read_file(log, c.next_offset, 1 << 20);
    CHECK(c.data == "def\nghi");
    CHECK(c.next_offset == 10);
    c = host.read_file(log, c.next_offset, 1 << 20);
    CHECK(c.exists);
    CHECK(c.data.empty());
    CHECK(c.next_offset == 10);
    // At most max_bytes.
    c = host.read_file(log, 2, 3);
    CHECK(c.data == "cde");
    CHECK(c.next_offset == 5);
    // Shrunk (rewritten): from the start again.
    write_local(log, "xy");
    c = host.read_file(log, 10, 1 << 20);
    CHECK(c.data == "xy");
    CHECK(c.next_offset == 2);
    // Larger than one SFTP read.
    std::string big;
    for (int i = 0; i < 300000; ++i) big += std::to_string(i % 10);
    write_local(log, big);
    c = host.read_file(log, 1000, 200000);
    CHECK(c.data == big.substr(1000, 200000));
    CHECK(c.next_offset == 201000);
    c = host.read_file("~/" + std::string("no-such-file-hpclaunch"), 0, 10);
    CHECK_FALSE(c.exists);
  }
}

TEST_CASE("absolute resolves ~ and relative paths against the remote home", "[ssh][files]") {
  SshHost host(login_options());
  const std::string home = remote_home(host);
  CHECK(host.absolute("~") == home);
  CHECK(host.absolute("~/x") == home + "/x");
  CHECK(host.absolute("~/runs/../y/") == home + "/y");
  CHECK(host.absolute("runs") == home + "/runs");
  CHECK(host.absolute("/scratch/a/../b") == "/scratch/b");
  CHECK(host.absolute("/") == "/");
}
