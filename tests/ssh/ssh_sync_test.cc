// Code sync through the test cluster's login node (backends/code_sync.h): a first upload, a
// second that sends nothing, a one-file change that sends one file, an interrupted upload that
// leaves no tree, and `hpclaunch run --sync` running the job in the uploaded copy.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "backends/code_sync.h"
#include "backends/ssh_host.h"
#include "process.h"
#include "ssh_test_support.h"
#include "testcluster.h"

namespace fs = std::filesystem;
using namespace hpc;
using hpc::test::login_options;
using hpc::test::scratch_dir;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

void git(const fs::path& repo, std::vector<std::string> args) {
  args.insert(args.begin(),
              {"git", "-C", repo.string(), "-c", "user.name=t", "-c", "user.email=t@example.org"});
  auto r = hpc::test::run_process(args, {});
  REQUIRE(r.ok());
}

// A git work tree: tracked files (one executable, one over the 1 KiB limit), an untracked one
// and an ignored one.
fs::path make_project(const std::string& name) {
  fs::path repo = scratch_dir(name);
  git(repo, {"init", "-q"});
  write(repo / "train.py", "print('train')\n");
  write(repo / "tools/run.sh", "#!/bin/sh\necho run\n");
  fs::permissions(repo / "tools/run.sh", fs::perms::owner_all);
  write(repo / "data.bin", std::string(4096, 'x'));
  write(repo / ".gitignore", "*.log\n");
  git(repo, {"add", "."});
  git(repo, {"commit", "-q", "-m", "first"});
  write(repo / "notes.txt", "untracked, not ignored\n");
  write(repo / "out.log", "ignored\n");
  return repo;
}

std::vector<std::string> tree_dirs(const fs::path& store) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(store / "trees")) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

// A job through the test cluster's login node with code sync: the cluster, the run folders, the
// sync store with a 1K size limit, then the program.
void add_synced_job_args(std::vector<std::string>& args, const fs::path& repo,
                         const fs::path& store) {
  const std::vector<std::string> more = {"--set",
                                         "shape.cpus_per_gpu=1",
                                         "--ssh-config",
                                         hpc::test::testcluster_ssh_config(),
                                         "--host",
                                         "testlogin",
                                         "--remote-runs-dir",
                                         (repo / "remote-runs").string(),
                                         "--runs-dir",
                                         (repo / "runs").string(),
                                         "--sync",
                                         "--sync-store",
                                         store.string(),
                                         "--sync-max-size",
                                         "1K",
                                         "--",
                                         "./prog.sh"};
  args.insert(args.end(), more.begin(), more.end());
}

}  // namespace

TEST_CASE("ssh sync: first upload, nothing the second time, one file for a one-file change",
          "[ssh][sync]") {
  fs::path repo = make_project("sync-project");
  fs::path store = scratch_dir("sync-store");
  SshHost host(login_options());
  SyncOptions o;
  o.local_root = repo.string();
  o.store = store.string();
  o.max_file_size = 1024;

  SyncResult first = sync_code_tree(host, o);
  // .gitignore, notes.txt, tools/run.sh, train.py; data.bin over the limit; out.log ignored.
  CHECK(first.uploaded == 4);
  REQUIRE(first.skipped.size() == 1);
  CHECK_THAT(first.skipped[0], Catch::StartsWith("data.bin: 4096 bytes, over the limit"));
  CHECK(first.git_revision.size() == 40 + std::string("+dirty").size());
  fs::path tree = first.tree_dir;
  CHECK(tree == store / "trees" / first.tree_hash);
  CHECK(hpc::test::read_local((tree / "train.py").string()) == "print('train')\n");
  CHECK((fs::status(tree / "tools/run.sh").permissions() & fs::perms::owner_exec) !=
        fs::perms::none);
  CHECK_FALSE(fs::exists(tree / "out.log"));
  CHECK_FALSE(fs::exists(tree / "data.bin"));

  SyncResult again = sync_code_tree(host, o);
  CHECK(again.uploaded == 0);
  CHECK(again.tree_existed);
  CHECK(again.tree_hash == first.tree_hash);

  write(repo / "train.py", "print('train, changed')\n");
  SyncResult changed = sync_code_tree(host, o);
  CHECK(changed.uploaded == 1);
  CHECK(changed.tree_hash != first.tree_hash);
  CHECK(hpc::test::read_local(changed.tree_dir + "/train.py") == "print('train, changed')\n");
  CHECK(tree_dirs(store).size() == 2);  // both trees, each whole
}

TEST_CASE("ssh sync: an interrupted upload leaves no tree a job could use", "[ssh][sync]") {
  fs::path repo = make_project("sync-interrupted");
  fs::path store = scratch_dir("sync-store-interrupted");
  SshHost host(login_options());
  SyncOptions o;
  o.local_root = repo.string();
  o.store = store.string();
  o.max_file_size = 1024;
  ::setenv("HPCLAUNCH_TEST_SYNC_STOP_AFTER", "2", 1);
  CHECK_THROWS_AS(sync_code_tree(host, o), BackendError);
  ::unsetenv("HPCLAUNCH_TEST_SYNC_STOP_AFTER");
  CHECK(tree_dirs(store).empty());  // two objects in the store, no tree
  SyncResult resumed = sync_code_tree(host, o);
  CHECK(resumed.uploaded == 2);  // only what the first attempt did not send
  CHECK(tree_dirs(store) == std::vector<std::string>{resumed.tree_hash});
  CHECK(fs::exists(fs::path(resumed.tree_dir) / ".hpclaunch-tree"));
}

