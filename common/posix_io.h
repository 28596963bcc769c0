// POSIX plumbing the launcher's process code shares: whole writes to a descriptor, closing
// inherited descriptors in a child, signal names, reading a small /proc file.
#pragma once

#include <string>
#include <string_view>

namespace hpc {

// Writes all of `data` to `fd`, retrying on EINTR. Returns false when the descriptor refused
// (a closed pipe, a full disk): callers that log decide whether that matters.
bool write_all(int fd, std::string_view data);

// Closes every descriptor from `first` up (close_range where the kernel has it). For a forked
// child before exec: async-signal-safe.
void close_fds_from(int first);

// "TERM", "SIGTERM", "term" or "15" -> SIGTERM; 0 for what names no signal.
int signal_from_name(std::string name);

// The whole file (a /proc entry, a small JSON file); "" when it cannot be read, is not a
// regular file or is over 1 MiB (read_input_file).
std::string read_small_file(const std::string& path);

}  // namespace hpc
