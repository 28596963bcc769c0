// The sweep's directory: a new one or a sweep's own; never a link, a system directory or a
// directory of other files. --dry-run's scripts leave nothing behind when they fail.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>

#include <filesystem>
#include <fstream>

#include "campaigns/sweep_dir.h"
#include "error.h"

namespace fs = std::filesystem;
using namespace hpc;

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "sweep-dir-test-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};
}  // namespace

TEST_CASE("which directories a sweep writes into", "[sweep][sweep-dir]") {
  TempDir t;
  CHECK(sweep_dir_refusal(t.path / "new").empty());
  CHECK(sweep_dir_refusal(t.path / "new" / "deeper").empty());
  fs::create_directory(t.path / "empty");
  CHECK(sweep_dir_refusal(t.path / "empty").empty());
  fs::create_directories(t.path / "old" / "scripts");  // a dry run's
  CHECK(sweep_dir_refusal(t.path / "old").empty());
  fs::create_directory(t.path / "resumed");
  std::ofstream(t.path / "resumed" / "sweep.json") << "{}";
  CHECK(sweep_dir_refusal(t.path / "resumed").empty());

  fs::create_directory(t.path / "other");
  std::ofstream(t.path / "other" / "notes.txt") << "mine";
  CHECK_THAT(sweep_dir_refusal(t.path / "other"), Catch::Contains("not a sweep's directory"));
  std::ofstream(t.path / "file") << "x";
  CHECK(sweep_dir_refusal(t.path / "file") == "is not a directory");
  fs::create_directory_symlink(t.path / "empty", t.path / "link");
  CHECK_THAT(sweep_dir_refusal(t.path / "link"), Catch::Contains("is a symbolic link"));
  fs::create_directory_symlink("/etc", t.path / "etc-link");
  CHECK_THAT(sweep_dir_refusal(t.path / "etc-link"), Catch::Contains("is a symbolic link"));
  // Through a link among its parents: where it would really be written.
  CHECK_THAT(sweep_dir_refusal(t.path / "etc-link" / "sw"),
             Catch::Contains("is a system directory (/etc/sw)"));
  for (const char* system : {"/", "/etc", "/tmp", "/home", "/usr/share/x", "/proc/1", "//",
                             "/tmp/..", "/var"})
    CHECK_THAT(sweep_dir_refusal(system), Catch::Contains("is a system directory"));
  CHECK_THROWS_WITH(check_sweep_dir("/"),
                    "--out: /: is a system directory (/); choose a new directory for the sweep "
                    "(or one an earlier sweep made)");
}

TEST_CASE("dry-run scripts: renamed into place whole, nothing left on failure",
          "[sweep][sweep-dir]") {
  TempDir t;
  const fs::path out = t.path / "a" / "sw";
  write_sweep_scripts(out, {{"p1", "#!/bin/bash\n"}, {"p2", "#!/bin/bash\n"}});
  CHECK(fs::exists(out / "scripts" / "p1.sbatch"));
  CHECK(fs::exists(out / "scripts" / "p2.sbatch"));
  CHECK_FALSE(fs::exists(out / ".scripts.tmp"));
  // Again, with one point: scripts/ holds this sweep's only.
  write_sweep_scripts(out, {{"p3", "x"}});
  CHECK_FALSE(fs::exists(out / "scripts" / "p1.sbatch"));
  CHECK(fs::exists(out / "scripts" / "p3.sbatch"));

  // A script that cannot be written (its name is a directory path that does not exist): the
  // staging folder goes, and so do the directories this call made.
  const fs::path fresh = t.path / "b" / "sw";
  CHECK_THROWS_AS(write_sweep_scripts(fresh, {{"ok", "x"}, {"no/such/dir", "x"}}), UserError);
  CHECK_FALSE(fs::exists(t.path / "b"));
  CHECK_THROWS_AS(write_sweep_scripts(out, {{"no/such/dir", "x"}}), UserError);
  CHECK_FALSE(fs::exists(out / ".scripts.tmp"));
  CHECK(fs::exists(out / "scripts" / "p3.sbatch"));  // the earlier scripts stay
}
