// What the SshHost tests share: where the test cluster's login node is (scripts/testcluster.sh
// writes D/ssh/config with the alias `testlogin`), scratch directories, and a TCP relay that
// can cut connections on demand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backends/ssh_host.h"

namespace hpc::test {

// $HPC_TESTCLUSTER_DIR (set by CTest), else the cluster `scripts/testcluster.sh up` makes by
// default.
std::string cluster_dir();
// The sshd port from D/cluster.env.
int ssh_port();
// Who logs in to the login node: the user running the tests (root, or the ordinary user that
// brought the cluster up through sudo; scripts/testcluster.sh writes it into D/ssh/config).
std::string login_user();
// The public host key line "ssh-ed25519 AAAA..." of the login node.
std::string host_public_key();

// Options for the alias `testlogin` of the cluster's ssh config (known_hosts from there too).
SshHostOptions login_options();

// A fresh, empty directory under D/ssh-tests/ (the login node is this machine, so tests can
// look at what SshHost did with plain file calls).
std::string scratch_dir(const std::string& name);

std::string read_local(const std::string& path);
void write_local(const std::string& path, const std::string& content);
bool local_exists(const std::string& path);

// A free TCP port on 127.0.0.1 nobody listens on (bound, then closed again).
int closed_port();

// Waits until `condition` holds, polling every 5 ms; whether it did within `timeout`.
bool wait_until(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Forwards 127.0.0.1:port() to 127.0.0.1:target. cut() closes every forwarded connection
// (a network blip); refuse() also turns new ones away, each reset at once and counted in
// refused() (the server is gone); freeze() stops moving bytes on the connections there are,
// closing nothing (a peer that hangs).
class TcpRelay {
 public:
  explicit TcpRelay(int target);
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;
  int port() const { return port_; }
  int accepted() const { return accepted_; }
  int refused() const { return refused_; }
  void cut();
  void refuse();
  void freeze();
  void accept_again();

 private:
  void loop();
  // Applied by the relay's thread; returns once it has been.
  void request(bool cut, bool refuse, bool freeze = false);
  void listen_now();
  int target_;
  int port_ = 0;
  int listen_fd_ = -1;  // only the relay's thread touches descriptors after the constructor
  int wake_[2] = {-1, -1};
  std::atomic<int> accepted_{0}, refused_{0};
  std::atomic<int> requested_{0}, applied_{0};
  std::atomic<bool> stop_{false}, cut_{false}, refuse_{false}, freeze_{false};
  std::thread thread_;
};

}  // namespace hpc::test
