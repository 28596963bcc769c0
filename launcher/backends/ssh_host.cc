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

// Never ask for a passphrase on the terminal: an encrypted key belongs in ssh-agent.
int no_passphrase(const char*, char*, size_t, int, int, void*) { return -1; }

ssh_callbacks_struct* session_callbacks() {
  static ssh_callbacks_struct callbacks = [] {
    ssh_callbacks_struct cb{};
    ssh_callbacks_init(&cb);
    cb.auth_function = no_passphrase;
    return cb;
  }();
  return &callbacks;
}

std::string local_user() {
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_name) return pw->pw_name;
  const char* u = std::getenv("USER");
  return u ? u : "";
}

std::string auth_methods(int methods) {
  std::string out;
  auto add = [&](int bit, const char* name) {
    if (methods & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(SSH_AUTH_METHOD_PUBLICKEY, "publickey");
  add(SSH_AUTH_METHOD_PASSWORD, "password");
  add(SSH_AUTH_METHOD_INTERACTIVE, "keyboard-interactive");
  add(SSH_AUTH_METHOD_HOSTBASED, "hostbased");
  add(SSH_AUTH_METHOD_GSSAPI_MIC, "gssapi-with-mic");
  return out.empty() ? "no method we could see" : out;
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
    const bool runs = word == "proxycommand" || word == "proxyjump" || word == "localcommand" ||
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
  std::string hostname =
      ssh_options_get(s.get(), SSH_OPTIONS_HOST, &value) == SSH_OK ? take_string(value) : "";
  value = nullptr;
  std::string user =
      ssh_options_get(s.get(), SSH_OPTIONS_USER, &value) == SSH_OK ? take_string(value) : "";
  if (user.empty()) user = local_user();
  unsigned int port = 22;
  ssh_options_get_port(s.get(), &port);
  name_ = user + "@" + hostname + ":" + std::to_string(port);
  std::string alias = options_.host.substr(options_.host.find('@') + 1);
  description_ = alias == hostname ? name_ : alias + " (" + name_ + ")";
}

SshHost::~SshHost() { disconnect(); }

ssh_session SshHost::new_session() const {
  SessionPtr s(ssh_new());
  if (!s) throw BackendError("cannot create an SSH session (out of memory)");
  auto set = [&](ssh_options_e option, const void* value, const char* what) {
    if (ssh_options_set(s.get(), option, value) != SSH_OK) {
      throw BackendError("invalid SSH " + std::string(what) + " for " + options_.host + ": " +
                         error_of(s.get()));
    }
  };
  set(SSH_OPTIONS_HOST, options_.host.c_str(), "host");
  // libssh prints warnings to stderr (skipped known_hosts files, unknown global requests; libssh
  // 0.11 of Debian 13 also each config option it does not know, "Unsupported option:
  // BatchMode"), also when the config says LogLevel: our errors say what matters in one line.
  // Quiet before the config is read and again after it. LIBSSH_DEBUG=N still shows them.
  const bool quiet = std::getenv("LIBSSH_DEBUG") == nullptr;
  int no_log = SSH_LOG_NOLOG;
  if (quiet) set(SSH_OPTIONS_LOG_VERBOSITY, &no_log, "log level");
  // Read the config after the host is set: its Host blocks match the name given here.
  const char* config = options_.config_file.empty() ? nullptr : options_.config_file.c_str();
  if (ssh_options_parse_config(s.get(), config) != SSH_OK) {
    throw BackendError("cannot parse the ssh config " +
                       (config ? options_.config_file : std::string("~/.ssh/config")) + ": " +
                       error_of(s.get()));
  }
  // Explicit options override the config.
  if (!options_.user.empty()) set(SSH_OPTIONS_USER, options_.user.c_str(), "user");
  if (options_.port > 0) {
    unsigned int port = static_cast<unsigned int>(options_.port);
    set(SSH_OPTIONS_PORT, &port, "port");
  }
  if (!options_.known_hosts_file.empty())
    set(SSH_OPTIONS_KNOWNHOSTS, options_.known_hosts_file.c_str(), "known_hosts file");
  long timeout = std::max<long>(1, static_cast<long>(options_.connect_timeout.count()));
  set(SSH_OPTIONS_TIMEOUT, &timeout, "timeout");
  // Unknown keys are refused unless accept_new_host_key, whatever the config says.
  int strict = 1;
  set(SSH_OPTIONS_STRICTHOSTKEYCHECK, &strict, "StrictHostKeyChecking");
  // Every SFTP call waits for its answer: Nagle's algorithm would add a delayed ACK to each.
  int nodelay = 1;
  set(SSH_OPTIONS_NODELAY, &nodelay, "TCP_NODELAY");
  if (quiet) set(SSH_OPTIONS_LOG_VERBOSITY, &no_log, "log level");
  ssh_set_callbacks(s.get(), session_callbacks());
  return s.release();
}

bool SshHost::session_alive() const {
  return session_ != nullptr && ssh_is_connected(session_) &&
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
  SessionPtr s(new_session());
  if (ssh_connect(s.get()) != SSH_OK) throw NetworkError(error_of(s.get()));

  // The host key, before anything is sent that a server should not see.
  ssh_key raw_key = nullptr;
  if (ssh_get_server_publickey(s.get(), &raw_key) != SSH_OK) throw NetworkError(error_of(s.get()));
  KeyPtr key(raw_key);
  unsigned char* hash = nullptr;
  size_t hash_len = 0;
  std::string fingerprint = "(no fingerprint)";
  if (ssh_get_publickey_hash(key.get(), SSH_PUBLICKEY_HASH_SHA256, &hash, &hash_len) == SSH_OK) {
    fingerprint = take_string(ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hash_len));
    ssh_clean_pubkey_hash(&hash);
  }
  std::string key_text =
      std::string(ssh_key_type_to_char(ssh_key_type(key.get()))) + " key " + fingerprint;
  char* value = nullptr;
  std::string known_hosts = ssh_options_get(s.get(), SSH_OPTIONS_KNOWNHOSTS, &value) == SSH_OK
                                ? take_string(value)
                                : "~/.ssh/known_hosts";
  unsigned int port = 22;
  ssh_options_get_port(s.get(), &port);
  value = nullptr;
  std::string hostname =
      ssh_options_get(s.get(), SSH_OPTIONS_HOST, &value) == SSH_OK ? take_string(value) : "";
  std::string entry = port == 22 ? hostname : "[" + hostname + "]:" + std::to_string(port);

  switch (ssh_session_is_known_server(s.get())) {
    case SSH_KNOWN_HOSTS_OK:
      break;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      throw BackendError("refusing " + description_ + ": its host key (" + key_text +
                         ") differs from the one recorded for " + entry + " in " + known_hosts +
                         "; someone may be intercepting the connection (or the host was "
                         "reinstalled): confirm the new key with the cluster's admins, then "
                         "remove the old entry with ssh-keygen -R '" +
                         entry + "' -f " + known_hosts);
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (!options_.accept_new_host_key) {
        throw BackendError("refusing " + description_ + ": its host key (" + key_text +
                           ") is not in " + known_hosts +
                           "; if that is the login node's key, "
                           "rerun with --accept-new-host-key, or add it to " +
                           known_hosts + " (ssh-keyscan -p " + std::to_string(port) + " " +
                           hostname + ")");
      }
      if (ssh_session_update_known_hosts(s.get()) != SSH_OK) {
        throw BackendError("cannot record the host key of " + description_ + " in " + known_hosts +
                           ": " + error_of(s.get()));
      }
      break;
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      throw BackendError("cannot check the host key of " + description_ + " against " +
                         known_hosts + ": " + error_of(s.get()));
  }

  // Log in with a key: the identity file given, else ssh-agent and the config's/default keys.
  int rc;
  std::string tried;
  if (!options_.identity_file.empty()) {
    ssh_key raw = nullptr;
    if (ssh_pki_import_privkey_file(options_.identity_file.c_str(), nullptr, no_passphrase, nullptr,
                                    &raw) != SSH_OK) {
      throw BackendError("cannot load the identity file " + options_.identity_file +
                         " (is it a private key? an encrypted one must be added to ssh-agent "
                         "with ssh-add, then leave out the identity file)");
    }
    KeyPtr identity(raw);
    rc = ssh_userauth_publickey(s.get(), nullptr, identity.get());
    tried = "the key " + options_.identity_file;
  } else {
    rc = ssh_userauth_publickey_auto(s.get(), nullptr, nullptr);
    tried = "ssh-agent and the keys of the ssh config and ~/.ssh";
  }
  if (rc == SSH_AUTH_ERROR) throw NetworkError(error_of(s.get()));
  if (rc == SSH_AUTH_AGAIN) {
    throw NetworkError("no answer to the login within " +
                       std::to_string(options_.connect_timeout.count()) + " s");
  }
  if (rc != SSH_AUTH_SUCCESS) {
    int methods = ssh_userauth_list(s.get(), nullptr);
    std::string partial =
        rc == SSH_AUTH_PARTIAL ? " (the key was accepted, but it wants more)" : "";
    throw BackendError(description_ + " refused the login" + partial + ": tried " + tried +
                       "; the server offers " + auth_methods(methods) +
                       "; add your public key to ~/.ssh/authorized_keys there, or name the right "
                       "key with IdentityFile in ~/.ssh/config (hpclaunch logs in with keys only)");
  }

  // Follow mode keeps the connection for hours: let TCP notice a peer that vanished.
  int on = 1;
  setsockopt(ssh_get_fd(s.get()), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  session_ = s.release();
  ever_connected_ = true;
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
