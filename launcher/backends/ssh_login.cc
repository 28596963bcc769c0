// One SSH session's settings, host key check and login: what the login node and every jump
// host in front of it share (ssh_internal.h). Keyboard-interactive prompts (a one-time code, a
// password through PAM) are answered on the terminal, never from a file or the environment.
#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <regex>

#include "backends/ssh_internal.h"
#include "error.h"
#include "shell.h"

namespace hpc {
namespace ssh_detail {
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

// The terminal of this process (/dev/tty, as ssh uses), for the server's prompts. The
// terminal's settings are restored when an answer is read, and by a signal that ends the
// process while echo is off.
class Terminal {
 public:
  Terminal() : fd_(open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)) {}
  ~Terminal() {
    if (fd_ >= 0) close(fd_);
  }
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;
  bool present() const { return fd_ >= 0 && isatty(fd_); }

  void say(const std::string& text) const {
    for (size_t done = 0; done < text.size();) {
      ssize_t n = write(fd_, text.data() + done, text.size() - done);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

  // One line typed on the terminal (without its newline); echo off unless `echo`.
  std::string ask(const std::string& prompt, bool echo) {
    termios before{};
    const bool hide = !echo && tcgetattr(fd_, &before) == 0;
    if (hide) {
      saved_ = before;
      saved_fd_ = fd_;
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) std::signal(sig, restore_and_die);
      termios quiet = before;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      quiet.c_lflag |= ECHONL;
      // TCSANOW: an answer typed (or pasted) ahead of the prompt is kept, not flushed.
      tcsetattr(fd_, TCSANOW, &quiet);
    }
    say(prompt);  // once echo is off: an answer typed right after it is not shown
    std::string line;
    char c;
    while (read(fd_, &c, 1) == 1 && c != '\n' && c != '\r') line += c;
    if (hide) {
      tcsetattr(fd_, TCSANOW, &before);
      saved_fd_ = -1;
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) std::signal(sig, SIG_DFL);
    }
    return line;
  }

