// Bad launch input: an unknown mode, a strategy or trainer.command with a user's program, no
// program, an empty torchrun command. One line, exit 2, nothing written or submitted.
#include <catch2/catch.hpp>

#include "bad_input.h"

using namespace cli_test;

namespace {

// render ... --launch MODE -o out.sbatch --spec-out spec.json EXTRA (no --strategy).
std::vector<std::string> launch_args(const std::string& mode, std::vector<std::string> extra) {
  std::vector<std::string> a = {"render", "--preset",   "2n2g",       "--launch", mode,
                                "-o",     "out.sbatch", "--spec-out", "spec.json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace

TEST_CASE("bad input: launch modes", "[bad-input]") {
  check_all({
      {"unknown launch mode with a suggestion",
       launch_args("torchrn", {"--", "train.py"}),
       {},
       {"--launch", "unknown launch mode \"torchrn\"", "did you mean \"torchrun\""}},
      {"unknown launch mode in the project file",
       {"render", "--preset", "2n2g", "-o", "out.sbatch", "--", "x"},
       {{kProject, R"({"launch": "mpi"})"}},
       {"hpclaunch.json: launch", "unknown launch mode \"mpi\""}},
      {"unknown launch mode through --set lists the known ones",
       {"render", "--preset", "2n2g", "--set", "launch=mpi", "-o", "out.sbatch", "--", "x"},
       {},
       {"--set launch=mpi", "\"mpi\"", "known modes (docs/programs.md): hpctrain, srun, torchrun"}},
      {"--strategy with launch srun",
       launch_args("srun", {"--strategy", "fsdp", "--", "python", "train.py"}),
       {},
       {"--strategy", "a strategy is hpctrain's, and launch is srun", "leave --strategy out"}},
      {"a strategy in the project file with launch torchrun",
       {"render", "--preset", "2n2g", "-o", "out.sbatch", "--", "train.py"},
       {{kProject, R"({"launch": "torchrun", "strategy": "fsdp"})"}},
       {"hpclaunch.json: strategy", "launch is torchrun", "--set strategy=null"}},
      {"a strategy through --set with launch srun",
       launch_args("srun", {"--set", "strategy=zero1", "--", "x"}),
       {},
       {"--set strategy=zero1: strategy", "hpctrain's"}},
      {"trainer.command with launch srun",
       launch_args("srun", {"--set", "trainer.command=train", "--", "x"}),
       {},
       {"--set trainer.command=train: trainer.command", "is hpctrain's verb", "remove it"}},
      {"launch srun without a program",
       launch_args("srun", {}),
       {},
       {"--launch", "launch srun has no program to run", "put the command after --"}},
      {"launch torchrun with an empty program",
       launch_args("torchrun", {"--", ""}),
       {},
       {"--launch", "launch torchrun has no program to run"}},
      {"launch srun from the project file without a program",
       {"render", "--preset", "2n2g", "-o", "out.sbatch"},
       {{kProject, R"({"launch": "srun"})"}},
       {"hpclaunch.json: launch", "has no program to run"}},
      {"an empty torchrun.command",
       launch_args("torchrun", {"--set", "torchrun.command=[]", "--", "train.py"}),
       {},
       {"--set torchrun.command=[]: torchrun.command", "is empty", "[\"torchrun\"]"}},
      {"an empty word in torchrun.command",
       launch_args("torchrun", {"--set", R"(torchrun.command=["torchrun", ""])", "--", "t.py"}),
       {},
       {"torchrun.command", "entry 2 is empty", "remove it"}},
      {"torchrun.command not a list",
       launch_args("torchrun", {"--", "t.py"}),
       {{kProject, R"({"torchrun": {"command": "torchrun"}})"}},
       {"hpclaunch.json: torchrun.command", "expected a list of strings"}},
      {"a program that looks like an option",
       launch_args("torchrun", {"--", "--nnodes=9", "train.py"}),
       {},
       {"--nnodes=9", "starts with '-'", "put the program first"}},
      {"a torchrun command that looks like an option",
       launch_args("torchrun", {"--set", R"(torchrun.command=["--nodes=9"])", "--", "t.py"}),
       {},
       {"torchrun.command", "which srun reads as an option", "name the launcher first"}},
      // A sweep may run a user's program (docs/sweeps.md, "Your own program"): it needs one,
      // and hpctrain's --strategy does not apply to it.
      {"sweep with launch srun from the project file and no program",
       {"sweep", "--presets", "1n1g", "--strategy", "ddp", "--local", "--out", "sw"},
       {{kProject, R"({"launch": "srun"})"}},
       {"hpclaunch.json: launch", "has no program to run"}},
      {"sweep of a program with --strategy",
       {"sweep", "--presets", "1n1g", "--strategy", "ddp", "--launch", "srun", "--local", "--out",
        "sw", "--", "python3", "t.py"},
       {},
       {"--strategy: a strategy is hpctrain's", "remove --strategy"}},
      {"tune with launch torchrun from the project file",
       {"tune", "--preset", "1n2g", "--local"},
       {{kProject, R"({"launch": "torchrun"})"}},
       {"hpclaunch.json: launch", "hpclaunch tune runs hpctrain"}},
      {"run --local without a program submits nothing",
       {"run", "--local", "--preset", "1n2g", "--launch", "srun"},
       {},
       {"--launch", "has no program to run"}},
      {"submit --local with --strategy and launch torchrun submits nothing",
       {"submit", "--local", "--preset", "1n2g", "--launch", "torchrun", "--strategy", "ddp", "--",
        "train.py"},
       {},
       {"--strategy", "launch is torchrun"}},
  });
}
