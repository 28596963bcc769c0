// What ssh_host.cc (the connection) and ssh_host_io.cc (commands and files) share: libssh's
// handles as unique_ptrs, the errors that make SshHost reconnect, the socket watchdog, and
// with_connection(). Private to SshHost: nothing outside backends/ssh_host*.cc includes it.
#pragma once

#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backends/ssh_host.h"

namespace hpc {
namespace ssh_detail {

using Clock = std::chrono::steady_clock;

// The session died under a call (socket closed, no answer within the timeout). Only ever
// thrown inside SshHost: with_connection() reconnects and tries the operation once more.
class ConnectionLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The server could not be reached or dropped us during the handshake: worth another attempt
// when reconnecting. Host key and login failures are BackendErrors, never retried.
class NetworkError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SessionDeleter {
  void operator()(ssh_session s) const {
    if (ssh_is_connected(s)) ssh_disconnect(s);
    ssh_free(s);
  }
};
using SessionPtr = std::unique_ptr<ssh_session_struct, SessionDeleter>;

struct ChannelDeleter {
  void operator()(ssh_channel c) const { ssh_channel_free(c); }
};
using ChannelPtr = std::unique_ptr<ssh_channel_struct, ChannelDeleter>;

struct FileDeleter {
  void operator()(sftp_file f) const { sftp_close(f); }
};
using FilePtr = std::unique_ptr<sftp_file_struct, FileDeleter>;

struct AttributesDeleter {
  void operator()(sftp_attributes a) const { sftp_attributes_free(a); }
};
using AttributesPtr = std::unique_ptr<sftp_attributes_struct, AttributesDeleter>;

struct KeyDeleter {
  void operator()(ssh_key k) const { ssh_key_free(k); }
};
using KeyPtr = std::unique_ptr<ssh_key_struct, KeyDeleter>;

// Strings libssh allocates for us (ssh_options_get, sftp_canonicalize_path, fingerprints).
inline std::string take_string(char* s) {
  if (s == nullptr) return "";
  std::string out = s;
  ssh_string_free_char(s);
  return out;
}

inline std::string error_of(ssh_session s) {
  std::string e = ssh_get_error(s);
  // libssh's messages sometimes end with a newline or carry one inside.
  std::replace(e.begin(), e.end(), '\n', ' ');
  while (!e.empty() && e.back() == ' ') e.pop_back();
  return e.empty() ? "unknown error" : e;
}

inline std::string sftp_error_text(int code) {
  switch (code) {
    case SSH_FX_EOF:
      return "end of file";
    case SSH_FX_NO_SUCH_FILE:
      return "No such file or directory";
    case SSH_FX_PERMISSION_DENIED:
      return "Permission denied";
    case SSH_FX_FAILURE:
      return "failed (it may exist already, or the disk is full)";
    case SSH_FX_BAD_MESSAGE:
      return "the server did not understand the request";
    case SSH_FX_OP_UNSUPPORTED:
      return "not supported by the server";
    case SSH_FX_INVALID_HANDLE:
      return "invalid handle";
    case SSH_FX_NO_SUCH_PATH:
      return "No such file or directory";
    case SSH_FX_FILE_ALREADY_EXISTS:
      return "File exists";
    case SSH_FX_WRITE_PROTECT:
      return "Read-only file system";
    case SSH_FX_NO_MEDIA:
      return "no medium";
    default:
      return "SFTP error " + std::to_string(code);
  }
}

inline std::string normal_path(const std::string& p) {
  std::string s = std::filesystem::path(p).lexically_normal().generic_string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

inline std::string parent_of(const std::string& p) {
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

// One session's way in and its login, shared by the login node and the jump hosts before it
// (ssh_login.cc).
//
// A session for `host` (an alias, "user@host" or "user@host:port"), with the ssh config read
// and hpclaunch's settings applied (strict host keys, timeouts, no passphrase prompts). The
// target's own user, port and known_hosts overrides are applied only when `is_target`.
SessionPtr make_session(const SshHostOptions& o, const std::string& host, bool is_target);
// "alias (user@hostname:port)", or "user@hostname:port" when the alias is the host name.
std::string describe_session(ssh_session s, const std::string& host);
std::string session_hostname(ssh_session s);
unsigned int session_port(ssh_session s);
// The key the server showed, checked against known_hosts (recorded where the options allow).
// Throws BackendError (unknown or changed key) or NetworkError.
void check_host_key(ssh_session s, const SshHostOptions& o, const std::string& description);
// Logs in: the identity file given, else ssh-agent and the config's keys; then, when the server
// asks for it, keyboard-interactive answered on the terminal (/dev/tty). Throws BackendError
// (refused; a prompt with no terminal to ask on) or NetworkError.
void log_in(ssh_session s, const std::string& identity_file, const std::string& description,
            std::chrono::seconds timeout);

// How the ssh config (or --jump) says to reach a session's host: directly, through jump hosts
// (ProxyJump: hpclaunch's own connections, ssh_jump.cc) or through a command (ProxyCommand,
// run by libssh). libssh 0.10 turns a ProxyJump line into the ProxyCommand
// "ssh [-l U] [-p P] [-J REST] -W '[%h]:%p' HOST" (src/config.c), which route_of() reads back;
// 0.11 does the same when OPENSSH_PROXYJUMP=1, which make_session() sets.
struct Route {
  std::vector<std::string> jumps;  // "[user@]host[:port]" each, first hop first
  std::string command;             // a ProxyCommand that is not a ProxyJump
};
// `jump_flag` ("" = none given; "none" = go direct) overrides the config. Throws BackendError
// for a hop hpclaunch cannot read. Clears the session's ProxyCommand when it returns jumps.
Route route_of(ssh_session s, const std::string& jump_flag, const std::string& where);
// "a,b" -> {"a","b"}; each "[user@]host[:port]" checked (no spaces, no control characters, no
// leading '-'). Throws BackendError naming `where`.
std::vector<std::string> split_jumps(const std::string& list, const std::string& where);

}  // namespace ssh_detail

// The jump hosts in front of the login node (ProxyJump), each a logged-in session of its own
// whose thread moves the bytes of the next hop's connection through a direct-tcpip channel
// (what `ssh -W` does), over a socketpair whose other end the next session uses as its socket.
// Every hop's host key is checked and its login made here, like the login node's (ssh_jump.cc).
class JumpChain {
 public:
  JumpChain();
  ~JumpChain();
  JumpChain(const JumpChain&) = delete;
  JumpChain& operator=(const JumpChain&) = delete;
  // `hop` is connected and logged in; opens its channel to host:port and starts its thread.
  // Returns the descriptor the next session connects over (owned by the chain).
  int extend(ssh_detail::SessionPtr hop, const std::string& host, unsigned int port,
             const std::string& description);
  // The descriptor of the last hop's far end: what the next session connects over.
  int next_fd() const;
  // Every hop still moves bytes (none has seen its connection end).
  bool alive() const;
  size_t hops() const { return hops_.size(); }

 private:
  struct Hop;
  std::vector<std::unique_ptr<Hop>> hops_;
};

// Puts a deadline on libssh calls that could otherwise wait forever: libssh 0.10's SFTP client
// retries a read that timed out, without end, so a server that stops answering (a hung file
// system under sftp-server, a peer that vanished without a reset) would hang follow mode.
// When the deadline passes, the socket is shut down (from this thread only the kernel's socket
// is touched, never libssh): the call fails, and with_connection() reconnects.
class SocketWatchdog {
 public:
  SocketWatchdog() : thread_([this] { loop(); }) {}
  ~SocketWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  void arm(int fd, ssh_detail::Clock::time_point deadline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fd_ = fd;
      deadline_ = deadline;
      fired_ = false;
    }
    wake_.notify_one();
  }
  // After this returns the socket is not touched any more; true if the deadline had passed.
  bool disarm() {
    std::lock_guard<std::mutex> lock(mutex_);
    fd_ = -1;
    return fired_;
  }
  bool fired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fired_;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (fd_ < 0) {
        wake_.wait(lock);
      } else if (ssh_detail::Clock::now() < deadline_) {
        wake_.wait_until(lock, deadline_);
      } else {
        shutdown(fd_, SHUT_RDWR);
        fired_ = true;
        fd_ = -1;
      }
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  int fd_ = -1;
  ssh_detail::Clock::time_point deadline_;
  bool stop_ = false;
  bool fired_ = false;
  std::thread thread_;  // last: starts when the rest is ready
};

// Arms the watchdog for one file operation; disarms it when the operation is over.
class SshHost::Deadline {
 public:
  Deadline(SocketWatchdog& watchdog, int fd, std::chrono::seconds limit) : watchdog_(watchdog) {
    watchdog_.arm(fd, ssh_detail::Clock::now() + limit);
  }
  ~Deadline() { watchdog_.disarm(); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  SocketWatchdog& watchdog_;
};

// Runs `op` on a connected session; when the connection is lost under it, reconnects and runs
// it once more.
template <class Op>
auto SshHost::with_connection(Op&& op) -> decltype(op()) {
  connect();
  try {
    return op();
  } catch (const ssh_detail::ConnectionLost& e) {
    reconnect(e.what());
  }
  try {
    return op();
  } catch (const ssh_detail::ConnectionLost& e) {
    disconnect();
    throw BackendUnreachable("lost the connection to " + description_ +
                             " again right after "
                             "reconnecting: " +
                             e.what());
  }
}

}  // namespace hpc
