#include "atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "error.h"

namespace hpc {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& step, int err) {
  std::string fix = err == ENOENT   ? "create the directory first"
                    : err == EACCES ? "choose a directory you can write to"
                                    : "check the path";
  throw UserError(path.string(), "cannot write output (" + step + ": " + std::strerror(err) + ")",
                  fix);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::filesystem::path& path, mode_t mode)
    : path_(path), mode_(mode) {
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(path.string(), "is a directory", "give a file name for the output");
  }
  tmp_ = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  fd_ = mkstemp(tmp_.data());
  if (fd_ < 0) fail(path, "create temp file", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    close(fd_);
    unlink(tmp_.c_str());
  }
}

void AtomicFileWriter::abandon(const std::string& step) {
  int err = errno;
  close(fd_);
  fd_ = -1;
  unlink(tmp_.c_str());
  fail(path_, step, err);
}

void AtomicFileWriter::write(std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("write");
    }
    done += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (fchmod(fd_, mode_) != 0) abandon("chmod");
  if (fsync(fd_) != 0) abandon("fsync");
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmp_.c_str());
    fail(path_, "close", err);
  }
  if (rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    unlink(tmp_.c_str());
    fail(path_, "rename", err);
  }
}

void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           mode_t mode) {
  AtomicFileWriter out(path, mode);
  out.write(content);
  out.commit();
}

}  // namespace hpc
