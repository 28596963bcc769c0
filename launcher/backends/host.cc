#include "backends/host.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "atomic_file.h"
#include "error.h"
#include "input_file.h"

namespace fs = std::filesystem;

namespace hpc {

CommandResult LocalHost::run(const std::vector<std::string>& argv, const CommandOptions& options) {
  return run_command(argv, options);
}

void LocalHost::make_dirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) throw BackendError("cannot create directory " + path + ": " + ec.message());
}

void LocalHost::write_file(const std::string& path, const std::string& content, int mode) {
  try {
    write_file_atomically(path, content, static_cast<mode_t>(mode));
  } catch (const UserError& e) {
    throw BackendError(e.what());
  }
}

LogChunk LocalHost::read_file(const std::string& path, uint64_t offset, size_t max_bytes) {
  // The run directory's files (logs, metrics, timeline) through the input reader's checks: a
  // FIFO, a folder or a /proc file there is one line, never a wait or a loop.
  InputChunk in = read_input_chunk(path, "regular file", offset, max_bytes);
  LogChunk chunk;
  chunk.exists = in.exists;
  chunk.data = std::move(in.data);
  chunk.next_offset = in.next_offset;
  return chunk;
}

std::string LocalHost::absolute(const std::string& path) {
  std::string p = path;
  if (p == "~" || p.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    p = std::string(home ? home : "/") + p.substr(1);
  }
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  if (ec) throw BackendError("cannot resolve path " + path + ": " + ec.message());
  return abs.lexically_normal().string();
}

}  // namespace hpc
