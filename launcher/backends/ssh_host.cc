#include "backends/ssh_host.h"

#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "render/shell.h"

namespace hpc {
namespace {

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
std::string take_string(char* s) {
  if (s == nullptr) return "";
  std::string out = s;
  ssh_string_free_char(s);
  return out;
}

std::string error_of(ssh_session s) {
  std::string e = ssh_get_error(s);
  // libssh's messages sometimes end with a newline or carry one inside.
  std::replace(e.begin(), e.end(), '\n', ' ');
  while (!e.empty() && e.back() == ' ') e.pop_back();
  return e.empty() ? "unknown error" : e;
}

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

// "TERM" (an exit-signal's name) -> SIGTERM.
int signal_number(const std::string& name) {
  static const std::pair<const char*, int> table[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},
      {"TRAP", SIGTRAP}, {"ABRT", SIGABRT}, {"BUS", SIGBUS},   {"FPE", SIGFPE},
      {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
      {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"XCPU", SIGXCPU},
      {"XFSZ", SIGXFSZ}};
  for (const auto& [n, number] : table)
    if (name == n) return number;
  return SIGTERM;  // a name we do not know: it was still a signal
}

std::string sftp_error_text(int code) {
  switch (code) {
    case SSH_FX_EOF: return "end of file";
    case SSH_FX_NO_SUCH_FILE: return "No such file or directory";
    case SSH_FX_PERMISSION_DENIED: return "Permission denied";
    case SSH_FX_FAILURE: return "failed (it may exist already, or the disk is full)";
    case SSH_FX_BAD_MESSAGE: return "the server did not understand the request";
    case SSH_FX_OP_UNSUPPORTED: return "not supported by the server";
    case SSH_FX_INVALID_HANDLE: return "invalid handle";
    case SSH_FX_NO_SUCH_PATH: return "No such file or directory";
    case SSH_FX_FILE_ALREADY_EXISTS: return "File exists";
    case SSH_FX_WRITE_PROTECT: return "Read-only file system";
    case SSH_FX_NO_MEDIA: return "no medium";
    default: return "SFTP error " + std::to_string(code);
  }
}

std::string normal_path(const std::string& p) {
  std::string s = std::filesystem::path(p).lexically_normal().generic_string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string parent_of(const std::string& p) {
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

std::string first_line(const std::string& s) {
  size_t start = s.find_first_not_of(" \n");
  if (start == std::string::npos) return "";
  size_t end = s.find('\n', start);
  return s.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// What an exec channel reports besides its data.
struct ExitReport {
  bool status_seen = false;
  int status = -1;
  std::string signal;
};

void on_exit_status(ssh_session, ssh_channel, int status, void* userdata) {
  auto* r = static_cast<ExitReport*>(userdata);
  r->status_seen = true;
  r->status = status;
}

void on_exit_signal(ssh_session, ssh_channel, const char* signal, int, const char*, const char*,
                    void* userdata) {
  static_cast<ExitReport*>(userdata)->signal = signal ? signal : "TERM";
}

}  // namespace

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
  void arm(int fd, Clock::time_point deadline) {
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
      } else if (Clock::now() < deadline_) {
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
  Clock::time_point deadline_;
  bool stop_ = false;
  bool fired_ = false;
  std::thread thread_;  // last: starts when the rest is ready
};

// Arms the watchdog for one file operation; disarms it when the operation is over.
class SshHost::Deadline {
 public:
  Deadline(SocketWatchdog& watchdog, int fd, std::chrono::seconds limit) : watchdog_(watchdog) {
    watchdog_.arm(fd, Clock::now() + limit);
  }
  ~Deadline() { watchdog_.disarm(); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  SocketWatchdog& watchdog_;
};

SshHost::Deadline SshHost::io_deadline() {
  if (!watchdog_) watchdog_ = std::make_unique<SocketWatchdog>();
  return Deadline(*watchdog_, ssh_get_fd(session_), options_.io_timeout);
}

SshHost::SshHost(SshHostOptions options) : options_(std::move(options)) {
  if (options_.host.empty()) {
    throw BackendError("no SSH host given; name the login node with --host (a host name or an "
                       "alias from ~/.ssh/config)");
  }
  if (!options_.config_file.empty() && access(options_.config_file.c_str(), R_OK) != 0) {
    throw BackendError("cannot read the ssh config " + options_.config_file + ": " +
                       std::strerror(errno));
  }
  if (!options_.identity_file.empty() && access(options_.identity_file.c_str(), R_OK) != 0) {
    throw BackendError("cannot read the identity file " + options_.identity_file + ": " +
                       std::strerror(errno) + "; name an existing private key");
  }
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
  // libssh prints warnings to stderr (skipped known_hosts files, unknown global requests),
  // also when the config says LogLevel: our errors say what matters in one line.
  // LIBSSH_DEBUG=N still shows them.
  if (std::getenv("LIBSSH_DEBUG") == nullptr) {
    int quiet = SSH_LOG_NOLOG;
    set(SSH_OPTIONS_LOG_VERBOSITY, &quiet, "log level");
  }
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
    throw BackendError("cannot connect to " + description_ + ": " + e.what() +
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
  throw BackendError("lost the connection to " + description_ + " (" + why + ") and " +
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
  std::string key_text = std::string(ssh_key_type_to_char(ssh_key_type(key.get()))) + " key " +
                         fingerprint;
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
                         "remove the old entry with ssh-keygen -R '" + entry + "' -f " +
                         known_hosts);
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (!options_.accept_new_host_key) {
        throw BackendError("refusing " + description_ + ": its host key (" + key_text +
                           ") is not in " + known_hosts + "; if that is the login node's key, "
                           "rerun with --accept-new-host-key, or add it to " + known_hosts +
                           " (ssh-keyscan -p " + std::to_string(port) + " " + hostname + ")");
      }
      if (ssh_session_update_known_hosts(s.get()) != SSH_OK) {
        throw BackendError("cannot record the host key of " + description_ + " in " +
                           known_hosts + ": " + error_of(s.get()));
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
    if (ssh_pki_import_privkey_file(options_.identity_file.c_str(), nullptr, no_passphrase,
                                    nullptr, &raw) != SSH_OK) {
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

template <class Op>
auto SshHost::with_connection(Op&& op) -> decltype(op()) {
  connect();
  try {
    return op();
  } catch (const ConnectionLost& e) {
    reconnect(e.what());
  }
  try {
    return op();
  } catch (const ConnectionLost& e) {
    disconnect();
    throw BackendError("lost the connection to " + description_ + " again right after "
                       "reconnecting: " + e.what());
  }
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
    throw ConnectionLost("no answer within " + std::to_string(options_.io_timeout.count()) +
                         " s");
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
      throw BackendError("the SFTP server of " + description_ + " names no absolute home "
                         "directory (\"" + home + "\"); give absolute paths");
    }
    return home;
  });
  return home_;
}

std::string SshHost::absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return normal_path(path);
  std::string rest = path;
  if (rest == "~") rest = "";
  else if (rest.rfind("~/", 0) == 0) rest = rest.substr(2);
  std::string base = home();
  return normal_path(rest.empty() ? base : base + "/" + rest);
}

// ------------------------------------------------------------------------------------ run

CommandResult SshHost::run(const std::vector<std::string>& argv, const CommandOptions& options) {
  if (argv.empty()) throw std::invalid_argument("SshHost::run: empty argv");
  std::string command;
  if (!options.cwd.empty()) command += "cd " + shell_quote(absolute(options.cwd)) + " && ";
  command += "exec";
  if (!options.env.empty()) {
    command += " env";
    for (const auto& kv : options.env) command += " " + shell_quote(kv);
  }
  for (const auto& a : argv) command += " " + shell_quote(a);

  CommandResult result;
  // Opening the channel is safe to repeat after a reconnect; the command has not started.
  ChannelPtr channel = with_connection([&] {
    ChannelPtr c(ssh_channel_new(session_));
    if (!c) throw ConnectionLost(error_of(session_));
    if (ssh_channel_open_session(c.get()) != SSH_OK) {
      if (!session_alive()) throw ConnectionLost(error_of(session_));
      // Alive but refused (MaxSessions, ...): the server may be shutting it down.
      std::string why = error_of(session_);
      c.reset();
      disconnect();
      throw ConnectionLost(why);
    }
    return c;
  });

  ExitReport report;
  ssh_channel_callbacks_struct callbacks{};
  ssh_callbacks_init(&callbacks);
  callbacks.userdata = &report;
  callbacks.channel_exit_status_function = on_exit_status;
  callbacks.channel_exit_signal_function = on_exit_signal;
  ssh_set_channel_callbacks(channel.get(), &callbacks);

  auto lost = [&](const std::string& when) {
    result.timed_out = true;
    std::string why = session_ ? error_of(session_) : "closed";
    if (!result.err.empty() && result.err.back() != '\n') result.err += '\n';
    result.err += "lost the connection to " + description_ + " " + when + " (" + why +
                  "); it may or may not have run";
  };

  if (ssh_channel_request_exec(channel.get(), command.c_str()) != SSH_OK) {
    ssh_remove_channel_callbacks(channel.get(), &callbacks);
    if (!session_alive()) {
      lost("while starting " + argv[0]);
      channel.reset();
      disconnect();
      return result;
    }
    result.spawn_error = description_ + " refused to run " + argv[0] + ": " + error_of(session_);
    return result;
  }

  const std::string input = options.stdin_data.value_or("");
  size_t written = 0;
  bool eof_sent = false;
  bool dead = false;
  auto deadline = Clock::now() + options.timeout;
  ssh_event event = ssh_event_new();
  ssh_event_add_session(event, session_);
  char buf[65536];
  for (;;) {
    // stdin, as much as the remote window takes (never block on a full window).
    if (!eof_sent) {
      if (written < input.size()) {
        uint32_t window = ssh_channel_window_size(channel.get());
        size_t n = std::min<size_t>({input.size() - written, window, 32768});
        if (n > 0) {
          int w = ssh_channel_write(channel.get(), input.data() + written,
                                    static_cast<uint32_t>(n));
          if (w == SSH_ERROR) {
            if (!session_alive()) { dead = true; break; }
            written = input.size();  // the command closed its stdin: drop the rest
          } else {
            written += static_cast<size_t>(w);
          }
        }
      }
      if (written >= input.size()) {
        ssh_channel_send_eof(channel.get());
        eof_sent = true;
      }
    }
    // stdout and stderr, whatever has arrived.
    bool eof[2] = {false, false};
    for (int stream = 0; stream < 2 && !dead; ++stream) {
      std::string& sink = stream ? result.err : result.out;
      for (;;) {
        int n = ssh_channel_read_nonblocking(channel.get(), buf, sizeof buf, stream);
        if (n > 0) {
          sink.append(buf, static_cast<size_t>(n));
          continue;
        }
        if (n == SSH_EOF) eof[stream] = true;
        if (n == SSH_ERROR) dead = !session_alive();
        break;
      }
    }
    if (dead) break;
    bool finished = report.status_seen || !report.signal.empty() ||
                    ssh_channel_is_closed(channel.get());
    if (eof[0] && eof[1] && finished) break;
    if (ssh_channel_is_closed(channel.get()) && eof[0] && eof[1]) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      // Kill what runs there, then close our end. OpenSSH >= 7.9 passes the signal on to the
      // command's process group, but refuses it for root logins (no privilege separation):
      // then the command runs on until it ends by itself.
      ssh_channel_request_send_signal(channel.get(), "KILL");
      ssh_channel_close(channel.get());
      break;
    }
    // Wait for the next packet. With stdin still to send, wake up soon to retry the window.
    int wait_ms =
        static_cast<int>(std::min<long long>(left.count(), written < input.size() ? 20 : 1000));
    if (ssh_event_dopoll(event, wait_ms) == SSH_ERROR || !session_alive()) {
      if (!session_alive()) { dead = true; break; }
    }
  }
  ssh_event_remove_session(event, session_);
  ssh_event_free(event);
  ssh_remove_channel_callbacks(channel.get(), &callbacks);

  if (dead) {
    lost("while " + argv[0] + " ran");
    channel.reset();
    disconnect();
    return result;
  }
  if (!result.timed_out) {
    if (!report.signal.empty()) {
      result.term_signal = signal_number(report.signal);
    } else {
      result.exit_code = report.status_seen ? report.status : -1;
    }
    // The shell could not find the program: say so the way LocalHost does.
    if (result.exit_code == 127 && result.out.empty() &&
        result.err.find("not found") != std::string::npos) {
      result.spawn_error = first_line(result.err);
    }
    ssh_channel_close(channel.get());
  }
  return result;
}

// ------------------------------------------------------------------------------------ files

std::string SshHost::remote_path(const std::string& path) {
  if (path == "~" || path.rfind("~/", 0) == 0) return absolute(path);
  return path;
}

void SshHost::make_dirs(const std::string& path) {
  const std::string target = absolute(path);
  with_connection([&] { make_dirs_now(target); });
}

void SshHost::make_dirs_now(const std::string& target) {
  Deadline deadline = io_deadline();
  sftp_session s = sftp();
  auto is_dir = [&](const std::string& p, bool* exists) {
    s->errnum = SSH_FX_OK;
    AttributesPtr a(sftp_stat(s, p.c_str()));
    if (!a) {
      int code = sftp_status();
      if (code != SSH_FX_NO_SUCH_FILE && code != SSH_FX_NO_SUCH_PATH)
        throw_sftp_error("create directory", p, code);
      *exists = false;
      return false;
    }
    *exists = true;
    return a->type == SSH_FILEXFER_TYPE_DIRECTORY;
  };
  // Walk up to the deepest directory that exists, then create the rest going down.
  std::vector<std::string> missing;
  std::string p = target;
  for (;;) {
    bool exists = false;
    bool dir = is_dir(p, &exists);
    if (exists) {
      if (!dir) {
        throw BackendError("cannot create directory " + target + " on " + description_ + ": " +
                           p + " exists and is not a directory");
      }
      break;
    }
    missing.push_back(p);
    if (p == "/") break;
    p = parent_of(p);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    s->errnum = SSH_FX_OK;
    if (sftp_mkdir(s, it->c_str(), 0755) == SSH_OK) continue;
    int code = sftp_status();
    bool exists = false;
    if (is_dir(*it, &exists)) continue;  // made by someone else meanwhile
    throw_sftp_error("create directory", *it, code);
  }
}

void SshHost::write_file(const std::string& path, const std::string& content, int mode) {
  const std::string target = remote_path(path);
  with_connection([&] { write_file_now(target, content, mode); });
}

void SshHost::write_file_now(const std::string& target, const std::string& content, int mode) {
  size_t slash = target.rfind('/');
  std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string temp = dir + "." + base + ".hpclaunch-" + std::to_string(getpid()) + "-" +
                     std::to_string(++temp_counter_) + ".tmp";
  bool temp_exists = false;
  try {
    {
      Deadline deadline = io_deadline();
      sftp_session s = sftp();
      {
        FilePtr f(sftp_open(s, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600));
        if (!f) throw_sftp_error("write", target, sftp_status());
        temp_exists = true;
        for (size_t done = 0; done < content.size();) {
          size_t n = std::min<size_t>(content.size() - done, 32768);
          s->errnum = SSH_FX_OK;
          ssize_t w = sftp_write(f.get(), content.data() + done, n);
          if (w <= 0) throw_sftp_error("write", target, sftp_status());
          done += static_cast<size_t>(w);
        }
        s->errnum = SSH_FX_OK;
        if (sftp_close(f.release()) != SSH_OK) throw_sftp_error("write", target, sftp_status());
      }
      s->errnum = SSH_FX_OK;
      if (sftp_chmod(s, temp.c_str(), static_cast<mode_t>(mode)) != SSH_OK)
        throw_sftp_error("set the mode of", target, sftp_status());
      s->errnum = SSH_FX_OK;
      if (sftp_rename(s, temp.c_str(), target.c_str()) == SSH_OK) return;
      int code = sftp_status();
      s->errnum = SSH_FX_OK;
      AttributesPtr existing(sftp_stat(s, target.c_str()));
      if (!existing) throw_sftp_error("write", target, code);
    }
    // SFTP v3 rename refuses an existing target (OpenSSH links, then unlinks), and libssh 0.10
    // cannot send posix-rename@openssh.com. mv is rename(2): the swap is still atomic.
    CommandOptions o;
    o.timeout = std::chrono::seconds(std::max<long>(30, options_.connect_timeout.count()));
    CommandResult r = run({"mv", "-f", "--", temp, target}, o);
    if (!r.ok()) {
      throw BackendError("cannot replace " + target + " on " + description_ + ": " +
                         r.summary("mv"));
    }
  } catch (...) {
    // Best effort. sftp_, not s: the mv may have reconnected (then the temp file stays).
    if (temp_exists && session_alive() && sftp_) {
      Deadline deadline = io_deadline();
      sftp_unlink(sftp_, temp.c_str());
    }
    throw;
  }
}

LogChunk SshHost::read_file(const std::string& path, uint64_t offset, size_t max_bytes) {
  const std::string target = remote_path(path);
  return with_connection([&] { return read_file_now(target, offset, max_bytes); });
}

LogChunk SshHost::read_file_now(const std::string& target, uint64_t offset, size_t max_bytes) {
  LogChunk chunk;
  chunk.next_offset = offset;
  Deadline deadline = io_deadline();
  sftp_session s = sftp();
  FilePtr f(sftp_open(s, target.c_str(), O_RDONLY, 0));
  if (!f) {
    int code = sftp_status();
    if (code == SSH_FX_NO_SUCH_FILE || code == SSH_FX_NO_SUCH_PATH) return chunk;
    throw_sftp_error("read", target, code);
  }
  chunk.exists = true;
  s->errnum = SSH_FX_OK;
  AttributesPtr attributes(sftp_fstat(f.get()));
  if (!attributes) throw_sftp_error("read", target, sftp_status());
  if ((attributes->flags & SSH_FILEXFER_ATTR_SIZE) && attributes->size < offset) {
    offset = 0;  // truncated or replaced: start over
  }
  if (sftp_seek64(f.get(), offset) != 0) throw_sftp_error("read", target, SSH_FX_FAILURE);
  chunk.data.resize(max_bytes);
  size_t got = 0;
  while (got < max_bytes) {
    s->errnum = SSH_FX_OK;
    ssize_t n =
        sftp_read(f.get(), chunk.data.data() + got, std::min<size_t>(max_bytes - got, 65536));
    if (n == 0) break;
    if (n < 0) throw_sftp_error("read", target, sftp_status());
    got += static_cast<size_t>(n);
  }
  chunk.data.resize(got);
  chunk.next_offset = offset + got;
  return chunk;
}

}  // namespace hpc
