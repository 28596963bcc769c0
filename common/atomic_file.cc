#include "atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include "error.h"
#include "posix_io.h"
#include "text.h"

namespace fs = std::filesystem;

namespace hpc {
namespace {

[[noreturn]] void fail(const fs::path& path, const std::string& step, int err) {
  std::string fix = err == ENOENT   ? "create the directory first"
                    : err == EACCES ? "choose a directory you can write to"
                                    : "check the path";
  throw UserError(path.string(), "cannot write output (" + step + ": " + std::strerror(err) + ")",
                  fix);
}

// The descriptor a standard-stream path names: /dev/stdout -> 1, /dev/fd/7 -> 7.
std::optional<int> stream_fd(const fs::path& path) {
  const std::string p = path.lexically_normal().string();
  if (p == "/dev/stdout") return 1;
  if (p == "/dev/stderr") return 2;
  for (const char* dir : {"/dev/fd/", "/proc/self/fd/"}) {
    std::string_view rest(p);
    if (!starts_with(rest, dir)) continue;
    rest.remove_prefix(std::strlen(dir));
    if (all_digits(rest) && rest.size() <= 4) return std::stoi(std::string(rest));
  }
  return std::nullopt;
}

[[noreturn]] void refuse(const fs::path& path, const std::string& what) {
  throw UserError(path.string(), what,
                  "write to a regular file or a new path (character devices such as /dev/null "
                  "and /dev/stdout are written through)");
}

void write_through(int fd, const fs::path& path, std::string_view content) {
  if (!write_all(fd, content)) {
    int err = errno;
    throw OutputError(path.string() + ": cannot write (" + std::strerror(err) +
                      "); what was written may be incomplete");
  }
}

// Opens a character device for writing, never creating anything and never following a link;
// the descriptor must still be a character device (not swapped since output_kind looked).
int open_device(const fs::path& path) {
  int fd = open(path.c_str(), O_WRONLY | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail(path, "open", errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) {
    close(fd);
    refuse(path, "is no longer a character device");
  }
  return fd;
}

}  // namespace

OutputKind output_kind(const fs::path& path) {
  if (stream_fd(path)) return OutputKind::kStream;
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return OutputKind::kNew;  // the write names the reason
  if (S_ISREG(st.st_mode)) return OutputKind::kRegular;
  if (S_ISCHR(st.st_mode)) return OutputKind::kCharDevice;
  if (S_ISDIR(st.st_mode))
    throw UserError(path.string(), "is a directory", "give a file name for the output");
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    fs::path target = fs::read_symlink(path, ec);
    throw UserError(path.string(),
                    "is a symbolic link" + (ec ? "" : " (to " + target.string() + ")") +
                        "; hpclaunch neither replaces a link nor writes through it",
                    "give the path of its target, or remove the link");
  }
  if (S_ISFIFO(st.st_mode)) refuse(path, "is a named pipe (FIFO)");
  if (S_ISSOCK(st.st_mode)) refuse(path, "is a socket");
  if (S_ISBLK(st.st_mode)) refuse(path, "is a block device");
  refuse(path, "is not a regular file");
}

StagedOutput::StagedOutput(fs::path path, std::string_view content, mode_t mode)
    : path_(std::move(path)), kind_(output_kind(path_)) {
  if (kind_ == OutputKind::kCharDevice || kind_ == OutputKind::kStream) {
    content_ = std::string(content);
    return;
  }
  file_.emplace(path_, mode);
  file_->write(content);
  file_->seal();
}

StagedOutput::~StagedOutput() = default;

void StagedOutput::commit() {
  if (committed_) return;
  committed_ = true;
  if (kind_ == OutputKind::kStream) {
    const int fd = *stream_fd(path_);
    if (fd == 1) std::cout.flush();  // what the command printed before comes first
    if (fd == 2) std::cerr.flush();
    write_through(fd, path_, content_);
    return;
  }
  if (kind_ == OutputKind::kCharDevice) {
    int fd = open_device(path_);
    try {
      write_through(fd, path_, content_);
    } catch (...) {
      close(fd);
      throw;
    }
    close(fd);
    return;
  }
  file_->commit();
}

void write_file_atomically(const fs::path& path, std::string_view content, mode_t mode) {
  StagedOutput(path, content, mode).commit();
}

namespace {
// O_DIRECT wants the buffer, the length and the file offset aligned to the file system's logical
// block: 4096 covers the 512 and 4096 of disks and of Lustre, GPFS and ext4.
constexpr size_t kDirectAlign = 4096;
constexpr size_t kDirectBuffer = size_t(16) << 20;
}  // namespace

void AtomicFileWriter::FreeBuffer::operator()(char* p) const { std::free(p); }

AtomicFileWriter::AtomicFileWriter(const fs::path& path, mode_t mode, Caching caching)
    : path_(path), mode_(mode), kind_(output_kind(path)) {
  if (kind_ != OutputKind::kNew && kind_ != OutputKind::kRegular)
    refuse(path, "is a device or a stream, not a file");
  fs::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  tmp_ = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  fd_ = mkstemp(tmp_.data());
  if (fd_ < 0) fail(path, "create temp file", errno);
  if (caching == Caching::kDirect) {
    void* p = nullptr;
    const int flags = fcntl(fd_, F_GETFL);
    // Refused here (ramfs says EINVAL) or at the first write: the page cache, as without it.
    if (flags >= 0 && posix_memalign(&p, kDirectAlign, kDirectBuffer) == 0) {
      buffer_.reset(static_cast<char*>(p));
      direct_ = fcntl(fd_, F_SETFL, flags | O_DIRECT) == 0;
    }
    direct_refused_ = !direct_;
  }
}

// O_DIRECT ends; what the buffer holds from `from` on goes through the page cache.
void AtomicFileWriter::stop_direct(size_t from) {
  direct_ = false;
  const int flags = fcntl(fd_, F_GETFL);
  if (flags < 0 || fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) abandon("fcntl");
  if (!write_all(fd_, std::string_view(buffer_.get() + from, fill_ - from))) abandon("write");
  fill_ = 0;
}

void AtomicFileWriter::flush_direct(size_t n) {
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::write(fd_, buffer_.get() + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL) {
      // The file system does not take it after all (or a short write left it misaligned).
      direct_refused_ = true;
      return stop_direct(done);
    }
    if (w < 0) abandon("write");
    done += size_t(w);
  }
  std::memmove(buffer_.get(), buffer_.get() + n, fill_ - n);
  fill_ -= n;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) close(fd_);
  if (!committed_) unlink(tmp_.c_str());
}

