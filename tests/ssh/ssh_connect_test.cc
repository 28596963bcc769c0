// SshHost's connection: host keys, logins, unreachable servers, and reconnecting after drops.
// Every refusal is one BackendError line that names the host, and nothing runs.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "backends/ssh_host.h"
#include "error.h"
#include "ssh_test_support.h"

using hpc::BackendError;
using hpc::CommandResult;
using hpc::SshHost;
using hpc::SshHostOptions;
using hpc::UserError;
using namespace hpc::test;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The message of the BackendError that connect() throws; fails the test when none is thrown.
std::string refusal(const SshHostOptions& options) {
  SshHost host(options);
  try {
    host.connect();
  } catch (const BackendError& e) {
    std::string what = e.what();
    INFO(what);
    CHECK(!contains(what, "\n"));
    CHECK(contains(what, "127.0.0.1"));
    return what;
  }
  FAIL("connected although it should have been refused");
  return "";
}

std::string known_hosts_entry(int port) { return "[127.0.0.1]:" + std::to_string(port); }

}  // namespace

TEST_CASE("an unknown host key is refused, and recorded with accept_new_host_key",
          "[ssh][hostkey]") {
  const std::string dir = scratch_dir("unknown-key");
  SshHostOptions o = login_options();

  SECTION("empty known_hosts") {
    o.known_hosts_file = dir + "/known_hosts";
    write_local(o.known_hosts_file, "");
  }
  SECTION("no known_hosts file at all") { o.known_hosts_file = dir + "/sub/known_hosts"; }

  std::string what = refusal(o);
  CHECK(contains(what, "testlogin"));
  CHECK(contains(what, "SHA256:"));
  CHECK(contains(what, "--accept-new-host-key"));
  CHECK(contains(what, o.known_hosts_file));
  CHECK(read_local(o.known_hosts_file).empty());

  o.accept_new_host_key = true;
  {
    SshHost host(o);
    CHECK(host.run({"true"}).ok());
  }
  const std::string recorded = read_local(o.known_hosts_file);
  CHECK(contains(recorded, known_hosts_entry(ssh_port())));
  CHECK(contains(recorded, host_public_key()));

  // Known now: no flag needed any more.
  o.accept_new_host_key = false;
  SshHost again(o);
  CHECK(again.run({"true"}).ok());
}

TEST_CASE("a changed host key is refused, even with accept_new_host_key", "[ssh][hostkey]") {
  const std::string dir = scratch_dir("changed-key");
  SshHostOptions o = login_options();
  o.known_hosts_file = dir + "/known_hosts";
  // Another ed25519 key (the client's) recorded for the login node.
  std::string other = read_local(cluster_dir() + "/ssh/id_ed25519.pub");
  other = other.substr(0, other.find(' ', other.find(' ') + 1));
  write_local(o.known_hosts_file, known_hosts_entry(ssh_port()) + " " + other + "\n");

  for (bool accept : {false, true}) {
    o.accept_new_host_key = accept;
    std::string what = refusal(o);
    CHECK(contains(what, "differs"));
    CHECK(contains(what, "intercepting"));
    CHECK(contains(what, o.known_hosts_file));
  }
  // Nothing was added to the file.
  CHECK(read_local(o.known_hosts_file) == known_hosts_entry(ssh_port()) + " " + other + "\n");
}

TEST_CASE("a client key the server does not accept is refused", "[ssh][auth]") {
  SECTION("from the config (testlogin-wrongkey)") {
    SshHostOptions o = login_options();
    o.host = "testlogin-wrongkey";
    std::string what = refusal(o);
    CHECK(contains(what, "testlogin-wrongkey (" + login_user() + "@127.0.0.1:"));
    CHECK(contains(what, "refused the login"));
    CHECK(contains(what, "offers publickey"));
  }
  SECTION("given as the identity file") {
    SshHostOptions o = login_options();
    o.identity_file = cluster_dir() + "/ssh/id_ed25519_unauthorized";
    std::string what = refusal(o);
    CHECK(contains(what, "refused the login"));
    CHECK(contains(what, o.identity_file));
  }
  SECTION("a user that does not exist there") {
    SshHostOptions o = login_options();
    o.user = "hpclaunch-no-such-user";
    std::string what = refusal(o);
    CHECK(contains(what, "hpclaunch-no-such-user@127.0.0.1"));
  }
}

