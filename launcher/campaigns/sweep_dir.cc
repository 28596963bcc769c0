#include "campaigns/sweep_dir.h"

#include <sys/stat.h>

#include <fstream>

#include "error.h"
#include "shell.h"

namespace fs = std::filesystem;

namespace hpc {
namespace {

// The root, a top-level directory, or a path inside a tree the system owns.
bool is_system_path(const fs::path& path) {
  static const char* const kTrees[] = {"bin", "boot", "dev",  "etc",    "lib", "lib32",
                                       "lib64", "libx32", "proc", "sbin", "sys", "usr"};
  std::vector<std::string> parts;
  for (const auto& part : path.lexically_normal())
    if (part != "/" && !part.empty()) parts.push_back(part.string());
  if (parts.size() <= 1) return true;
  for (const char* tree : kTrees)
    if (parts.front() == tree) return true;
  return false;
}

// Removes what it holds unless released: the staging folder (and the sweep directory this run
// created) on every way out of write_sweep_scripts but success.
class Cleanup {
 public:
  explicit Cleanup(std::vector<fs::path> paths) : paths_(std::move(paths)) {}
  ~Cleanup() {
    std::error_code ec;
    for (const auto& p : paths_) fs::remove_all(p, ec);
  }
  void release_all() { paths_.clear(); }

 private:
  std::vector<fs::path> paths_;
};

}  // namespace

std::string sweep_dir_refusal(const fs::path& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return "is a symbolic link; hpclaunch writes a sweep into a directory of its own, never "
           "through a link";
  std::error_code ec;
  const fs::path absolute = fs::absolute(dir, ec);
  const fs::path resolved = fs::weakly_canonical(absolute, ec);
  if (is_system_path(absolute) || (!ec && is_system_path(resolved)))
    return "is a system directory (" + comment_text((ec ? absolute : resolved).string()) + ")";
  if (lstat(dir.c_str(), &st) != 0) return "";  // new: created by the sweep
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  struct stat entry {};
  if (lstat((dir / "sweep.json").c_str(), &entry) == 0) return "";
  if (lstat((dir / "scripts").c_str(), &entry) == 0 && S_ISDIR(entry.st_mode)) return "";
  if (fs::is_empty(dir, ec) && !ec) return "";
  return "holds other files and is not a sweep's directory (no sweep.json, no scripts/)";
}

void check_sweep_dir(const fs::path& dir) {
  const std::string why = sweep_dir_refusal(dir);
  if (!why.empty()) {
    throw UserError("--out: " + comment_text(dir.string()), why,
                    "choose a new directory for the sweep (or one an earlier sweep made)");
  }
}

void write_sweep_scripts(const fs::path& dir,
                         const std::vector<std::pair<std::string, std::string>>& scripts) {
  const fs::path scripts_dir = dir / "scripts", staging = dir / ".scripts.tmp";
  std::error_code ec;
  check_sweep_dir(dir);
  const fs::file_status scripts_status = fs::symlink_status(scripts_dir, ec);
  if (fs::exists(scripts_status) && !fs::is_directory(scripts_status))
    throw UserError(scripts_dir.string(), "is not a directory of the sweep's own",
                    "remove it; --dry-run writes the folder itself");
  // The first of dir and its parents that is missing: what this call creates, and removes again
  // if it fails.
  fs::path created;
  for (fs::path p = fs::absolute(dir).lexically_normal(); !p.empty() && p != p.root_path();
       p = p.parent_path()) {
    if (fs::exists(fs::symlink_status(p, ec))) break;
    created = p;
  }
  Cleanup cleanup(created.empty() ? std::vector<fs::path>{staging}
                                  : std::vector<fs::path>{staging, created});
  fs::create_directories(dir, ec);
  if (ec) throw UserError(dir.string(), "cannot create: " + ec.message(), "check the path");
  fs::remove_all(staging, ec);
  fs::create_directory(staging, ec);
  if (ec) throw UserError(staging.string(), "cannot create: " + ec.message(), "check the path");
  for (const auto& [name, text] : scripts) {
    const fs::path file = staging / (name + ".sbatch");
    std::ofstream f(file, std::ios::binary);
    f << text;
    f.close();
    if (!f)
      throw UserError(file.string(), "cannot write", "check the disk space and permissions");
  }
  fs::remove_all(scripts_dir, ec);
  fs::rename(staging, scripts_dir, ec);
  if (ec)
    throw UserError(scripts_dir.string(), "cannot rename into place: " + ec.message(),
                    "check the permissions of the sweep directory");
  cleanup.release_all();
}

}  // namespace hpc