 private:
  static void restore_and_die(int sig) {
    if (saved_fd_ >= 0) tcsetattr(saved_fd_, TCSANOW, &saved_);
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  static inline termios saved_{};
  static inline volatile sig_atomic_t saved_fd_ = -1;
  int fd_;
};

// Text from the server shown on the terminal: printable, one line.
std::string shown(const char* text) { return text ? comment_text(text) : ""; }

// keyboard-interactive: every round of questions the server sends, answered on the terminal.
int keyboard_interactive(ssh_session s, const std::string& description) {
  Terminal tty;
  bool greeted = false;
  int rc = ssh_userauth_kbdint(s, nullptr, nullptr);
  while (rc == SSH_AUTH_INFO) {
    const int n = ssh_userauth_kbdint_getnprompts(s);
    const std::string name = shown(ssh_userauth_kbdint_getname(s));
    const std::string instruction = shown(ssh_userauth_kbdint_getinstruction(s));
    if (n > 0 && !tty.present()) {
      char echo = 0;
      throw BackendError(description + " asks for a one-time code or password (\"" +
                         shown(ssh_userauth_kbdint_getprompt(s, 0, &echo)) +
                         "\", keyboard-interactive login) and there is no terminal to ask on; "
                         "run this hpclaunch command in a terminal, or log in with a key "
                         "that the server accepts alone (nothing was submitted)");
    }
    if (n > 0 && !greeted) {
      tty.say("hpclaunch: " + description + " asks:\n");
      greeted = true;
    }
    if (n > 0 && !name.empty()) tty.say(name + "\n");
    if (n > 0 && !instruction.empty()) tty.say(instruction + "\n");
    for (int i = 0; i < n; ++i) {
      char echo = 0;
      const std::string prompt = shown(ssh_userauth_kbdint_getprompt(s, i, &echo));
      std::string answer = tty.ask(prompt.empty() ? "answer: " : prompt, echo != 0);
      const int set = ssh_userauth_kbdint_setanswer(s, static_cast<unsigned>(i), answer.c_str());
      std::fill(answer.begin(), answer.end(), '\0');
      if (set < 0) throw NetworkError(error_of(s));
    }
    rc = ssh_userauth_kbdint(s, nullptr, nullptr);
  }
  return rc;
}

bool valid_hop(const std::string& hop) {
  if (hop.empty() || hop[0] == '-' || hop.size() > 255) return false;
  for (unsigned char c : hop)
    if (c <= ' ' || c == 0x7f || c == '\'' || c == '"' || c == '\\' || c == ',') return false;
  return true;
}

}  // namespace

std::string session_hostname(ssh_session s) {
  char* value = nullptr;
  return ssh_options_get(s, SSH_OPTIONS_HOST, &value) == SSH_OK ? take_string(value) : "";
}

unsigned int session_port(ssh_session s) {
  unsigned int port = 22;
  ssh_options_get_port(s, &port);
  return port;
}

std::string describe_session(ssh_session s, const std::string& host) {
  char* value = nullptr;
  std::string user = ssh_options_get(s, SSH_OPTIONS_USER, &value) == SSH_OK ? take_string(value)
                                                                               : "";
  const std::string hostname = session_hostname(s);
  const std::string name = user + "@" + hostname + ":" + std::to_string(session_port(s));
  std::string alias = host.substr(host.find('@') + 1);
  if (size_t colon = alias.rfind(':'); colon != std::string::npos && alias.find(']') == alias.npos)
    alias = alias.substr(0, colon);
  return alias == hostname ? name : alias + " (" + name + ")";
}

SessionPtr make_session(const SshHostOptions& o, const std::string& host, bool is_target) {
  SessionPtr s(ssh_new());
  if (!s) throw BackendError("cannot create an SSH session (out of memory)");
  auto set = [&](ssh_options_e option, const void* value, const char* what) {
    if (ssh_options_set(s.get(), option, value) != SSH_OK) {
      throw BackendError("invalid SSH " + std::string(what) + " for " + host + ": " +
                         error_of(s.get()));
    }
  };
  // A jump host written "user@host:port" (ProxyJump's form): libssh's SSH_OPTIONS_HOST takes
  // "user@host", the port is set after the config, which it overrides as ssh's -J does.
  std::string name = host;
  unsigned int hop_port = 0;
  if (!is_target) {
    const size_t colon = name.rfind(':');
    const size_t bracket = name.rfind(']');
    if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
      const std::string digits = name.substr(colon + 1);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
          digits.size() > 5 || std::stoul(digits) == 0 || std::stoul(digits) > 65535) {
        throw BackendError("jump host \"" + comment_text(host) +
                           "\": the part after ':' is not a port (1-65535)");
      }
      hop_port = static_cast<unsigned int>(std::stoul(digits));
      name = name.substr(0, colon);
    }
    // "[::1]" -> "::1"
    const size_t at = name.find('@');
    const size_t start = at == std::string::npos ? 0 : at + 1;
    if (name.size() > start + 1 && name[start] == '[' && name.back() == ']')
      name = name.substr(0, start) + name.substr(start + 1, name.size() - start - 2);
  }
  set(SSH_OPTIONS_HOST, name.c_str(), "host");
  // libssh prints warnings to stderr (skipped known_hosts files, unknown global requests; libssh
  // 0.11 of Debian 13 also each config option it does not know, "Unsupported option:
  // BatchMode"), also when the config says LogLevel: our errors say what matters in one line.
  // The config parser logs at libssh's global level, which the config's own LogLevel line
  // raises again before the lines after it are read: so the log goes to a callback that drops
  // it, and the session's level is set again after the config. LIBSSH_DEBUG=N still shows them.
  const bool quiet = std::getenv("LIBSSH_DEBUG") == nullptr;
  int no_log = SSH_LOG_NOLOG;
  if (quiet) {
    ssh_set_log_callback([](int, const char*, const char*, void*) {});
    set(SSH_OPTIONS_LOG_VERBOSITY, &no_log, "log level");
  }
  // libssh 0.11 (Debian 13) connects a config's ProxyJump hops itself, with its own host key
  // check and login on each (none of --known-hosts, --accept-new-host-key or the terminal's
  // one-time code), unless OPENSSH_PROXYJUMP=1: then it renders the line as 0.10 does, as the
  // ProxyCommand that route_of() reads back (libssh src/misc.c ssh_libssh_proxy_jumps,
  // src/config.c). 0.10 does not read it. Set once, before the first config is parsed, when
  // no jump thread runs yet (setenv is not safe beside another thread's getenv).
  static const bool own_jumps = setenv("OPENSSH_PROXYJUMP", "1", 1) == 0;
  if (!own_jumps) throw BackendError("cannot set OPENSSH_PROXYJUMP for libssh (out of memory)");
  // Read the config after the host is set: its Host blocks match the name given here.
  const char* config = o.config_file.empty() ? nullptr : o.config_file.c_str();
  if (ssh_options_parse_config(s.get(), config) != SSH_OK) {
    throw BackendError("cannot parse the ssh config " +
                       (config ? o.config_file : std::string("~/.ssh/config")) + " for " +
                       comment_text(host) + ": " + error_of(s.get()) +
                       " (a ProxyJump hop is [user@]host[:port], several separated by commas)");
  }
  // Explicit options override the config.
  if (is_target && !o.user.empty()) set(SSH_OPTIONS_USER, o.user.c_str(), "user");
  if (is_target && o.port > 0) {
    unsigned int port = static_cast<unsigned int>(o.port);
    set(SSH_OPTIONS_PORT, &port, "port");
  }
  if (hop_port > 0) set(SSH_OPTIONS_PORT, &hop_port, "port");
  if (!o.known_hosts_file.empty())
    set(SSH_OPTIONS_KNOWNHOSTS, o.known_hosts_file.c_str(), "known_hosts file");
  long timeout = std::max<long>(1, static_cast<long>(o.connect_timeout.count()));
  set(SSH_OPTIONS_TIMEOUT, &timeout, "timeout");
  // Unknown keys are refused unless accept_new_host_key, whatever the config says.
  int strict = 1;
  set(SSH_OPTIONS_STRICTHOSTKEYCHECK, &strict, "StrictHostKeyChecking");
  // Every SFTP call waits for its answer: Nagle's algorithm would add a delayed ACK to each.
  int nodelay = 1;
  set(SSH_OPTIONS_NODELAY, &nodelay, "TCP_NODELAY");
  if (quiet) set(SSH_OPTIONS_LOG_VERBOSITY, &no_log, "log level");
  ssh_set_callbacks(s.get(), session_callbacks());
  return s;
}

