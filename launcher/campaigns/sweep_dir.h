// The sweep's directory (--out) and --dry-run's scripts in it. A sweep writes many files into
// one directory and replaces its scripts/ whole, so the directory must be the sweep's own: a new
// one, or one a sweep made. docs/sweeps.md#the-sweep-directory, docs/security.md ("Outputs").
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace hpc {

// Why hpclaunch will not write a sweep into `dir` ("" when it will): a symbolic link (never
// followed); the root or a top-level directory (/etc, /tmp, /home) or anything under a system
// tree (/bin, /boot, /dev, /etc, /lib*, /proc, /sbin, /sys, /usr), also when reached through a
// link among its parents; a file; an existing directory that is neither empty nor a sweep's
// (it holds no sweep.json and no scripts/). A missing `dir` is fine: the sweep creates it.
std::string sweep_dir_refusal(const std::filesystem::path& dir);

// Throws UserError("--out: DIR: " + the refusal, fix) when sweep_dir_refusal names one.
void check_sweep_dir(const std::filesystem::path& dir);

// --dry-run: each (name, script) as DIR/scripts/NAME.sbatch, written into DIR/.scripts.tmp/ and
// renamed into place, so scripts/ holds one sweep's scripts, whole. On any failure (a full disk)
// nothing of it is left: the staging folder goes, and DIR too when this call created it.
// Throws UserError naming the path.
void write_sweep_scripts(const std::filesystem::path& dir,
                         const std::vector<std::pair<std::string, std::string>>& scripts);

}  // namespace hpc
