#include "atomic_file.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace fs = std::filesystem;
using hpc::AtomicFileWriter;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Bytes that differ at every position, so that a piece written twice, dropped or moved shows.
std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char((i * 2654435761u) >> 13);
  return s;
}

// Writes `data` in pieces of the given sizes (cycled) through a kDirect writer; returns whether
// the writer was still direct before seal, and checks the file holds exactly `data`.
bool write_in_pieces(const fs::path& path, const std::string& data,
                     const std::vector<size_t>& pieces) {
  AtomicFileWriter w(path, 0644, AtomicFileWriter::Caching::kDirect);
  size_t at = 0, k = 0;
  while (at < data.size()) {
    const size_t n = std::min(pieces[k++ % pieces.size()], data.size() - at);
    w.write(std::string_view(data).substr(at, n));
    at += n;
  }
  const bool direct = w.direct();
  w.commit();
  CHECK(!w.direct());
  CHECK(w.direct_refused() != direct);  // the tail's page-cache write at seal is no refusal
  const std::string got = slurp(path);
  CHECK(got.size() == data.size());
  CHECK(got == data);
  return direct;
}

fs::path scratch(const fs::path& dir, const std::string& name) {
  return dir / ("hpc_atomic_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace

TEST_CASE("atomic file, direct: every size and piece pattern is written byte for byte",
          "[atomic_file]") {
  // /var/tmp is on the disk on Debian (not tmpfs): O_DIRECT is taken there. Whether it is, the
  // file system says when asked directly.
  const fs::path dir = "/var/tmp";
  const fs::path probe = scratch(dir, "probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  const bool supported = fd >= 0;
  if (fd >= 0) ::close(fd);
  fs::remove(probe);
  const size_t mib = size_t(1) << 20;
  for (size_t size : {size_t(0), size_t(1), size_t(4095), size_t(4096), size_t(4097),
                      16 * mib - 1, 16 * mib, 16 * mib + 4096 + 3, 37 * mib + 123}) {
    for (const auto& pieces : std::vector<std::vector<size_t>>{
             {size + 1}, {1, 4095, 4096, 7}, {3 * mib + 1, 8}, {16 * mib}}) {
      const fs::path p = scratch(dir, "direct");
      INFO("size " << size << ", first piece " << pieces[0]);
      const bool direct = write_in_pieces(p, pattern(size), pieces);
      CHECK(direct == supported);  // no short write or refusal took it off O_DIRECT
      fs::remove(p);
    }
  }
}

TEST_CASE("atomic file, direct: a file system without O_DIRECT gets the same bytes buffered",
          "[atomic_file]") {
  // ramfs refuses O_DIRECT (tmpfs takes it since Linux 6.6): a child process mounts one in a
  // mount namespace of its own (root only) and writes there; exit 0: buffered and whole.
  const fs::path dir = fs::temp_directory_path() / ("hpc_ramfs_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("ramfs", dir.c_str(), "ramfs", 0, nullptr) != 0) {
      ::_exit(77);
    }
    try {
      const std::string data = pattern((size_t(20) << 20) + 5);
      AtomicFileWriter w(dir / "f", 0644, AtomicFileWriter::Caching::kDirect);
      const bool direct = w.direct();
      for (size_t at = 0; at < data.size(); at += (size_t(5) << 20) + 1) {
        w.write(std::string_view(data).substr(at, (size_t(5) << 20) + 1));
      }
      w.commit();
      ::_exit(direct ? 3 : !w.direct_refused() ? 6 : slurp(dir / "f") == data ? 0 : 4);
    } catch (...) {
      ::_exit(5);
    }
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  fs::remove_all(dir);
  REQUIRE(WIFEXITED(status));
  const int code = WEXITSTATUS(status);
  if (code == 77) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL("cannot mount a ramfs (not root?) on a CI machine");
    WARN("cannot mount a ramfs here (not root?): the fallback is not exercised");
    return;
  }
  INFO("3: took O_DIRECT on ramfs, 4: the bytes differ, 5: an exception, 6: the refusal "
       "not reported");
  CHECK(code == 0);
}

TEST_CASE("atomic file, direct: an abandoned write leaves nothing behind", "[atomic_file]") {
  const fs::path p = scratch("/var/tmp", "abandoned");
  {
    AtomicFileWriter w(p, 0644, AtomicFileWriter::Caching::kDirect);
    w.write(pattern(size_t(17) << 20));
  }
  CHECK_FALSE(fs::exists(p));
  for (const auto& e : fs::directory_iterator("/var/tmp")) {
    CHECK(e.path().filename().string().find(p.filename().string() + ".tmp-") ==
          std::string::npos);
  }
}