// The temp file goes with the writer (the destructor), whatever step failed.
void AtomicFileWriter::abandon(const std::string& step) {
  int err = errno;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  fail(path_, step, err);
}

void AtomicFileWriter::write(std::string_view bytes) {
  while (direct_ && !bytes.empty()) {
    const size_t k = std::min(bytes.size(), kDirectBuffer - fill_);
    std::memcpy(buffer_.get() + fill_, bytes.data(), k);
    fill_ += k;
    bytes.remove_prefix(k);
    if (fill_ == kDirectBuffer) flush_direct(fill_);
  }
  if (!bytes.empty() && !write_all(fd_, bytes)) abandon("write");
}

void AtomicFileWriter::seal() {
  if (fd_ < 0) return;
  if (direct_) {
    flush_direct(fill_ - fill_ % kDirectAlign);
    if (direct_) stop_direct(0);  // the last partial block through the page cache
  }
  if (fchmod(fd_, mode_) != 0) abandon("chmod");
  if (fsync(fd_) != 0) abandon("fsync");
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) abandon("close");
}

void AtomicFileWriter::commit() {
  seal();
  // Onto a new path only if it is still new (something may have appeared since); onto a
  // regular file by plain rename. A file system without RENAME_NOREPLACE gets the plain rename.
  int rc = kind_ == OutputKind::kNew
               ? renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE)
               : -1;
  if (kind_ == OutputKind::kNew && rc != 0 && errno == EEXIST &&
      output_kind(path_) != OutputKind::kRegular) {
    refuse(path_, "is not a regular file");
  }
  if (rc != 0 && rename(tmp_.c_str(), path_.c_str()) != 0) abandon("rename");
  committed_ = true;
}

}  // namespace hpc
