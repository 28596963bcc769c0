#include "backends/code_sync.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "error.h"
#include "input_file.h"
#include "shell.h"
#include "sha256.h"
#include "subprocess.h"
#include "text.h"

namespace fs = std::filesystem;

namespace hpc {
namespace {

// A path the manifest and the materialising script hold as one word of a line: relative, no
// "..", no control character, no blank at either end.
bool manifest_path_ok(const std::string& p) {
  if (p.empty() || p[0] == '/' || p.front() == ' ' || p.back() == ' ') return false;
  for (unsigned char c : p)
    if (c < 0x20 || c == 0x7f) return false;
  for (size_t start = 0;;) {
    size_t slash = p.find('/', start);
    std::string part = p.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

std::vector<std::string> listed_paths(const SyncOptions& o) {
  std::vector<std::string> out;
  if (!o.list_file.empty()) {
    std::string text = read_input_file(o.list_file, "sync list");
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      start = end + 1;
      if (trim(line).empty() || trim(line)[0] == '#') continue;
      out.push_back(line);
    }
    return out;
  }
  CommandOptions c;
  c.cwd = o.local_root;
  CommandResult r = run_command({"git", "ls-files", "-co", "--exclude-standard", "-z"}, c);
  if (!r.ok())
    throw UserError("--sync",
                    o.local_root + " is not a git work tree (" + printable_first_line(r.err) + ")",
                    "run from your project's git checkout, or name the files with --sync-list");
  for (size_t start = 0; start < r.out.size();) {
    size_t end = r.out.find('\0', start);
    if (end == std::string::npos) end = r.out.size();
    if (end > start) out.push_back(r.out.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string git_revision(const std::string& root) {
  CommandOptions c;
  c.cwd = root;
  CommandResult head = run_command({"git", "rev-parse", "HEAD"}, c);
  if (!head.ok()) return "";
  std::string rev = trim(head.out);
  CommandResult status = run_command({"git", "status", "--porcelain"}, c);
  if (status.ok() && !trim(status.out).empty()) rev += "+dirty";
  return rev;
}

// Makes STORE/trees/TREE from the manifest: copies into a temporary folder beside it, then one
// rename. A tree folder is there whole or not at all; a racing upload of the same tree leaves
// the first one.
const char* kMaterialise = R"(set -eu
root=$1 tree=$2
tmp=$(mktemp -d "$root/trees/.tmp-$tree-XXXXXX")
while IFS= read -r line; do
  hash=${line%% *}; rest=${line#* }; mode=${rest%% *}; path=${rest#* }
  case $path in */*) mkdir -p -- "$tmp/${path%/*}" ;; esac
  cp -- "$root/objects/$hash" "$tmp/$path"
  chmod "$mode" "$tmp/$path"
done <"$root/manifests/$tree"
cp -- "$root/manifests/$tree" "$tmp/.hpclaunch-tree"
if ! mv -T -- "$tmp" "$root/trees/$tree" 2>/dev/null; then
  rm -rf -- "$tmp"
  test -f "$root/trees/$tree/.hpclaunch-tree"
fi
)";

// The first folder of `path` (relative, '/'-separated) that is a symbolic link under `root`, as
// the part of `path` up to it; "" when every folder on the way is a real one (or missing).
std::string linked_folder(const std::string& root, const std::string& path) {
  for (size_t slash = path.find('/'); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string folder = path.substr(0, slash);
    struct stat st {};
    if (lstat((fs::path(root) / folder).c_str(), &st) != 0) return "";
    if (S_ISLNK(st.st_mode)) return folder;
  }
  return "";
}

int stop_after_for_tests() {
  const char* v = std::getenv("HPCLAUNCH_TEST_SYNC_STOP_AFTER");
  return v && is_plain_whole_number(v) ? std::atoi(v) : -1;
}

}  // namespace

std::vector<SyncFile> files_to_sync(const SyncOptions& o, std::vector<std::string>& skipped) {
  std::vector<SyncFile> files;
  std::set<std::string> seen;
  for (const auto& path : listed_paths(o)) {
    if (!seen.insert(path).second) continue;
    const std::string shown = comment_text(path);
    if (!manifest_path_ok(path)) {
      skipped.push_back(shown +
                        ": a name the tree cannot hold (absolute, .., a control "
                        "character or a blank at an end)");
      continue;
    }
    // Every folder on the way must be a folder of the tree: lstat looks at the last name only,
    // and a path through a symbolic link (cfg -> /etc, with cfg/passwd still in git's index or
    // in the list) would read a file outside it.
    if (const std::string link = linked_folder(o.local_root, path); !link.empty()) {
      skipped.push_back(shown + ": its folder " + comment_text(link) +
                        " is a symbolic link (never followed out of the tree)");
      continue;
    }
    fs::path local = fs::path(o.local_root) / path;
    struct stat st {};
    if (lstat(local.c_str(), &st) != 0) continue;  // deleted but still tracked: not in the tree
    if (!S_ISREG(st.st_mode)) {
      skipped.push_back(shown + ": not a regular file (" +
                        (S_ISLNK(st.st_mode) ? "a symbolic link" : "a directory or special") + ")");
      continue;
    }
    if (st.st_size > o.max_file_size) {
      skipped.push_back(fmt::format("{}: {} bytes, over the limit of {} (--sync-max-size)", shown,
                                    st.st_size, o.max_file_size));
      continue;
    }
    SyncFile f;
    f.path = path;
    f.size = static_cast<uint64_t>(st.st_size);
    f.mode = (st.st_mode & S_IXUSR) ? 0755 : 0644;
    f.sha256 = sha256_hex(read_input_file(local, "file", o.max_file_size));
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(),
            [](const SyncFile& a, const SyncFile& b) { return a.path < b.path; });
  return files;
}

std::string sync_manifest(const std::vector<SyncFile>& files) {
  std::string m;
  for (const auto& f : files) m += fmt::format("{} {:o} {}\n", f.sha256, f.mode, f.path);
  return m;
}

SyncResult sync_code_tree(Host& host, const SyncOptions& o) {
  SyncResult r;
  r.files = files_to_sync(o, r.skipped);
  r.git_revision = o.list_file.empty() ? git_revision(o.local_root) : "";
  const std::string manifest = sync_manifest(r.files);
  r.tree_hash = sha256_hex(manifest);
  const std::string store = host.absolute(o.store);
  r.tree_dir = store + "/trees/" + r.tree_hash;
  if (host.read_file(r.tree_dir + "/.hpclaunch-tree", 0, 0).exists) {
    r.tree_existed = true;
    return r;
  }
  host.make_dirs(store + "/objects");
  host.make_dirs(store + "/manifests");
  host.make_dirs(store + "/trees");
  const int stop_after = stop_after_for_tests();
  std::set<std::string> done;
  for (const auto& f : r.files) {
    if (!done.insert(f.sha256).second) continue;
    const std::string object = store + "/objects/" + f.sha256;
    if (host.read_file(object, 0, 0).exists) continue;
    if (stop_after >= 0 && r.uploaded >= stop_after)
      throw BackendError("code sync stopped after " + std::to_string(r.uploaded) +
                         " files (HPCLAUNCH_TEST_SYNC_STOP_AFTER, a test's fault injection)");
    host.write_file(
        object, read_input_file(fs::path(o.local_root) / f.path, "file", o.max_file_size), 0644);
    ++r.uploaded;
    r.uploaded_bytes += f.size;
  }
  host.write_file(store + "/manifests/" + r.tree_hash, manifest, 0644);
  CommandOptions c;
  c.timeout = std::chrono::seconds(300);
  CommandResult made = host.run({"sh", "-c", kMaterialise, "sh", store, r.tree_hash}, c);
  if (!made.ok())
    throw BackendError("code sync: materialising " + r.tree_dir + " on " + host.name() +
                       " failed: " + made.summary("sh"));
  return r;
}

}  // namespace hpc
