// Files are written whole or not at all: a temp file beside the target, fsync, rename.
#pragma once

#include <sys/types.h>
#include <filesystem>
#include <string>
#include <string_view>

namespace hpc {

// The same, for content written piece by piece (a checkpoint shard streamed from the tensors):
// write() appends to a temp file beside `path`; commit() fsyncs, closes and renames it to `path`.
// Destroyed without commit() (an error, an exception), it removes the temp file. Both throw
// UserError naming `path` and the step that failed.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::filesystem::path& path, mode_t mode = 0644);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  void write(std::string_view bytes);
  void commit();

 private:
  [[noreturn]] void abandon(const std::string& step);
  std::filesystem::path path_;
  std::string tmp_;
  mode_t mode_;
  int fd_ = -1;
};

// Writes `content` to `path` atomically with permission bits `mode`. Throws UserError naming
// the path and the reason (missing directory, permission denied, ...); leaves no temp file.
void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           mode_t mode = 0644);

}  // namespace hpc
