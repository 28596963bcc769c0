// Files are written whole or not at all: a temp file beside the target, fsync, rename.
#pragma once

#include <sys/types.h>
#include <filesystem>
#include <string_view>

namespace hpc {

// Writes `content` to `path` atomically with permission bits `mode`. Throws UserError naming
// the path and the reason (missing directory, permission denied, ...); leaves no temp file.
void write_file_atomically(const std::filesystem::path& path, std::string_view content,
                           mode_t mode = 0644);

}  // namespace hpc
