// Reading the files hpclaunch is given or finds (hpclaunch.json, defaults.json, presets, cluster
// profiles, templates, tune grids, sweep files, results.csv): one reader that opens the path
// once, refuses anything but a regular file, and stops at a size limit, so that a dangling link,
// a folder, a FIFO or /dev/zero is a one-line UserError, never a hang, a silent skip or memory
// without bound. docs/security-inputs.md states the rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace hpc {

// JSON files, templates and scripts: far above any real one (the largest built-in file is a
// few KiB), far below what would hurt.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{4} << 20;
// A sweep's results.csv: one short row per point.
inline constexpr std::size_t kMaxResultsFileBytes = std::size_t{16} << 20;

// Whether anything is at `path`, without following a final symbolic link: a regular file, a
// folder, a FIFO, a device or a dangling link all count. An optional input that is present must
// then be read with read_input_file, which says what is wrong with it; only a path where nothing
// is at all may be skipped.
bool input_path_present(const std::filesystem::path& path);

// The whole content of the regular file at `path` (symbolic links followed). `what` names the
// file in messages ("JSON file", "template"). Throws UserError naming the path, what is wrong and
// the fix for: nothing there, a dangling or looping link, a folder, a FIFO, a device, a socket,
// no permission, more than `max_bytes` bytes. A FIFO or device is never read from.
std::string read_input_file(const std::filesystem::path& path, const std::string& what = "file",
                            std::size_t max_bytes = kMaxInputFileBytes);

// A piece of a file that may still grow: a job's log, metrics.jsonl, timeline.jsonl.
struct InputChunk {
  bool exists = false;            // false: nothing at the path (yet): a pending job has no log
  std::string data;               // at most max_bytes from the offset read
  std::uint64_t next_offset = 0;  // where to read next time
};

// The streaming twin of read_input_file, for files a run directory holds and a job may still
// write: the same checks, for each piece. Nothing there (or a dangling link): exists=false. A
// folder, a FIFO, a device, a socket, a file of /proc or /sys (its size says nothing of what it
// holds: read again and again it never ends) or no permission: UserError naming the path. A
// FIFO is never opened for reading (open would wait for a writer). A file now shorter than
// `offset` (truncated or replaced) is read from its start.
InputChunk read_input_chunk(const std::filesystem::path& path, const std::string& what,
                            std::uint64_t offset, std::size_t max_bytes);

// "4 MiB", "16 MiB", "512 bytes": a size limit as messages and docs state it.
std::string describe_size_limit(std::size_t bytes);

}  // namespace hpc
