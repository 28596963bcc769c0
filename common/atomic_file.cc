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

void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           mode_t mode) {
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(path.string(), "is a directory", "give a file name for the output");
  }
  std::string tmpl = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0) fail(path, "create temp file", errno);

  auto abandon = [&](const std::string& step) {
    int err = errno;
    close(fd);
    unlink(tmpl.c_str());
    fail(path, step, err);
  };
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("write");
    }
    done += static_cast<size_t>(n);
  }
  if (fchmod(fd, mode) != 0) abandon("chmod");
  if (fsync(fd) != 0) abandon("fsync");
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmpl.c_str());
    fail(path, "close", err);
  }
  if (rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmpl.c_str());
    fail(path, "rename", err);
  }
}

}  // namespace hpc
