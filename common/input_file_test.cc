// read_input_file: regular files only, read once, up to a limit; everything else named.
#include "input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "error.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

// A fresh directory, removed with everything in it at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hpc-input-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& name, const std::string& content) const {
    std::ofstream(path / name, std::ios::binary) << content;
    return path / name;
  }
};

std::string error_of(const fs::path& p, std::size_t limit = hpc::kMaxInputFileBytes) {
  try {
    hpc::read_input_file(p, "JSON file", limit);
  } catch (const hpc::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("read_input_file reads a regular file whole, through a link", "[input-file]") {
  TempDir d;
  const fs::path f = d.write("a.json", std::string("{}\0x", 4));
  CHECK(hpc::read_input_file(f) == std::string("{}\0x", 4));
  fs::create_symlink(f, d.path / "link.json");
  CHECK(hpc::read_input_file(d.path / "link.json") == std::string("{}\0x", 4));
  CHECK(hpc::read_input_file(d.write("empty", "")) == "");
}

TEST_CASE("read_input_file names what is not a regular file, and the fix", "[input-file]") {
  TempDir d;
  CHECK_THAT(error_of(d.path / "none"), Contains("none: no such JSON file; check the path"));
  fs::create_symlink(d.path / "gone", d.path / "dangling");
  CHECK_THAT(error_of(d.path / "dangling"),
             Contains("dangling: is a symbolic link to \"" + (d.path / "gone").string() +
                      "\", which does not exist; point the link at a regular file or remove it"));
  fs::create_symlink(d.path / "loop", d.path / "loop");
  CHECK_THAT(error_of(d.path / "loop"), Contains("loop: is a symbolic link loop"));
  fs::create_directory(d.path / "dir");
  CHECK_THAT(error_of(d.path / "dir"),
             Contains("dir: is a directory, not a JSON file; replace it with a regular file"));
  REQUIRE(mkfifo((d.path / "fifo").c_str(), 0600) == 0);  // never opened for a read that waits
  CHECK_THAT(error_of(d.path / "fifo"), Contains("fifo: is a FIFO (named pipe), not a JSON file"));
  CHECK_THAT(error_of("/dev/zero"),
             Contains("/dev/zero: is a character device, not a JSON file; name a regular file"));
  CHECK_THAT(error_of(d.write("f", "x") / "below"), Contains("no such JSON file"));
}

TEST_CASE("read_input_file stops at its size limit", "[input-file]") {
  TempDir d;
  CHECK(hpc::read_input_file(d.write("max", std::string(100, 'x')), "file", 100).size() == 100);
  CHECK(error_of(d.write("over", std::string(101, 'x')), 100) ==
        (d.path / "over").string() +
            ": is 101 bytes, more than the 100 bytes a JSON file may have; check the file "
            "(hpclaunch reads at most 100 bytes of it)");
  // A sparse file is refused by its size, without reading it.
  const fs::path sparse = d.write("sparse", "");
  fs::resize_file(sparse, std::uintmax_t{8} << 30);
  CHECK_THAT(error_of(sparse), Contains("is 8589934592 bytes, more than the 4 MiB"));
  // A /proc entry says its size is 0; it is read, and would be cut off at the limit.
  CHECK(hpc::read_input_file("/proc/self/stat").find(std::to_string(getpid())) == 0);
  CHECK_THAT(error_of("/proc/self/maps", 10), Contains("is over 10 bytes"));
}

TEST_CASE("input_path_present: anything at the path counts, links not followed", "[input-file]") {
  TempDir d;
  CHECK_FALSE(hpc::input_path_present(d.path / "none"));
  CHECK_FALSE(hpc::input_path_present(d.path / "none" / "below"));
  fs::create_symlink(d.path / "gone", d.path / "dangling");
  CHECK(hpc::input_path_present(d.path / "dangling"));
  fs::create_directory(d.path / "dir");
  CHECK(hpc::input_path_present(d.path / "dir"));
  CHECK(hpc::input_path_present(d.write("f", "")));
  CHECK(hpc::input_path_present("/dev/null"));
}

TEST_CASE("describe_size_limit", "[input-file]") {
  CHECK(hpc::describe_size_limit(hpc::kMaxInputFileBytes) == "4 MiB");
  CHECK(hpc::describe_size_limit(hpc::kMaxResultsFileBytes) == "16 MiB");
  CHECK(hpc::describe_size_limit(2048) == "2 KiB");
  CHECK(hpc::describe_size_limit(100) == "100 bytes");
}

// read_input_chunk: the twin for files a job may still write (logs, metrics, the timeline).
TEST_CASE("read_input_chunk reads pieces of a regular file from an offset", "[input]") {
  TempDir d;
  const fs::path log = d.write("log", "hello world\n");
  auto c = hpc::read_input_chunk(log, "log", 0, 5);
  CHECK(c.exists);
  CHECK(c.data == "hello");
  CHECK(c.next_offset == 5);
  c = hpc::read_input_chunk(log, "log", c.next_offset, 100);
  CHECK(c.data == " world\n");
  CHECK(c.next_offset == 12);
  c = hpc::read_input_chunk(log, "log", 12, 100);
  CHECK(c.data.empty());
  CHECK(c.next_offset == 12);
  d.write("log", "new\n");  // truncated: read from its start
  c = hpc::read_input_chunk(log, "log", 12, 100);
  CHECK(c.data == "new\n");
  CHECK(c.next_offset == 4);
  CHECK_FALSE(hpc::read_input_chunk(d.path / "none", "log", 0, 10).exists);
  fs::create_symlink(d.path / "gone", d.path / "dangling");
  CHECK_FALSE(hpc::read_input_chunk(d.path / "dangling", "log", 0, 10).exists);
}

TEST_CASE("read_input_chunk refuses a FIFO, a folder and a /proc file, never waits or loops",
          "[input]") {
  TempDir d;
  REQUIRE(mkfifo((d.path / "fifo").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(hpc::read_input_chunk(d.path / "fifo", "log", 0, 10),
                    Contains("fifo: is a FIFO (named pipe), not a log"));
  fs::create_directory(d.path / "dir");
  CHECK_THROWS_WITH(hpc::read_input_chunk(d.path / "dir", "log", 0, 10),
                    Contains("dir: is a directory, not a log"));
  // Its size says 0 for content that is there: a reader by the size would read it for ever.
  fs::create_symlink("/proc/self/environ", d.path / "environ");
  CHECK_THROWS_WITH(hpc::read_input_chunk(d.path / "environ", "log", 0, 10),
                    Contains("is a file of /proc or /sys"));
  CHECK_THROWS_WITH(hpc::read_input_chunk("/dev/zero", "log", 0, 10),
                    Contains("is a character device"));
}
