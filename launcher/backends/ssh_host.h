// A login node reached over SSH (libssh): the Host that the ssh backend hands to SlurmBackend,
// so that `sbatch`, `squeue`, ... run there and run directories and logs live there.
//
// One SSH session (and one SFTP session on it) serves every call; commands run in exec
// channels of that session. When the connection drops (sshd restarted, a network blip), the
// next call reconnects, with a bounded number of attempts. Not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/host.h"

// libssh's handle types, so that this header does not pull in <libssh/libssh.h>.
struct ssh_session_struct;
struct sftp_session_struct;

namespace hpc {

class SocketWatchdog;  // ssh_internal.h
class JumpChain;       // ssh_internal.h

struct SshHostOptions {
  // "login1", "user@login1", or a Host alias of the ssh config (HostName, User, Port,
  // IdentityFile, UserKnownHostsFile and ProxyJump are honoured; a ProxyCommand is run by
  // libssh). StrictHostKeyChecking is not: see accept_new_host_key.
  std::string host;
  // Jump hosts in front of `host`, "[user@]host[:port]" or config aliases, comma-separated, first
  // hop first (ssh -J); "" = the config's ProxyJump, if any; "none" = straight to `host`. Each
  // hop is a session of hpclaunch's own: host key checked, login made, as for `host`.
  std::string jump;
  std::string user;           // "": "user@" of `host`, the config's User, or the local user
  int port = 0;               // 0: the config's Port, else 22
  std::string identity_file;  // "": the config's IdentityFile, ssh-agent and ~/.ssh/id_*
  std::string config_file;    // "": ~/.ssh/config, then /etc/ssh/ssh_config
  // config_file is a path a run directory's record (run.json) named, not the user: it is read
  // as data (hosts, users, ports, keys, ProxyJump hops); a line that would run a command
  // (ProxyCommand, LocalCommand, KnownHostsCommand, Match exec, Include) is refused.
  bool config_from_record = false;
  std::string known_hosts_file;  // "": the config's UserKnownHostsFile, else ~/.ssh/known_hosts
  // Record the key of a host that known_hosts does not list yet, instead of refusing it.
  // A key that differs from the recorded one is refused always.
  bool accept_new_host_key = false;
  // Bounds connecting and every wait for one answer of the server (the config's
  // ConnectTimeout is overridden).
  std::chrono::seconds connect_timeout{15};
  // The longest one file operation (make_dirs, write_file, read_file) may take; after that
  // the connection counts as dead and is replaced.
  std::chrono::seconds io_timeout{60};
  // After a drop: this many connection attempts, `reconnect_delay` apart, doubling.
  int reconnect_attempts = 3;
  std::chrono::milliseconds reconnect_delay{500};
};

class SshHost : public Host {
 public:
  // Reads the ssh config (throws BackendError for an unreadable config_file); connects on the
  // first call, or on connect().
  explicit SshHost(SshHostOptions options);
  ~SshHost() override;
  SshHost(const SshHost&) = delete;
  SshHost& operator=(const SshHost&) = delete;

  // "user@hostname:port" after the ssh config's aliases are applied.
  std::string name() const override { return name_; }

  // Connects now, if not connected: host key check, then login. Throws BackendError with one
  // line (unreachable host, closed port, unknown or changed host key, login refused).
  void connect();

  // argv is shell-quoted and run by the remote user's shell in one exec channel:
  // `cd CWD && exec env NAME=value... ARGV...`. A program that is not there (exit 127, "not
  // found") gets spawn_error. A connection lost while the command runs is reported like a
  // timeout (timed_out, err says so): it may or may not have run; the next call reconnects.
  // Throws BackendError only when it cannot (re)connect.
  CommandResult run(const std::vector<std::string>& argv,
                    const CommandOptions& options = {}) override;
  // Paths below: absolute, relative to the remote home, or "~/...".
  void make_dirs(const std::string& path) override;
  void write_file(const std::string& path, const std::string& content, int mode) override;
  LogChunk read_file(const std::string& path, uint64_t offset, size_t max_bytes) override;
  std::string absolute(const std::string& path) override;

  // How many times a dropped connection was replaced (for tests and the run record).
  int reconnects() const { return reconnects_; }
  // How many times this host logged in (1 for a command whose connection never dropped).
  int logins() const { return logins_; }

 private:
  ssh_session_struct* new_session() const;
  void open_session();
  std::unique_ptr<JumpChain> connect_jumps(std::vector<std::string> hops, const std::string& host,
                                           unsigned int port);
  void reconnect(const std::string& why);
  void disconnect();
  bool session_alive() const;
  sftp_session_struct* sftp();
  template <class Op>
  auto with_connection(Op&& op) -> decltype(op());
  int sftp_status();
  [[noreturn]] void throw_sftp_error(const std::string& what, const std::string& path, int code);
  std::string remote_path(const std::string& path);
  class Deadline;
  Deadline io_deadline();
  void make_dirs_now(const std::string& path);
  void write_file_now(const std::string& path, const std::string& content, int mode);
  LogChunk read_file_now(const std::string& path, uint64_t offset, size_t max_bytes);
  std::string home();

  SshHostOptions options_;
  std::string name_;         // user@hostname:port
  std::string description_;  // "testlogin (root@127.0.0.1:2422)" or name_, for messages
  ssh_session_struct* session_ = nullptr;
  sftp_session_struct* sftp_ = nullptr;
  bool ever_connected_ = false;  // a lost connection is re-established, a first one is not
  int reconnects_ = 0;
  int logins_ = 0;
  std::unique_ptr<JumpChain> chain_;  // the jump hosts session_ runs over, if any
  std::string home_;  // remote home directory, once asked
  unsigned temp_counter_ = 0;
  std::unique_ptr<SocketWatchdog> watchdog_;  // puts io_timeout on SFTP calls
};

}  // namespace hpc
