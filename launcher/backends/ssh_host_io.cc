#include "backends/ssh_host.h"

#include <fcntl.h>
#include <libssh/callbacks.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdlib>
#include <stdexcept>

#include "backends/ssh_internal.h"
#include "error.h"
#include "posix_io.h"
#include "shell.h"
#include "text.h"

namespace hpc {

using namespace ssh_detail;

namespace {

// "TERM" (an exit-signal's name) -> SIGTERM; a name we do not know was still a signal.
int exit_signal_number(const std::string& name) {
  int number = signal_from_name(name);
  return number > 0 ? number : SIGTERM;
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

// The command line the login shell runs: `cd DIR && exec env K=V... ARGV...`, every word
// shell-quoted.
std::string remote_command(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, const std::string& cwd) {
  std::string command;
  if (!cwd.empty()) command += "cd " + shell_quote(cwd) + " && ";
  command += "exec";
  if (!env.empty()) {
    command += " env";
    for (const auto& kv : env) command += " " + shell_quote(kv);
  }
  for (const auto& a : argv) command += " " + shell_quote(a);
  return command;
}

// Variables passed by name (CommandOptions::pass_env) travel on the channel's stdin, one value
// per line ahead of the command's own input, and a POSIX sh on the login node reads them with
// `read` before it execs the command: the values never appear in a command line (ps on the
// login node shows the names only), an SSH environment request (which needs AcceptEnv in the
// server's sshd_config) or a file. `read` takes one byte at a time from a pipe, so the command's
// stdin starts right after the last value. A value must not hold a newline (checked before).
std::string pass_env_values(const std::vector<std::string>& names, std::vector<std::string>& argv,
                            std::string& missing) {
  std::string values, reader;
  for (const auto& name : names) {
    const char* v = std::getenv(name.c_str());
    if (!v || std::string(v).find('\n') != std::string::npos) {
      missing = name;
      return "";
    }
    values += std::string(v) + "\n";
    reader += "IFS= read -r " + name + " && export " + name + " && ";
  }
  std::vector<std::string> wrapped = {"sh", "-c", reader + "exec \"$@\"", "sh"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  argv = std::move(wrapped);
  return values;
}

// Sends as much of `input` from `written` on as the remote window takes (never blocks on a
// full window), then EOF once all of it is sent. False, with nothing else done, when the write
// failed: the session died, or the command closed its stdin.
bool feed_stdin(ssh_channel channel, const std::string& input, size_t& written, bool& eof_sent) {
  if (written < input.size()) {
    uint32_t window = ssh_channel_window_size(channel);
    size_t n = std::min<size_t>({input.size() - written, window, 32768});
    if (n > 0) {
      int w = ssh_channel_write(channel, input.data() + written, static_cast<uint32_t>(n));
      if (w == SSH_ERROR) return false;
      written += static_cast<size_t>(w);
    }
  }
  if (written >= input.size()) {
    ssh_channel_send_eof(channel);
    eof_sent = true;
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------------------------------ run

CommandResult SshHost::run(const std::vector<std::string>& given_argv,
                           const CommandOptions& options) {
  if (given_argv.empty()) throw std::invalid_argument("SshHost::run: empty argv");
  CommandResult result;
  std::vector<std::string> argv = given_argv;
  std::string passed_values, missing;
  if (!options.pass_env.empty()) {
    passed_values = pass_env_values(options.pass_env, argv, missing);
    if (!missing.empty()) {
      result.spawn_error = missing + " is unset here or holds a newline; nothing was run";
      return result;
    }
  }
  // options.unset_env is ours to drop: the login shell's environment never had it.
  const std::string command =
      remote_command(argv, options.env, options.cwd.empty() ? "" : absolute(options.cwd));

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
      lost("while starting " + given_argv[0]);
      channel.reset();
      disconnect();
      return result;
    }
    result.spawn_error =
        description_ + " refused to run " + given_argv[0] + ": " + error_of(session_);
    return result;
  }

  const std::string input = passed_values + options.stdin_data.value_or("");
  size_t written = 0;
  bool eof_sent = false;
  bool dead = false;
  auto deadline = Clock::now() + options.timeout;
  ssh_event event = ssh_event_new();
  ssh_event_add_session(event, session_);
  char buf[65536];
  for (;;) {
    if (!eof_sent && !feed_stdin(channel.get(), input, written, eof_sent)) {
      if (!session_alive()) {
        dead = true;
        break;
      }
      written = input.size();  // the command closed its stdin: drop the rest, send EOF
      feed_stdin(channel.get(), input, written, eof_sent);
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
    bool finished =
        report.status_seen || !report.signal.empty() || ssh_channel_is_closed(channel.get());
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
      if (!session_alive()) {
        dead = true;
        break;
      }
    }
  }
  ssh_event_remove_session(event, session_);
  ssh_event_free(event);
  ssh_remove_channel_callbacks(channel.get(), &callbacks);

  if (dead) {
    lost("while " + given_argv[0] + " ran");
    channel.reset();
    disconnect();
    return result;
  }
  if (!result.timed_out) {
    if (!report.signal.empty()) {
      result.term_signal = exit_signal_number(report.signal);
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
        throw BackendError("cannot create directory " + target + " on " + description_ + ": " + p +
                           " exists and is not a directory");
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
  // As read_input_chunk here: only a regular file is opened (the server's open() of a FIFO
  // waits for a writer), a folder or device is one line.
  s->errnum = SSH_FX_OK;
  AttributesPtr kind(sftp_stat(s, target.c_str()));
  if (kind && kind->type != SSH_FILEXFER_TYPE_REGULAR) {
    throw UserError(target,
                    kind->type == SSH_FILEXFER_TYPE_DIRECTORY ? "is a directory, not a regular file"
                                                              : "is not a regular file",
                    "replace it with a regular file, remove it, or name another");
  }
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
