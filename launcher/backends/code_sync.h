// Code sync for remote submits (docs/backends.md#code-sync): the project's working directory
// (what git tracks plus the untracked files it does not ignore, or a declared list) uploaded to
// the login node over SFTP, content-addressed. Each file is stored once by its SHA-256 under a
// per-user store; the tree is a manifest named by its own hash and materialised into
// STORE/trees/TREE_HASH by an atomic rename, so an unchanged tree uploads nothing, two runs of
// one tree share one copy, and an interrupted upload leaves no half tree a job could use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/host.h"

namespace hpc {

struct SyncOptions {
  std::string local_root = ".";                   // the working directory to upload
  std::string list_file;                          // "" = git ls-files -co --exclude-standard
  std::string store = "~/.cache/hpclaunch/sync";  // on the login node, per user
  int64_t max_file_size = 10 << 20;               // larger files are skipped, one line each
};

// One file of the tree.
struct SyncFile {
  std::string path;  // relative, '/'-separated
  std::string sha256;
  int mode = 0644;  // 0755 when executable here
  uint64_t size = 0;
};

struct SyncResult {
  std::string tree_hash;     // SHA-256 of the manifest
  std::string tree_dir;      // STORE/trees/TREE_HASH on the login node, absolute
  std::string git_revision;  // HEAD, "+dirty" when the tree differs from it; "" outside git
  std::vector<SyncFile> files;
  int uploaded = 0;  // files sent this time (0 when the tree or all objects were there)
  uint64_t uploaded_bytes = 0;
  std::vector<std::string> skipped;  // one line per file left out, and why
  bool tree_existed = false;         // the tree was there already: nothing was sent
};

// The files to upload and the lines of those left out (size limit, not a regular file, a name
// the manifest cannot hold). Throws UserError outside a git work tree without a list.
std::vector<SyncFile> files_to_sync(const SyncOptions& options, std::vector<std::string>& skipped);

// "SHA256 MODE PATH\n" per file, sorted by path: what the tree hash is of.
std::string sync_manifest(const std::vector<SyncFile>& files);

// Uploads what the store lacks and materialises the tree. Throws BackendError when the host
// fails midway (what was uploaded stays in the store; no tree is made). For the tests only:
// HPCLAUNCH_TEST_SYNC_STOP_AFTER=N stops with a BackendError after N uploaded files.
SyncResult sync_code_tree(Host& host, const SyncOptions& options);

}  // namespace hpc
