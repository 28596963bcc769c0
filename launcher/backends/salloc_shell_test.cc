#include "backends/salloc_shell.h"

#include <catch2/catch.hpp>

#include "backends/backend.h"
#include "error.h"
#include "support/fake_host.h"

namespace {

const std::string kScript =
    "#!/bin/bash\n"
    "#SBATCH --job-name=\"a b\"\n"
    "#SBATCH --nodes=2\n"
    "#SBATCH --gres=gpu:2\n"
    "#SBATCH --output=%x-%j.out\n"
    "#SBATCH --open-mode=append\n"
    "#SBATCH --signal=B:USR1@90\n"
    "#SBATCH --requeue\n"
    "#SBATCH --array=0-3\n"
    "#SBATCH -t 10 -p gpu\n"
    "#SBATCH --exclusive\n"
    "#SBATCH --partitio=dev\n"
    "set -euo pipefail\n"
    "#SBATCH --nodes=99\n";

}  // namespace

TEST_CASE("salloc_command: the script's #SBATCH options, less the batch-only ones",
          "[salloc_shell]") {
  hpc::SallocCommand c = hpc::salloc_command(kScript, true);
  CHECK(c.options == std::vector<std::string>{"--job-name=a b", "--nodes=2", "--gres=gpu:2",
                                              "--time=10", "--partition=gpu", "--exclusive",
                                              "--partition=dev"});
  // hpclaunch's own batch options go silently; a user's --array is named.
  CHECK(c.left_out == std::vector<std::string>{"--array=0-3 (line 9)"});
  std::vector<std::string> expected = {"salloc"};
  expected.insert(expected.end(), c.options.begin(), c.options.end());
  expected.insert(expected.end(), {"srun", "--nodes=1", "--ntasks=1", "--overlap", "--preserve-env",
                                   "--pty", "bash", "-c", kScript, "hpclaunch-shell"});
  CHECK(c.argv == expected);
  // Slurm before 20.11: no --overlap.
  auto old = hpc::salloc_command(kScript, false).argv;
  CHECK(std::find(old.begin(), old.end(), "--overlap") == old.end());
}

TEST_CASE("salloc_command: what sbatch would refuse is refused with its line", "[salloc_shell]") {
  CHECK_THROWS_WITH(hpc::salloc_command("#!/bin/bash\n#SBATCH --par=x\n", true, "t.mustache"),
                    Catch::Contains("t.mustache:2") && Catch::Contains("not an sbatch option"));
  CHECK_THROWS_WITH(hpc::salloc_command("#!/bin/bash\n#SBATCH --nodes\n", true),
                    Catch::Contains("needs a value"));
  CHECK_THROWS_WITH(hpc::salloc_command("#!/bin/bash\n#SBATCH -Z\n", true),
                    Catch::Contains("short option"));
  CHECK_THROWS_AS(hpc::salloc_command("#!/bin/bash\n#SBATCH nodes=2\n", true), hpc::UserError);
}

TEST_CASE("check_allocation_fits: sbatch --test-only with the same options", "[salloc_shell]") {
  using hpc::test::FakeHost;
  hpc::SallocCommand c = hpc::salloc_command(kScript, true);
  SECTION("it fits") {
    FakeHost host;
    host.reply("sbatch", hpc::test::exited(0, "", "sbatch: Job 7 to start at now\n"));
    hpc::check_allocation_fits(host, c);
    REQUIRE(host.calls().size() == 1);
    std::vector<std::string> argv = {"sbatch", "--test-only"};
    argv.insert(argv.end(), c.options.begin(), c.options.end());
    CHECK(host.calls()[0].argv == argv);
  }
  SECTION("it never fits: sbatch's reason, one line") {
    FakeHost host;
    host.reply("sbatch", hpc::test::failed("sbatch: error: Batch job submission failed: "
                                           "Requested node configuration is not available\n"));
    CHECK_THROWS_WITH(hpc::check_allocation_fits(host, c),
                      Catch::Contains("cannot grant this allocation") &&
                          Catch::Contains("Requested node configuration is not available") &&
                          Catch::Contains("pick a smaller preset"));
  }
  SECTION("the controller does not answer") {
    FakeHost host;
    host.reply("sbatch", hpc::test::failed("sbatch: error: Batch job submission failed: Unable "
                                           "to contact slurm controller (connect failure)\n"));
    CHECK_THROWS_AS(hpc::check_allocation_fits(host, c), hpc::BackendUnreachable);
  }
}