std::vector<std::string> split_jumps(const std::string& list, const std::string& where) {
  std::vector<std::string> hops;
  size_t pos = 0;
  while (true) {
    const size_t comma = list.find(',', pos);
    const size_t end = comma == std::string::npos ? list.size() : comma;
    std::string hop = list.substr(pos, end - pos);
    if (!valid_hop(hop)) {
      throw BackendError(where + ": \"" + comment_text(hop) +
                         "\" is not a jump host; write [user@]host[:port] or an ssh config "
                         "alias, several separated by commas (no spaces)");
    }
    hops.push_back(hop);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return hops;
}

Route route_of(ssh_session s, const std::string& jump_flag, const std::string& where) {
  Route route;
  char* value = nullptr;
  const std::string command =
      ssh_options_get(s, SSH_OPTIONS_PROXYCOMMAND, &value) == SSH_OK ? take_string(value) : "";
  if (jump_flag == "none") {
    // --jump none: straight to the host, whatever the config says (ssh -J none).
  } else if (!jump_flag.empty()) {
    route.jumps = split_jumps(jump_flag, "--jump");
  } else if (!command.empty()) {
    // libssh 0.10's rendering of "ProxyJump [u@]h[:p][,REST]" (config.c,
    // ssh_config_parse_proxy_jump); a ProxyCommand of exactly this form means the same.
    static const std::regex jump(
        R"(^ssh(?: -l (\S+))?(?: -p ([0-9]+))?(?: -J (\S+))? -W '\[%h\]:%p' (\S+)$)");
    std::smatch m;
    if (!std::regex_match(command, m, jump)) {
      route.command = command;  // a real ProxyCommand: libssh runs it
      return route;
    }
    std::string first = m[4].str();
    if (first.find(':') != std::string::npos) first = "[" + first + "]";  // an IPv6 address
    if (m[1].matched) first = m[1].str() + "@" + first;
    if (m[2].matched) first += ":" + m[2].str();
    route.jumps = {first};
    if (m[3].matched) {
      std::vector<std::string> rest = split_jumps(m[3].str(), where + ": ProxyJump");
      route.jumps.insert(route.jumps.end(), rest.begin(), rest.end());
    }
    for (const auto& hop : route.jumps) (void)split_jumps(hop, where + ": ProxyJump");
  }
  // hpclaunch connects through the hops itself: libssh must not run `ssh -W` as well.
  if (!command.empty() && ssh_options_set(s, SSH_OPTIONS_PROXYCOMMAND, "none") != SSH_OK)
    throw BackendError("cannot clear the ProxyCommand of " + where + ": " + error_of(s));
  return route;
}

void check_host_key(ssh_session s, const SshHostOptions& o, const std::string& description) {
  ssh_key raw_key = nullptr;
  if (ssh_get_server_publickey(s, &raw_key) != SSH_OK) throw NetworkError(error_of(s));
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
  std::string known_hosts = ssh_options_get(s, SSH_OPTIONS_KNOWNHOSTS, &value) == SSH_OK
                                ? take_string(value)
                                : "~/.ssh/known_hosts";
  const unsigned int port = session_port(s);
  const std::string hostname = session_hostname(s);
  std::string entry = port == 22 ? hostname : "[" + hostname + "]:" + std::to_string(port);

  switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      throw BackendError("refusing " + description + ": its host key (" + key_text +
                         ") differs from the one recorded for " + entry + " in " + known_hosts +
                         "; someone may be intercepting the connection (or the host was "
                         "reinstalled): confirm the new key with the cluster's admins, then "
                         "remove the old entry with ssh-keygen -R '" +
                         entry + "' -f " + known_hosts);
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (!o.accept_new_host_key) {
        throw BackendError("refusing " + description + ": its host key (" + key_text +
                           ") is not in " + known_hosts +
                           "; if that is the host's key, "
                           "rerun with --accept-new-host-key, or add it to " +
                           known_hosts + " (ssh-keyscan -p " + std::to_string(port) + " " +
                           hostname + ")");
      }
      if (ssh_session_update_known_hosts(s) != SSH_OK) {
        throw BackendError("cannot record the host key of " + description + " in " + known_hosts +
                           ": " + error_of(s));
      }
      return;
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      throw BackendError("cannot check the host key of " + description + " against " +
                         known_hosts + ": " + error_of(s));
  }
}