TEST_CASE("the right identity file logs in", "[ssh][auth]") {
  SshHostOptions o = login_options();
  o.identity_file = cluster_dir() + "/ssh/id_ed25519";
  SshHost host(o);
  CHECK(host.run({"true"}).ok());
}

TEST_CASE("a host without an ssh alias: name, port and known_hosts given directly",
          "[ssh][options]") {
  SshHostOptions o;
  o.host = login_user() + "@127.0.0.1";
  o.port = ssh_port();
  o.identity_file = cluster_dir() + "/ssh/id_ed25519";
  o.known_hosts_file = cluster_dir() + "/ssh/known_hosts";
  o.config_file = "/dev/null";  // not this machine's ~/.ssh/config
  SshHost host(o);
  CHECK(host.name() == login_user() + "@127.0.0.1:" + std::to_string(ssh_port()));
  CHECK(host.run({"true"}).ok());
}

TEST_CASE("a closed port is one clear line", "[ssh][connect]") {
  SshHostOptions o = login_options();
  o.port = closed_port();
  auto start = std::chrono::steady_clock::now();
  std::string what = refusal(o);
  CHECK(contains(what, "cannot connect to testlogin"));
  CHECK(contains(what, ":" + std::to_string(o.port)));
  CHECK(contains(what, "refused"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  // Every verb says the same; none of them runs anything.
  SshHost host(o);
  CHECK_THROWS_AS(host.run({"true"}), BackendError);
  CHECK_THROWS_AS(host.make_dirs("/tmp/x"), BackendError);
}

TEST_CASE("options that cannot work are refused before connecting", "[ssh][options]") {
  SshHostOptions o = login_options();
  o.host = "";
  CHECK_THROWS_AS(SshHost(o), BackendError);
  // Missing files are bad input (exit 2), like every other input file.
  o = login_options();
  o.config_file = "/nonexistent/ssh_config";
  CHECK_THROWS_AS(SshHost(o), UserError);
  o = login_options();
  o.identity_file = "/nonexistent/id_ed25519";
  CHECK_THROWS_AS(SshHost(o), UserError);
}

TEST_CASE("after the server side of the connection dies, the next call reconnects",
          "[ssh][reconnect]") {
  SshHost host(login_options());
  CommandResult r = host.run({"sh", "-c", "echo $PPID"});
  REQUIRE(r.ok());
  const pid_t session_pid = std::stoi(r.out);
  // The sshd process that serves this connection (the "sshd: USER@notty" child).
  REQUIRE(session_pid > 1);
  REQUIRE(contains(read_local("/proc/" + std::to_string(session_pid) + "/cmdline"), "sshd"));
  REQUIRE(kill(session_pid, SIGKILL) == 0);
  REQUIRE(wait_until([&] { return kill(session_pid, 0) != 0; }));  // reaped by sshd

  r = host.run({"echo", "back"});
  INFO(r.summary("echo"));
  CHECK(r.ok());
  CHECK(r.out == "back\n");
  CHECK(host.reconnects() == 1);

  // SFTP too: the first file call after a drop gets a new SFTP session.
  r = host.run({"sh", "-c", "echo $PPID"});
  REQUIRE(r.ok());
  const pid_t second_pid = std::stoi(r.out);
  REQUIRE(kill(second_pid, SIGKILL) == 0);
  REQUIRE(wait_until([&] { return kill(second_pid, 0) != 0; }));
  CHECK(host.absolute("/a") == "/a");  // no connection needed
  const std::string dir = scratch_dir("reconnect");
  host.write_file(dir + "/f", "after", 0644);
  CHECK(read_local(dir + "/f") == "after");
  CHECK(host.reconnects() == 2);
}

TEST_CASE("network blips: reconnects, and gives up after the bounded attempts",
          "[ssh][reconnect]") {
  TcpRelay relay(ssh_port());
  const std::string dir = scratch_dir("blips");
  SshHostOptions o = login_options();
  o.port = relay.port();
  o.known_hosts_file = dir + "/known_hosts";
  write_local(o.known_hosts_file, known_hosts_entry(relay.port()) + " " + host_public_key() + "\n");
  o.reconnect_attempts = 3;
  o.reconnect_delay = std::chrono::milliseconds(50);
  o.connect_timeout = std::chrono::seconds(1);
  o.io_timeout = std::chrono::seconds(1);
  SshHost host(o);
  REQUIRE(host.run({"true"}).ok());
  CHECK(relay.accepted() == 1);

  SECTION("a cut between calls: run and read_file go on") {
    relay.cut();
    CHECK(host.run({"echo", "1"}).out == "1\n");
    relay.cut();
    write_local(dir + "/log", "line\n");
    CHECK(host.read_file(dir + "/log", 0, 100).data == "line\n");
    CHECK(host.reconnects() == 2);
    CHECK(relay.accepted() == 3);
  }

  SECTION("a cut while a command runs: reported like a timeout, the next call reconnects") {
    // Cut once the command has started (it says so in a file; the login node is this machine).
    const std::string started = dir + "/started";
    std::thread cutter([&] {
      wait_until([&] { return local_exists(started); });
      relay.cut();
    });
    CommandResult r = host.run({"sh", "-c", "touch \"$1\" && exec sleep 5", "sh", started});
    cutter.join();
    CHECK(local_exists(started));
    CHECK(r.timed_out);
    CHECK(contains(r.err, "lost the connection"));
    CHECK(host.run({"true"}).ok());
    CHECK(host.reconnects() == 1);
  }

  SECTION("the server comes back during the attempts") {
    relay.refuse();
    std::thread back([&] {
      // Back once the first attempt was turned away; the next one (50 ms later) gets in.
      wait_until([&] { return relay.refused() >= 1; });
      relay.accept_again();
    });
    CommandResult r = host.run({"echo", "ok"});
    back.join();
    CHECK(relay.refused() >= 1);
    CHECK(r.out == "ok\n");
    CHECK(host.reconnects() == 1);
  }

  SECTION("a connection that stops answering is replaced after io_timeout") {
    // Bytes vanish in the relay, nothing is closed: libssh alone would wait for ever.
    write_local(dir + "/log", "line\n");
    relay.freeze();
    auto start = std::chrono::steady_clock::now();
    CHECK(host.read_file(dir + "/log", 0, 100).data == "line\n");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(4));
    CHECK(host.reconnects() == 1);
    relay.freeze();
    host.make_dirs(dir + "/d1");
    CHECK(local_exists(dir + "/d1"));
    relay.freeze();
    CHECK(host.run({"echo", "x"}).out == "x\n");  // opening the channel times out first
    CHECK(host.reconnects() == 3);
  }

  SECTION("the server stays away: one line after the attempts, then it works again") {
    relay.refuse();
    auto start = std::chrono::steady_clock::now();
    try {
      host.run({"true"});
      FAIL("run succeeded without a server");
    } catch (const BackendError& e) {
      std::string what = e.what();
      INFO(what);
      CHECK(contains(what, "lost the connection to testlogin"));
      CHECK(contains(what, "3 attempts"));
      CHECK(!contains(what, "\n"));
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
    relay.accept_again();
    CHECK(host.run({"true"}).ok());
  }
}
