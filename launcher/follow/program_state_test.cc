#include "follow/program_state.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "subprocess.h"
#include "support/prerequisite.h"

namespace fs = std::filesystem;

namespace {

void git_in(const fs::path& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {
      "git", "-C", dir.string(), "-c", "user.name=t", "-c", "user.email=t@example.org"};
  argv.insert(argv.end(), args.begin(), args.end());
  REQUIRE(hpc::run_command(argv).ok());
}

void write(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("the program's git state: revision, binary-safe diff, untracked names, changes") {
  if (!hpc::program_on_path("git")) return hpc::test::missing_prerequisite("git");
  const fs::path dir =
      fs::temp_directory_path() / ("hpc-program-state-" + std::to_string(getpid()));
  fs::remove_all(dir);
  // A hostile folder name stays a path: git gets it as one argv word.
  const fs::path tree = dir / "$(touch x) proj";
  fs::create_directories(tree);
  CHECK_FALSE(hpc::read_program_state(tree.string()).in_git());

  git_in(tree, {"init", "-q"});
  write(tree / "train.py", "print(1)\n");
  write(tree / "blob.bin", std::string("\0\1\2binary", 9));
  git_in(tree, {"add", "."});
  git_in(tree, {"commit", "-q", "-m", "first"});
  hpc::ProgramState clean = hpc::read_program_state(tree.string());
  REQUIRE(clean.in_git());
  CHECK(clean.revision.size() == 40);
  CHECK_FALSE(clean.dirty());
  CHECK(hpc::describe_program_change(clean, hpc::read_program_state(tree.string())).empty());

  write(tree / "blob.bin", std::string("\0\1\3binary", 9));
  write(tree / "new file.txt", "x");
  hpc::ProgramState dirty = hpc::read_program_state(tree.string());
  CHECK(dirty.dirty());
  CHECK(dirty.diff.find("GIT binary patch") != std::string::npos);
  CHECK(dirty.untracked == std::vector<std::string>{"new file.txt"});
  CHECK(hpc::describe_program_change(clean, dirty).find("uncommitted changes differ") !=
        std::string::npos);

  // The record round-trips through run.json's "program" object.
  hpc::ProgramState back = hpc::ProgramState::from_json(dirty.to_json());
  CHECK(back.revision == dirty.revision);
  CHECK(back.changes_sha256 == dirty.changes_sha256);
  CHECK(hpc::describe_program_change(back, dirty).empty());

  git_in(tree, {"add", "."});
  git_in(tree, {"commit", "-q", "-m", "second"});
  CHECK(hpc::describe_program_change(clean, hpc::read_program_state(tree.string()))
            .find("git revision changed") != std::string::npos);
  CHECK_FALSE(fs::exists(tree / "x"));
  CHECK_FALSE(fs::exists("x"));
  fs::remove_all(dir);
}
