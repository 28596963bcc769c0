// The roll-call of a hung Python program: faulthandler's dumps as srun labels them in the log
// (the format as Python 3.11 prints it), the place of each stack, the one-line summary.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "follow/rollcall.h"

using namespace hpc;

namespace {

const std::string kTorch = "/venv/lib/python3.11/site-packages/torch/distributed/";

// Rank R's dump: a worker thread, then the thread that answered, waiting in all_reduce.
std::vector<std::string> waiting(int r) {
  const std::string l = std::to_string(r) + ": ";
  return {l + "Thread 0x00007fcea468f6c0 (most recent call first):",
          l + "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait",
          l + "",
          l + "Current thread 0x00007fcea53f5b80 (most recent call first):",
          l + "  File \"" + kTorch + "distributed_c10d.py\", line 2050 in all_reduce",
          l + "  File \"" + kTorch + "c10d_logger.py\", line 75 in wrapper",
          l + "  File \"/home/me/proj/train.py\", line 88 in main",
          l + "  File \"/home/me/proj/train.py\", line 95 in <module>"};
}

}  // namespace

TEST_CASE("rollcall: faulthandler's stacks per rank, the answering thread's", "[rollcall]") {
  std::vector<std::string> log = waiting(0);
  for (const auto& l :
       std::vector<std::string>{"2: Current thread 0x00007f00 (most recent call first):",
                                "2:   File \"/home/me/proj/data.py\", line 41 in __next__",
                                "2:   File \"/home/me/proj/train.py\", line 80 in main",
                                "hpclaunch: a line of the script", "1: step 3 loss 2.5"})
    log.push_back(l);
  auto stacks = parse_python_stacks(log);
  REQUIRE(stacks.size() == 2);
  REQUIRE(stacks[0].size() == 1);
  const PyStack& s0 = stacks[0][0];
  REQUIRE(s0.size() == 4);
  CHECK(s0[0].function == "all_reduce");
  CHECK(s0[2].file == "/home/me/proj/train.py");
  CHECK(s0[2].line == 88);
  CHECK(stack_place(s0) == "train.py:88 in main, inside all_reduce");
  CHECK(stack_place(stacks[2][0]) == "data.py:41 in __next__");
  CHECK(stack_place({}) == "");
  // A stack wholly in libraries: its innermost frame.
  CHECK(stack_place({{"/usr/lib/python3.11/threading.py", 320, "wait"}}) ==
        "threading.py:320 in wait");
}

TEST_CASE("rollcall: the summary names the stuck rank and its node", "[rollcall]") {
  std::vector<std::string> log;
  for (int r : {0, 1, 3}) {
    auto w = waiting(r);
    log.insert(log.end(), w.begin(), w.end());
  }
  log.push_back("2: Current thread 0x00007f00 (most recent call first):");
  log.push_back("2:   File \"/home/me/proj/data.py\", line 41 in __next__");
  auto host_of = [](int r) { return r < 2 ? std::string("node01") : std::string("node02"); };
  CHECK(rollcall_summary(parse_python_stacks(log), 4, host_of, false) ==
        "roll-call: 3 of 4 ranks at train.py:88 in main, inside all_reduce; rank 2 on node02 at "
        "data.py:41 in __next__");
  // A rank that printed no stack is named; one group alone names its ranks.
  CHECK(rollcall_summary(parse_python_stacks(waiting(0)), 2, host_of, false) ==
        "roll-call: rank 0 on node01 at train.py:88 in main, inside all_reduce; rank 1 on node01: "
        "no stack");
  // torchrun: the labels are nodes, and each node's workers answer under its label.
  std::vector<std::string> nodes = waiting(0);
  for (const auto& l : waiting(0)) nodes.push_back(l);
  for (const auto& l : waiting(1)) nodes.push_back(l);
  nodes.push_back("1: Current thread 0x00007f00 (most recent call first):");
  nodes.push_back("1:   File \"/home/me/proj/data.py\", line 41 in __next__");
  auto by_node = parse_python_stacks(nodes);
  REQUIRE(by_node[0].size() == 2);
  REQUIRE(by_node[1].size() == 2);
  auto node_host = [](int l) { return l == 0 ? std::string("node01") : std::string("node02"); };
  CHECK(rollcall_summary(by_node, 4, node_host, true) ==
        "roll-call: 3 of 4 ranks at train.py:88 in main, inside all_reduce; 1 rank on node02 at "
        "data.py:41 in __next__");
  CHECK(rollcall_summary(parse_python_stacks(waiting(1)), 4, node_host, true) ==
        "roll-call: 1 rank on node02 at train.py:88 in main, inside all_reduce; 3 ranks: no "
        "stack");
  // A rank asked twice: its last answer.
  auto twice = waiting(0);
  twice.push_back("0: Current thread 0x00007f00 (most recent call first):");
  twice.push_back("0:   File \"/home/me/proj/data.py\", line 41 in __next__");
  CHECK(rollcall_summary(parse_python_stacks(twice), 1, nullptr, false) ==
        "roll-call: rank 0 at data.py:41 in __next__");
  CHECK(rollcall_summary({}, 4, host_of, false).empty());
}

TEST_CASE("rollcall: lines that only look like a dump are skipped", "[rollcall]") {
  auto stacks = parse_python_stacks({"0:   File \"x.py\", line 12 in f",  // no thread header
                                     "1: Current thread 0x1 (most recent call first):",
                                     "1:   File \"x.py\", line notanumber in f", "padded",
                                     "12345678: Thread 0x2:", ": File"});
  CHECK(stacks.empty());
}
