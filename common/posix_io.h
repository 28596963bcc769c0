// POSIX plumbing the launcher's process code shares: whole writes to a descriptor, closing
// inherited descriptors in a child, signal names, reading a small /proc file.
#pragma once

#include <chrono>
#include <initializer_list>
#include <optional>
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

// The poll(2) timeout that wakes a watch loop at the earliest of `deadlines` (the ones set):
// -1 (wait for an event) when none is set, else milliseconds rounded up, at most a minute.
int poll_timeout_ms(
    std::initializer_list<std::optional<std::chrono::steady_clock::time_point>> deadlines);

// The whole file (a /proc entry, a small JSON file); "" when it cannot be read, is not a
// regular file or is over 1 MiB (read_input_file).
std::string read_small_file(const std::string& path);

}  // namespace hpc
