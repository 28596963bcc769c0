#include "backends/ssh_host.h"

#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backends/ssh_internal.h"
#include "error.h"
#include "input_file.h"

namespace hpc {

using namespace ssh_detail;

namespace {

std::string local_user() {
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_name) return pw->pw_name;
  const char* u = std::getenv("USER");
  return u ? u : "";
}

}  // namespace

SshHost::Deadline SshHost::io_deadline() {
  if (!watchdog_) watchdog_ = std::make_unique<SocketWatchdog>();
  return Deadline(*watchdog_, ssh_get_fd(session_), options_.io_timeout);
}

namespace {

// A config file a run.json named is data: none of its lines may run a command here.
void refuse_commands_in_config(const std::string& path, const std::string& text) {
  size_t line_no = 0;
  for (size_t pos = 0; pos <= text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    std::string lower;
    for (char c : line) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t first = lower.find_first_not_of(" \t");
    if (first == std::string::npos || lower[first] == '#') continue;
    const size_t word_end = lower.find_first_of(" \t=", first);
    const std::string word = lower.substr(first, word_end - first);
    // ProxyJump is data: hpclaunch connects to its hops itself, checking their keys
    // (ssh_jump.cc); no command runs for it.
    const bool runs = word == "proxycommand" || word == "localcommand" ||
                      word == "knownhostscommand" || word == "include" ||
                      (word == "match" && lower.find("exec", first) != std::string::npos);
    if (!runs) continue;
    throw UserError(path + ":" + std::to_string(line_no),
                    "\"" + line.substr(first, word_end - first) +
                        "\" in the ssh_config that run.json names: a run directory's record is "
                        "read as data and runs no command",
                    "pass --ssh-config " + path + " to trust that file for this command");
  }
}

}  // namespace

SshHost::SshHost(SshHostOptions options) : options_(std::move(options)) {
  if (options_.host.empty()) {
    throw BackendError(
        "no SSH host given; name the login node with --host (a host name or an "
        "alias from ~/.ssh/config)");
  }
  // libssh would wait forever on a FIFO and read /dev/zero without end: the config and the
  // key are input files like any other (common/input_file.h), checked before libssh opens them.
  // `--ssh-config /dev/null` is ssh's own idiom (`ssh -F /dev/null`) for "no config file".
  if (!options_.config_file.empty() && options_.config_file != "/dev/null") {
    const std::string text = read_input_file(options_.config_file, "SSH config file");
    if (options_.config_from_record) refuse_commands_in_config(options_.config_file, text);
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    const std::string config = std::string(home) + "/.ssh/config";
    if (input_path_present(config)) (void)read_input_file(config, "SSH config file");
  }
  if (!options_.identity_file.empty()) (void)read_input_file(options_.identity_file, "key file");
  if (options_.reconnect_attempts < 1) options_.reconnect_attempts = 1;
  // Resolve aliases now: name() and every message say where we really connect.
  SessionPtr s(new_session());
  char* value = nullptr;
  std::string user =
      ssh_options_get(s.get(), SSH_OPTIONS_USER, &value) == SSH_OK ? take_string(value) : "";
  if (user.empty()) user = local_user();
  name_ = user + "@" + session_hostname(s.get()) + ":" + std::to_string(session_port(s.get()));
  description_ = describe_session(s.get(), options_.host);
  // The jump hosts, read now: a hop hpclaunch cannot read is bad input before anything runs.
  const Route route = route_of(s.get(), options_.jump, options_.host);
  if (options_.config_from_record && !route.command.empty()) {
    throw UserError(options_.config_file, "a ProxyCommand for " + options_.host +
                    " in the ssh_config that run.json names: a run directory's record is "
                    "read as data and runs no command",
                    "pass --ssh-config " + options_.config_file + " to trust that file");
  }
  if (!route.jumps.empty()) {
    std::string via;
    for (const auto& hop : route.jumps) via += (via.empty() ? "" : ",") + hop;
    description_ += " via " + via;
  }
}

SshHost::~SshHost() { disconnect(); }

ssh_session SshHost::new_session() const {
  return make_session(options_, options_.host, true).release();
}

