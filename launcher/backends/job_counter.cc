#include "backends/job_counter.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "backends/backend.h"

namespace hpc {
namespace {

// ---- the job id counter ---------------------------------------------------------------------

// The first id in a new runs root: not 1, so that jobs in two runs roots on one machine rarely
// share an id and with it MASTER_PORT (port_min + id mod the span: 20000 + id mod 12768 with
// the shipped port_range 20000-32767).
long first_job_id() {
  std::random_device rd;
  return 1000 + static_cast<long>(rd() % 9000);
}

}  // namespace

std::string allocate_local_job_id(const std::string& runs_root) {
  std::string path = runs_root + "/.local-jobs";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw BackendError("cannot open the local job counter " + path + ": " + std::strerror(errno));
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      int err = errno;
      close(fd);
      throw BackendError("cannot lock " + path + ": " + std::strerror(err));
    }
  }
  char buf[64] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  long last = n > 0 ? std::atol(buf) : 0;
  long next = last > 0 ? last + 1 : first_job_id();
  std::string text = std::to_string(next) + "\n";
  bool ok = ftruncate(fd, 0) == 0 &&
            pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) &&
            fsync(fd) == 0;
  int err = errno;
  close(fd);  // releases the lock
  if (!ok)
    throw BackendError("cannot update the local job counter " + path + ": " + std::strerror(err));
  return std::to_string(next);
}

}  // namespace hpc