TEST_CASE("ssh sync: hpclaunch run --sync runs the job in the uploaded copy, run.json says which",
          "[ssh][sync]") {
  fs::path repo = make_project("sync-run");
  write(repo / "prog.sh", "#!/bin/sh\necho \"cwd=$(pwd) says=$(cat train.py)\"\n");
  fs::permissions(repo / "prog.sh", fs::perms::owner_all);
  // The run records are kept in the project, and ignored like build outputs.
  write(repo / ".gitignore", "*.log\nruns/\nremote-runs/\n");
  fs::path store = scratch_dir("sync-store-run");
  fs::create_directories(repo / "config");
  write(repo / "config/.keep", "");
  hpc::test::ProcessOptions po;
  po.cwd = repo.string();
  po.timeout = std::chrono::seconds(90);
  po.env = {"XDG_CONFIG_HOME=" + (repo / "config").string(),
            "HPCLAUNCH_PATH=", "SLURM_CONF=" + hpc::test::testcluster_dir() + "/etc/slurm.conf"};
  std::vector<std::string> args = {
      HPCLAUNCH_BINARY, "run", "--no-project", "--preset", "1n1g", "--launch", "srun",
  };
  add_synced_job_args(args, repo, store);
  auto r = hpc::test::run_process(args, po);
  INFO(r.out + r.err);
  REQUIRE(r.ok());
  CHECK_THAT(r.err, Catch::Contains("hpclaunch: sync: skipped data.bin: 4096 bytes"));
  CHECK_THAT(r.err, Catch::Contains("): uploaded 6 files"));  // and config/.keep, prog.sh
  const std::vector<std::string> trees = tree_dirs(store);
  REQUIRE(trees.size() == 1);
  CHECK_THAT(r.out, Catch::Contains("cwd=" + (store / "trees" / trees[0]).string() +
                                    " says=print('train')"));
  fs::path record;
  for (const auto& e : fs::directory_iterator(repo / "runs")) record = e.path() / "run.json";
  const std::string run_json = hpc::test::read_local(record.string());
  CHECK_THAT(run_json, Catch::Contains("\"code_tree\": \"" + trees[0] + "\""));
  CHECK_THAT(run_json, Catch::Contains("\"git_revision\": \""));
  // The same tree again: nothing uploaded, the same copy.
  auto again = hpc::test::run_process(args, po);
  REQUIRE(again.ok());
  CHECK_THAT(again.err, Catch::Contains("uploaded 0 files (0 bytes); the tree was there already"));
  CHECK(tree_dirs(store).size() == 1);
}

TEST_CASE("ssh sync: a sweep with repeats on the test cluster uploads once, every run in the copy",
          "[ssh][sync][sweep]") {
  fs::path repo = make_project("sync-sweep");
  write(repo / "prog.sh",
        "#!/bin/sh\n[ \"$SLURM_PROCID\" = 0 ] || exit 0\n"
        "echo \"cwd=$(pwd)\"\necho \"tps $((100 * SLURM_NTASKS))\"\n");
  fs::permissions(repo / "prog.sh", fs::perms::owner_all);
  write(repo / ".gitignore", "*.log\nruns/\nremote-runs/\nsweep/\nconfig/\n");
  fs::path store = scratch_dir("sync-store-sweep");
  hpc::test::ProcessOptions po;
  po.cwd = repo.string();
  po.timeout = std::chrono::seconds(110);
  po.env = {"XDG_CONFIG_HOME=" + (repo / "config").string(),
            "HPCLAUNCH_PATH=", "SLURM_CONF=" + hpc::test::testcluster_dir() + "/etc/slurm.conf"};
  std::vector<std::string> args = {HPCLAUNCH_BINARY,
                                   "sweep",
                                   "--no-project",
                                   "--presets",
                                   "1n1g,1n2g",
                                   "--launch",
                                   "srun",
                                   "--metric-regex",
                                   "tps ([0-9]+)",
                                   "--repeats",
                                   "2",
                                   "--out",
                                   (repo / "sweep").string()};
  add_synced_job_args(args, repo, store);
  auto r = hpc::test::run_process(args, po);
  INFO(r.out + r.err);
  REQUIRE(r.ok());
  // One upload for the whole sweep; four jobs ran in the one tree.
  size_t uploads = 0;
  for (size_t at = 0; (at = r.err.find("hpclaunch: sync: tree ", at)) != std::string::npos; ++at)
    ++uploads;
  CHECK(uploads == 1);
  const std::vector<std::string> trees = tree_dirs(store);
  REQUIRE(trees.size() == 1);
  const std::string csv = hpc::test::read_local((repo / "sweep/results.csv").string());
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 5);
  CHECK(csv.find(",COMPLETED,200.00,") != std::string::npos);
  int in_tree = 0;
  for (const auto& e : fs::directory_iterator(repo / "runs")) {
    const std::string record = hpc::test::read_local((e.path() / "run.json").string());
    if (record.find("\"code_tree\": \"" + trees[0] + "\"") != std::string::npos) ++in_tree;
  }
  CHECK(in_tree == 4);
}