void log_in(ssh_session s, const std::string& identity_file, const std::string& description,
            std::chrono::seconds timeout) {
  int rc;
  std::string tried;
  if (!identity_file.empty()) {
    ssh_key raw = nullptr;
    if (ssh_pki_import_privkey_file(identity_file.c_str(), nullptr, no_passphrase, nullptr,
                                    &raw) != SSH_OK) {
      throw BackendError("cannot load the identity file " + identity_file +
                         " (is it a private key? an encrypted one must be added to ssh-agent "
                         "with ssh-add, then leave out the identity file)");
    }
    KeyPtr identity(raw);
    rc = ssh_userauth_publickey(s, nullptr, identity.get());
    tried = "the key " + identity_file;
  } else {
    rc = ssh_userauth_publickey_auto(s, nullptr, nullptr);
    tried = "ssh-agent and the keys of the ssh config and ~/.ssh";
  }
  // No key was offered at all: ask which methods there are ("none" is refused, with the list).
  if (rc == SSH_AUTH_DENIED && ssh_userauth_list(s, nullptr) == 0)
    rc = ssh_userauth_none(s, nullptr);
  const bool partial = rc == SSH_AUTH_PARTIAL;
  // A one-time code after the key (AuthenticationMethods publickey,keyboard-interactive), or
  // instead of one.
  if ((rc == SSH_AUTH_DENIED || rc == SSH_AUTH_PARTIAL) &&
      (ssh_userauth_list(s, nullptr) & SSH_AUTH_METHOD_INTERACTIVE)) {
    rc = keyboard_interactive(s, description);
    tried += " and keyboard-interactive answers";
  }
  if (rc == SSH_AUTH_ERROR) throw NetworkError(error_of(s));
  if (rc == SSH_AUTH_AGAIN) {
    throw NetworkError("no answer to the login within " + std::to_string(timeout.count()) + " s");
  }
  if (rc != SSH_AUTH_SUCCESS) {
    int methods = ssh_userauth_list(s, nullptr);
    std::string more = rc == SSH_AUTH_PARTIAL || partial
                            ? " (the key was accepted, but it wants more)"
                            : "";
    throw BackendError(description + " refused the login" + more + ": tried " + tried +
                       "; the server offers " + auth_methods(methods) +
                       "; add your public key to ~/.ssh/authorized_keys there, or name the right "
                       "key with IdentityFile in ~/.ssh/config (hpclaunch logs in with keys and "
                       "keyboard-interactive answers typed on the terminal)");
  }
}

}  // namespace ssh_detail
}  // namespace hpc
