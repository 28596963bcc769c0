#include "input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error.h"

namespace fs = std::filesystem;

namespace hpc {
namespace {

constexpr const char* kLinkFix = "point the link at a regular file or remove it";

std::string type_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "an unusual file";
}

// A device was named on purpose (/dev/zero): name a file instead. A folder or FIFO where a file
// is expected may also be one the user made by mistake.
std::string type_fix(mode_t mode) {
  if (S_ISCHR(mode) || S_ISBLK(mode) || S_ISSOCK(mode)) return "name a regular file instead";
  return "replace it with a regular file, remove it, or name another";
}

[[noreturn]] void refuse_type(const fs::path& path, const std::string& what, mode_t mode) {
  throw UserError(path.string(), "is " + type_of(mode) + ", not a " + what, type_fix(mode));
}

// Why stat() failed, told the way a user fixes it.
[[noreturn]] void refuse_missing(const fs::path& path, const std::string& what, int err) {
  const std::string where = path.string();
  struct stat link {};
  const bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  if (err == ELOOP) throw UserError(where, "is a symbolic link loop, not a " + what, kLinkFix);
  if (is_link && (err == ENOENT || err == ENOTDIR)) {
    std::error_code ec;
    const std::string target = fs::read_symlink(path, ec).string();
    throw UserError(where, "is a symbolic link to \"" + target + "\", which does not exist",
                    kLinkFix);
  }
  if (err == ENOENT || err == ENOTDIR) throw UserError(where, "no such " + what, "check the path");
  throw UserError(where, "cannot read " + what + ": " + std::strerror(err),
                  "check the path and its permissions");
}

[[noreturn]] void refuse_size(const fs::path& path, const std::string& what, std::size_t bytes,
                              std::size_t max_bytes, bool at_least) {
  throw UserError(
      path.string(),
      "is " + std::string(at_least ? "over " : "") + std::to_string(bytes) +
          " bytes, more than the " + describe_size_limit(max_bytes) + " a " + what + " may have",
      "check the file (hpclaunch reads at most " + describe_size_limit(max_bytes) + " of it)");
}

// Closes the descriptor on every way out.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

bool input_path_present(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return true;
  // Permission denied on a parent, a loop in a parent: there may be something; let the reader
  // say what.
  return errno != ENOENT && errno != ENOTDIR;
}

std::string read_input_file(const fs::path& path, const std::string& what, std::size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) refuse_missing(path, what, errno);
  if (!S_ISREG(st.st_mode)) refuse_type(path, what, st.st_mode);
  if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) {
    refuse_size(path, what, static_cast<std::size_t>(st.st_size), max_bytes, false);
  }
  // O_NONBLOCK: should the path have become a FIFO since stat(), opening it does not wait for a
  // writer; fstat() below then refuses it.
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (file.fd < 0) refuse_missing(path, what, errno);
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) refuse_type(path, what, st.st_mode);
  std::string content;
  content.reserve(static_cast<std::size_t>(st.st_size));
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(file.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw UserError(path.string(), "cannot read " + what + ": " + std::strerror(errno),
                      "check the file");
    }
    if (n == 0) return content;
    content.append(buffer, static_cast<std::size_t>(n));
    // A file that grows while we read (or a /proc entry, whose size says 0) stops at the limit.
    if (content.size() > max_bytes) refuse_size(path, what, max_bytes, max_bytes, true);
  }
}

InputChunk read_input_chunk(const fs::path& path, const std::string& what, std::uint64_t offset,
                            std::size_t max_bytes) {
  InputChunk chunk;
  chunk.next_offset = offset;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return chunk;  // not there (yet)
    refuse_missing(path, what, errno);
  }
  if (!S_ISREG(st.st_mode)) refuse_type(path, what, st.st_mode);
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (file.fd < 0) {
    if (errno == ENOENT) return chunk;  // removed since stat()
    refuse_missing(path, what, errno);
  }
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) refuse_type(path, what, st.st_mode);
  // procfs and sysfs say 0 bytes for files that hold some: a reader that goes by the size
  // (truncated? start over) reads them for ever.
  constexpr long kProcMagic = 0x9fa0, kSysfsMagic = 0x62656572;
  struct statfs fs_info {};
  if (::fstatfs(file.fd, &fs_info) == 0 && (static_cast<long>(fs_info.f_type) == kProcMagic ||
                                            static_cast<long>(fs_info.f_type) == kSysfsMagic)) {
    throw UserError(
        path.string(),
        "is a file of /proc or /sys (its size says nothing of its content), not a " + what,
        "replace it with a regular file, remove it, or name another");
  }
  chunk.exists = true;
  if (static_cast<std::uint64_t>(st.st_size) < offset) offset = 0;  // truncated: start over
  chunk.data.resize(max_bytes);
  std::size_t got = 0;
  while (got < max_bytes) {
    const ssize_t n = ::pread(file.fd, chunk.data.data() + got, max_bytes - got,
                              static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw UserError(path.string(), "cannot read " + what + ": " + std::strerror(errno),
                      "check the file");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  chunk.data.resize(got);
  chunk.next_offset = offset + got;
  return chunk;
}

std::string describe_size_limit(std::size_t bytes) {
  constexpr std::size_t kKiB = 1024, kMiB = kKiB * 1024;
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace hpc
