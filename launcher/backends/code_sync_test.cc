// What code sync takes from the work tree (backends/code_sync.h): only files inside it. A symbolic
// link is skipped with one line, and so is every path through a linked folder, whatever it
// points to (a file, a folder outside, `..`).
#include "backends/code_sync.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace {

struct Tree {
  fs::path root, outside;
  Tree() {
    char tmpl[] = "/tmp/hpclaunch-sync-test-XXXXXX";
    fs::path top = mkdtemp(tmpl);
    root = top / "tree";
    outside = top / "outside";
    fs::create_directories(root / "src");
    fs::create_directories(outside);
    std::ofstream(root / "src" / "train.py") << "print('ok')\n";
    std::ofstream(outside / "secret") << "not yours\n";
    std::ofstream(outside / "passwd") << "root:x:0:0\n";
  }
  ~Tree() { fs::remove_all(root.parent_path()); }
};

}  // namespace

TEST_CASE("code sync: symbolic links are skipped, never followed out of the tree", "[sync]") {
  Tree t;
  fs::create_symlink(t.outside / "secret", t.root / "secret_link");  // a link to a file
  fs::create_symlink(t.outside, t.root / "cfg");                      // to a folder outside
  fs::create_symlink("..", t.root / "up");                            // to the tree's parent
  fs::create_symlink(t.root / "src", t.root / "src_again");           // even to one inside
  // Paths as git's index or a --sync-list may still name them after a folder became a link.
  std::ofstream(t.root / "list")
      << "src/train.py\nsecret_link\ncfg/passwd\ncfg\nup/outside/secret\nsrc_again/train.py\n";
  hpc::SyncOptions o;
  o.local_root = t.root.string();
  o.list_file = (t.root / "list").string();
  std::vector<std::string> skipped;
  const auto files = hpc::files_to_sync(o, skipped);
  REQUIRE(files.size() == 1);
  CHECK(files[0].path == "src/train.py");
  CAPTURE(skipped);
  REQUIRE(skipped.size() == 5);
  CHECK(skipped[0] == "secret_link: not a regular file (a symbolic link)");
  const std::string never = " is a symbolic link (never followed out of the tree)";
  CHECK(skipped[1] == "cfg/passwd: its folder cfg" + never);
  CHECK(skipped[2] == "cfg: not a regular file (a symbolic link)");
  CHECK(skipped[3] == "up/outside/secret: its folder up" + never);
  CHECK(skipped[4] == "src_again/train.py: its folder src_again" + never);
}