bool SshHost::session_alive() const {
  return session_ != nullptr && ssh_is_connected(session_) && (!chain_ || chain_->alive()) &&
         (ssh_get_status(session_) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0;
}

void SshHost::disconnect() {
  if (sftp_) {
    sftp_free(sftp_);
    sftp_ = nullptr;
  }
  if (session_) {
    SessionDeleter{}(session_);
    session_ = nullptr;
  }
  chain_.reset();  // after the session that ran over it
}

void SshHost::connect() {
  if (session_alive()) return;
  if (ever_connected_) {
    reconnect(session_ ? error_of(session_) : "the connection was closed");
    return;
  }
  disconnect();
  try {
    open_session();
  } catch (const NetworkError& e) {
    throw BackendUnreachable(
        "cannot connect to " + description_ + ": " + e.what() +
        "; check the host name and port (--host, ~/.ssh/config) and that its sshd "
        "is reachable from here");
  }
}

void SshHost::reconnect(const std::string& why) {
  disconnect();
  auto delay = options_.reconnect_delay;
  std::string last;
  for (int attempt = 1; attempt <= options_.reconnect_attempts; ++attempt) {
    if (attempt > 1) {
      std::this_thread::sleep_for(delay);
      delay *= 2;
    }
    try {
      open_session();
      ++reconnects_;
      return;
    } catch (const NetworkError& e) {
      last = e.what();
    }
  }
  throw BackendUnreachable("lost the connection to " + description_ + " (" + why + ") and " +
                           std::to_string(options_.reconnect_attempts) +
                           " attempts to reconnect failed: " + last +
                           "; check that the login node is reachable, then try again");
}

void SshHost::open_session() {
  // Declared first, so destroyed last: a session that ran over the chain says goodbye over it.
  std::unique_ptr<JumpChain> chain;
  SessionPtr s(new_session());
  const Route route = route_of(s.get(), options_.jump, options_.host);
  if (!route.jumps.empty()) {
    chain = connect_jumps(route.jumps, session_hostname(s.get()), session_port(s.get()));
    int fd = chain->next_fd();
    if (ssh_options_set(s.get(), SSH_OPTIONS_FD, &fd) != SSH_OK)
      throw BackendError("cannot connect over the jump hosts: " + error_of(s.get()));
  }
  if (ssh_connect(s.get()) != SSH_OK) throw NetworkError(error_of(s.get()));
  // The host key, before anything is sent that a server should not see; then the login.
  check_host_key(s.get(), options_, description_);
  log_in(s.get(), options_.identity_file, description_, options_.connect_timeout);

  // Follow mode keeps the connection for hours: let TCP notice a peer that vanished.
  int on = 1;
  if (!chain) setsockopt(ssh_get_fd(s.get()), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  session_ = s.release();
  chain_ = std::move(chain);
  ever_connected_ = true;
  ++logins_;
}

// The hops in front of the login node, each connected over the one before, its host key
// checked and its login made as the login node's are. The first hop's own ProxyJump (in the
// ssh config) puts its hops in front, as ssh does for `ssh -J first,...`.
std::unique_ptr<JumpChain> SshHost::connect_jumps(std::vector<std::string> hops,
                                                  const std::string& host, unsigned int port) {
  constexpr size_t kMaxHops = 8;
  auto chain = std::make_unique<JumpChain>();  // outlives the sessions that run over it
  std::vector<SessionPtr> sessions;
  for (size_t i = 0; i < hops.size(); ++i) {
    if (hops.size() > kMaxHops) {
      throw BackendError("more than " + std::to_string(kMaxHops) + " jump hosts in front of " +
                         description_ + " (a ProxyJump loop in the ssh config?); check the "
                         "ProxyJump lines of the hosts named in --jump or ~/.ssh/config");
    }
    SessionPtr hop = make_session(options_, hops[i], false);
    // The first hop's route is its own; every later one is reached over the hop before it.
    Route route = route_of(hop.get(), i == 0 ? "" : "none", hops[i]);
    if (i == 0 && !route.jumps.empty()) {
      // Its hops go first; then look at the (new) first hop again.
      hops.insert(hops.begin(), route.jumps.begin(), route.jumps.end());
      --i;  // wraps to the largest size_t; the loop's ++i makes it 0
      continue;
    }
    if (options_.config_from_record && !route.command.empty()) {
      throw UserError(options_.config_file, "a ProxyCommand for the jump host " + hops[i] +
                      " in the ssh_config that run.json names: a run directory's record is "
                      "read as data and runs no command",
                      "pass --ssh-config " + options_.config_file + " to trust that file");
    }
    sessions.push_back(std::move(hop));
  }
  for (size_t i = 0; i < sessions.size(); ++i) {
    ssh_session hop = sessions[i].get();
    const std::string description = "jump host " + describe_session(hop, hops[i]);
    if (i > 0) {
      int fd = chain->next_fd();
      if (ssh_options_set(hop, SSH_OPTIONS_FD, &fd) != SSH_OK)
        throw BackendError("cannot connect over the jump hosts: " + error_of(hop));
    }
    if (ssh_connect(hop) != SSH_OK) {
      throw NetworkError((i == 0 ? "cannot reach the " : "over the jumps, cannot reach the ") +
                         description + ": " + error_of(hop));
    }
    check_host_key(hop, options_, description);
    log_in(hop, "", description, options_.connect_timeout);
    if (i == 0) {
      int on = 1;
      setsockopt(ssh_get_fd(hop), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    }
    const bool last = i + 1 == sessions.size();
    chain->extend(std::move(sessions[i]), last ? host : session_hostname(sessions[i + 1].get()),
                  last ? port : session_port(sessions[i + 1].get()), description);
  }
  return chain;
}

sftp_session SshHost::sftp() {
  if (sftp_) {
    sftp_->errnum = SSH_FX_OK;  // a stale status must not explain the next failure
    return sftp_;
  }
  sftp_session s = sftp_new(session_);
  if (s == nullptr) throw ConnectionLost(error_of(session_));
  if (sftp_init(s) != SSH_OK) {
    int code = sftp_get_error(s);
    sftp_free(s);
    if (!session_alive()) throw ConnectionLost(error_of(session_));
    throw BackendError("cannot start SFTP on " + description_ + ": " +
                       (code ? sftp_error_text(code) : error_of(session_)) +
                       "; hpclaunch needs the server's sftp subsystem to write run directories "
                       "and read logs");
  }
  sftp_ = s;
  return sftp_;
}

// After a failed SFTP call: the status the server gave, or ConnectionLost when there was none.
int SshHost::sftp_status() {
  if (watchdog_ && watchdog_->fired()) {
    throw ConnectionLost("no answer within " + std::to_string(options_.io_timeout.count()) + " s");
  }
  if (!session_alive()) throw ConnectionLost(error_of(session_));
  int code = sftp_get_error(sftp_);
  // No status at all: the answer did not come in time. It may still be on its way, so this
  // session must not be used again (with_connection replaces it once open files are closed).
  if (code == SSH_FX_OK || code == SSH_FX_CONNECTION_LOST || code == SSH_FX_NO_CONNECTION)
    throw ConnectionLost(error_of(session_));
  return code;
}

void SshHost::throw_sftp_error(const std::string& what, const std::string& path, int code) {
  throw BackendError("cannot " + what + " " + path + " on " + description_ + ": " +
                     sftp_error_text(code));
}

std::string SshHost::home() {
  if (!home_.empty()) return home_;
  home_ = with_connection([&] {
    Deadline deadline = io_deadline();
    sftp_session s = sftp();
    char* raw = sftp_canonicalize_path(s, ".");
    if (raw == nullptr) {
      int code = sftp_status();
      throw BackendError("cannot find the home directory on " + description_ + ": " +
                         sftp_error_text(code));
    }
    std::string home = take_string(raw);
    if (home.empty() || home[0] != '/') {
      throw BackendError("the SFTP server of " + description_ +
                         " names no absolute home "
                         "directory (\"" +
                         home + "\"); give absolute paths");
    }
    return home;
  });
  return home_;
}

std::string SshHost::absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return normal_path(path);
  std::string rest = path;
  if (rest == "~")
    rest = "";
  else if (rest.rfind("~/", 0) == 0)
    rest = rest.substr(2);
  std::string base = home();
  return normal_path(rest.empty() ? base : base + "/" + rest);
}

}  // namespace hpc
