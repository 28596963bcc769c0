// JumpChain (ssh_internal.h): ProxyJump with hpclaunch's own libssh sessions.
//
// Debian 12's libssh (0.10) has no jump-host support of its own: it rewrites a ProxyJump line
// into the ProxyCommand `ssh -W '[%h]:%p' HOP` (src/config.c), so the hops would be checked and
// logged in to by the OpenSSH client, under its own rules (its StrictHostKeyChecking, its
// known_hosts, not --known-hosts / --accept-new-host-key), with its own prompts. libssh 0.11
// connects jumps itself (a thread per hop moving bytes between a socketpair and a
// direct-tcpip channel with ssh_connector); this is the same design, on 0.10's public API,
// with hpclaunch's host key check and login on every hop. On 0.11, make_session() keeps
// libssh's own jumps off (OPENSSH_PROXYJUMP=1).
#include <libssh/libssh.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "backends/ssh_internal.h"
#include "error.h"

namespace hpc {

using namespace ssh_detail;

struct JumpChain::Hop {
  SessionPtr session;  // used by `thread` alone once it runs
  ssh_channel channel = nullptr;
  int near = -1;  // the socketpair's end the thread moves bytes through
  int far = -1;   // the end the next session uses as its socket
  std::atomic<bool> stop{false};
  std::atomic<bool> ended{false};
  std::thread thread;

  void pump() {
    ssh_event event = ssh_event_new();
    ssh_connector to_channel = ssh_connector_new(session.get());
    ssh_connector from_channel = ssh_connector_new(session.get());
    if (event && to_channel && from_channel) {
      ssh_connector_set_in_fd(to_channel, near);
      ssh_connector_set_out_channel(to_channel, channel, SSH_CONNECTOR_STDINOUT);
      ssh_connector_set_in_channel(from_channel, channel, SSH_CONNECTOR_STDINOUT);
      ssh_connector_set_out_fd(from_channel, near);
      ssh_event_add_connector(event, to_channel);
      ssh_event_add_connector(event, from_channel);
      // A short poll, so that the destructor's stop is seen within 100 ms.
      while (!stop && ssh_channel_is_open(channel) && !ssh_channel_is_eof(channel)) {
        if (ssh_event_dopoll(event, 100) == SSH_ERROR) break;
      }
      ssh_event_remove_connector(event, to_channel);
      ssh_event_remove_connector(event, from_channel);
    }
    if (to_channel) ssh_connector_free(to_channel);
    if (from_channel) ssh_connector_free(from_channel);
    if (event) ssh_event_free(event);
    // The next session sees its connection end (EOF) and reconnects through a new chain.
    shutdown(near, SHUT_RDWR);
    ended = true;
  }
};

JumpChain::JumpChain() = default;

JumpChain::~JumpChain() {
  // Last hop first: each hop's session runs over the previous hop's thread.
  for (auto it = hops_.rbegin(); it != hops_.rend(); ++it) {
    Hop& hop = **it;
    hop.stop = true;
    if (hop.thread.joinable()) hop.thread.join();
    if (hop.channel) {
      ssh_channel_close(hop.channel);
      ssh_channel_free(hop.channel);
    }
    hop.session.reset();  // disconnects
    if (hop.near >= 0) close(hop.near);
    if (hop.far >= 0) close(hop.far);
  }
}

int JumpChain::next_fd() const { return hops_.empty() ? -1 : hops_.back()->far; }

bool JumpChain::alive() const {
  for (const auto& hop : hops_)
    if (hop->ended) return false;
  return true;
}

int JumpChain::extend(SessionPtr hop_session, const std::string& host, unsigned int port,
                      const std::string& description) {
  auto hop = std::make_unique<Hop>();
  hop->session = std::move(hop_session);
  hop->channel = ssh_channel_new(hop->session.get());
  if (hop->channel == nullptr) throw NetworkError(error_of(hop->session.get()));
  // The origin is what OpenSSH sends for -W too; the server only logs it.
  if (ssh_channel_open_forward(hop->channel, host.c_str(), static_cast<int>(port), "127.0.0.1",
                               65535) != SSH_OK) {
    std::string why = error_of(hop->session.get());
    ssh_channel_free(hop->channel);
    hop->channel = nullptr;
    throw NetworkError(description + " could not reach " + host + ":" +
                       std::to_string(port) + " (" + why +
                       "; AllowTcpForwarding must be on there)");
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    ssh_channel_close(hop->channel);
    ssh_channel_free(hop->channel);
    hop->channel = nullptr;
    throw BackendError("cannot make a socket pair for the jump host " + description);
  }
  hop->near = pair[0];
  hop->far = pair[1];
  Hop* h = hop.get();
  hops_.push_back(std::move(hop));
  h->thread = std::thread([h] { h->pump(); });
  return h->far;
}

}  // namespace hpc
