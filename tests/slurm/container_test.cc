// Containers on the real cluster: a job of 2 nodes x 2 tasks (--launch srun) whose program runs
// inside a real Charliecloud image (ch-run, Debian's charliecloud-runtime). The test builds the
// image itself, without network: the static busybox, the directories ch-run needs, an
// /etc/os-release that only the image has, and the probe program at /opt/hpc-probe (a path that
// exists only in the image). Each task prints what it sees; the test checks that all four ran in
// the image, on the node Slurm gave them, with RANK, LOCAL_RANK, WORLD_SIZE and the job's
// MASTER_ADDR/MASTER_PORT.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "harness.h"
#include "subprocess.h"
#include "support/prerequisite.h"

using namespace slt;
namespace fs = std::filesystem;

namespace {

constexpr const char* kImageId = "hpclaunch-test-image";

// Runs in the image under busybox sh: the rank variables, where it runs, and the image's ID.
constexpr const char* kContainerProbe = R"SH(#!/bin/sh
. /etc/os-release
echo "cprobe rank=${RANK:-unset} local=${LOCAL_RANK:-unset} world=${WORLD_SIZE:-unset}" \
  "procid=${SLURM_PROCID:-?} host=$(hostname) addr=${MASTER_ADDR:-unset}" \
  "port=${MASTER_PORT:-unset} image=${ID} args=$*"
)SH";

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// A Charliecloud directory image: ch-run binds /etc/passwd, /etc/group, /etc/hosts and
// /etc/resolv.conf over files that must exist, and /dev, /proc, /sys, /tmp, /home over
// directories. Returns "" or why the image cannot be built.
std::string build_image(const fs::path& root) {
  const char* path = std::getenv("PATH");
  const std::string busybox = hpc::find_in_path("busybox", path ? path : "");
  if (busybox.empty()) return "no busybox on PATH (Debian package busybox-static)";
  for (const char* dir : {"bin", "dev", "proc", "sys", "tmp", "etc", "home", "mnt", "opt", "root",
                          "run", "usr", "var"})
    fs::create_directories(root / dir);
  fs::copy_file(fs::canonical(busybox), root / "bin/busybox");
  for (const char* applet : {"sh", "hostname", "cat", "env"})
    fs::create_symlink("busybox", root / "bin" / applet);
  for (const char* file : {"etc/passwd", "etc/group", "etc/hosts", "etc/resolv.conf"})
    write_text(root / file, "");
  write_text(root / "etc/os-release",
             std::string("NAME=\"hpclaunch test image\"\nID=") + kImageId + "\n");
  write_text(root / "opt/hpc-probe", kContainerProbe);
  fs::permissions(root / "opt/hpc-probe", fs::perms::owner_all | fs::perms::group_read |
                                              fs::perms::group_exec | fs::perms::others_read |
                                              fs::perms::others_exec);
  return "";
}

struct ContainerProbe {
  int label = -1, rank = -1, local = -1, world = -1, procid = -1;
  std::string host, addr, port, image, args;
};

std::vector<ContainerProbe> container_probes(const std::string& output) {
  static const std::regex line(
      R"(^\s*(\d+): cprobe rank=(\d+) local=(\d+) world=(\d+) procid=(\d+) host=(\S+) )"
      R"(addr=(\S+) port=(\S+) image=(\S+) args=(.*)$)");
  std::vector<ContainerProbe> probes;
  for (const auto& l : lines_of(output)) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    ContainerProbe p;
    p.label = std::stoi(m[1]);
    p.rank = std::stoi(m[2]);
    p.local = std::stoi(m[3]);
    p.world = std::stoi(m[4]);
    p.procid = std::stoi(m[5]);
    p.host = m[6];
    p.addr = m[7];
    p.port = m[8];
    p.image = m[9];
    p.args = m[10];
    probes.push_back(p);
  }
  return probes;
}

}  // namespace

TEST_CASE("container: --launch srun, 2 nodes x 2 tasks run their program in a Charliecloud image",
          "[container]") {
  Workspace ws("container");
  const fs::path image = fs::path(ws.dir()) / "image";
  const std::string why = build_image(image);
  if (!why.empty()) return hpc::test::missing_prerequisite(why);
  // ch-run needs unprivileged user namespaces; say exactly what fails where it cannot start.
  auto probe =
      run({"ch-run", image.string(), "--", "/bin/cat", "/etc/os-release"}, 30s, {"USER=root"});
  if (probe.exit_code != 0) {
    return hpc::test::missing_prerequisite("ch-run cannot start a container here: " +
                                           probe.summary());
  }
  REQUIRE(contains(probe.out, kImageId));

  auto args = ws.job_args(
      "run", "2n2g",
      {"--launch", "srun", "--set", "container.runtime=charliecloud", "--container", image.string(),
       "--set", "trainer.program=/opt/hpc-probe", "--", "--flag", "two words"});
  auto r = ws.hpclaunch(args);
  INFO("hpclaunch run: " << r.summary() << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.err, "COMPLETED with exit code 0"));
  const std::string job = submitted_job_id(r.err);
  REQUIRE(!job.empty());
  const std::string port = std::to_string(20000 + std::stol(job) % 12768);

  auto probes = container_probes(r.out);
  REQUIRE(probes.size() == 4);
  std::set<int> ranks;
  for (const auto& p : probes) {
    INFO("rank " << p.rank << " on " << p.host);
    ranks.insert(p.rank);
    CHECK(p.image == kImageId);  // /etc/os-release of the image, not of the host
    CHECK(p.label == p.procid);
    CHECK(p.rank == p.procid);  // RANK from the launch's bash line on the host, in the image
    CHECK(p.local == p.procid % 2);
    CHECK(p.world == 4);
    CHECK(p.host == (p.procid < 2 ? "node01" : "node02"));
    CHECK(p.addr == "127.0.0.1");
    CHECK(p.port == port);
    CHECK(contains(p.args, "--flag two words"));
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
}
