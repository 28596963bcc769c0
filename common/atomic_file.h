// Files written whole or not at all: a temp file beside the target, fsync, rename. The rename is
// only ever done onto a regular file or a new path; a character device (/dev/null, a tty) and the
// standard streams (/dev/stdout, /dev/stderr, /dev/fd/N) are written through; anything else is
// refused (docs/security.md, "Outputs").
#pragma once

#include <sys/types.h>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace hpc {

// What is at an output path, and so how it is written.
enum class OutputKind {
  kNew,         // nothing there (or a parent that cannot be read: the write reports it)
  kRegular,     // a regular file: replaced by rename
  kCharDevice,  // /dev/null, a tty: opened and written through, never renamed over or chmod-ed
  kStream,      // /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: that descriptor
};

// The kind of `path` (lstat: a link is not followed). Throws UserError, naming the path and the
// fix, for a directory, a FIFO, a socket, a block device or a symbolic link (other than the
// standard streams above): hpclaunch neither replaces those nor writes through them.
OutputKind output_kind(const std::filesystem::path& path);

// A file written piece by piece (a checkpoint shard streamed from the tensors, or a whole output
// staged by StagedOutput): write() appends to a temp file beside `path`; seal() fsyncs and closes
// it; commit() seals and renames it into place, onto a new path only while it is still new.
// Only a regular file or a new path is a target (output_kind; a device or stream is refused too).
// Destroyed without commit() (an error, an exception), it removes the temp file. All throw
// UserError naming `path` and the step that failed.
//
// Caching::kDirect: the bytes go to the disk from an aligned buffer of this process (O_DIRECT),
// not through the page cache, for a large file written once and not read back soon (a
// checkpoint shard). Buffered writes first need free pages for the cache, and on the test machine
// (a VM) that made dd take 3.2 to 4.6 s for the same 1.5 GB, against 0.7 to 1.4 s direct
// (docs/trainer.md). The last bytes that do not fill an aligned block are written through the
// page cache. Where the file system refuses O_DIRECT (ramfs, some FUSE and network mounts), at
// the start or at a write, the rest goes through the page cache.
class AtomicFileWriter {
 public:
  enum class Caching { kPageCache, kDirect };
  explicit AtomicFileWriter(const std::filesystem::path& path, mode_t mode = 0644,
                            Caching caching = Caching::kPageCache);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  void write(std::string_view bytes);
  void seal();
  void commit();
  // Whether the bytes written so far went to the disk unbuffered (Caching::kDirect, accepted).
  bool direct() const { return direct_; }
  // Caching::kDirect asked for and refused by the file system (at the start or at a write): the
  // bytes went, or go from then on, through the page cache.
  bool direct_refused() const { return direct_refused_; }

 private:
  [[noreturn]] void abandon(const std::string& step);
  void flush_direct(size_t n);     // writes buffer_[0, n), n a multiple of the alignment
  void stop_direct(size_t from);  // buffer_[from, fill_) and all after it through the page cache
  std::filesystem::path path_;
  std::string tmp_;
  mode_t mode_;
  OutputKind kind_;
  int fd_ = -1;
  bool committed_ = false;
  bool direct_ = false;
  bool direct_refused_ = false;
  struct FreeBuffer {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, FreeBuffer> buffer_;  // kDirect: aligned, kDirectBuffer bytes
  size_t fill_ = 0;
};

// One output, staged: the constructor checks the target (output_kind) and, for a regular file
// or a new path, writes and fsyncs the content into a temp file beside it; commit() renames it
// into place (or writes a device or stream through). Destroyed uncommitted, it leaves nothing
// behind. Stage every output of a command before committing any, so that a bad path stops
// the command before anything is written.
class StagedOutput {
 public:
  StagedOutput(std::filesystem::path path, std::string_view content, mode_t mode = 0644);
  ~StagedOutput();
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;

  // Throws UserError if the rename fails (nothing written), OutputError if a write through a
  // device or stream fails (what was written may be partial).
  void commit();

 private:
  std::filesystem::path path_;
  OutputKind kind_;
  std::string content_;                   // devices and streams: written at commit
  std::optional<AtomicFileWriter> file_;  // regular files and new paths: sealed, not yet renamed
  bool committed_ = false;
};

// Writes `content` to `path` with permission bits `mode` (for a new or regular file), as one
// StagedOutput. Throws UserError naming the path and the reason (missing directory, permission
// denied, a FIFO, ...) having written nothing; OutputError as commit() does.
void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           mode_t mode = 0644);

}  // namespace hpc
