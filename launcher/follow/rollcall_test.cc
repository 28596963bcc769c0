// The roll-call of a hung Python program: faulthandler's dumps as srun labels them in the log
// (the format as Python 3.11 prints it), the place of each stack, the one-line summary.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
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

namespace {

// Rank R's dump as torchrun's agent on node N tees it: srun's label, then the rank (the batch
// script's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE) or an older torchrun's "[default1]:".
std::vector<std::string> teed(int node, const std::string& prefix, std::vector<std::string> dump) {
  const std::string label = std::to_string(dump.front()[0] - '0') + ": ";
  for (auto& l : dump) l = std::to_string(node) + ": " + prefix + l.substr(label.size());
  return dump;
}

}  // namespace

TEST_CASE("rollcall: torchrun's rank prefix makes the roll-call exact", "[rollcall]") {
  // Node 0 runs ranks 2 and 3, node 1 ranks 0 and 1 (the rendezvous numbers the nodes); the two
  // workers' lines of node 0 interleave line by line, as the agent's two tail threads write them.
  auto r2 = teed(0, "[rank2]:", {"2: Current thread 0x00007f00 (most recent call first):",
                                 "2:   File \"/home/me/proj/data.py\", line 41 in __next__",
                                 "2:   File \"/home/me/proj/train.py\", line 80 in main"});
  auto r3 = teed(0, "[rank3]:", waiting(3));
  std::vector<std::string> log;
  for (size_t i = 0; i < std::max(r2.size(), r3.size()); ++i) {
    if (i < r3.size()) log.push_back(r3[i]);
    if (i < r2.size()) log.push_back(r2[i]);
  }
  for (int r : {0, 1})
    for (const auto& l : teed(1, "[rank" + std::to_string(r) + "]:", waiting(r)))
      log.push_back(l);
  // torchrun's own lines, unprefixed, under the same labels.
  log.push_back("0: W1127 20:48:45.296000 24360 torch/distributed/elastic/agent/api.py:752]");
  std::map<int, int> node_of;
  auto stacks = parse_python_stacks(log, &node_of);
  REQUIRE(stacks.size() == 4);
  for (int r = 0; r < 4; ++r) REQUIRE(stacks[r].size() == 1);
  CHECK(stack_place(stacks[2][0]) == "data.py:41 in __next__");
  CHECK(stack_place(stacks[3][0]) == "train.py:88 in main, inside all_reduce");
  CHECK(node_of == std::map<int, int>{{0, 1}, {1, 1}, {2, 0}, {3, 0}});
  auto host_of = [&](int r) { return node_of[r] == 0 ? std::string("node01") : "node02"; };
  CHECK(rollcall_summary(stacks, 4, host_of, false) ==
        "roll-call: 3 of 4 ranks at train.py:88 in main, inside all_reduce; rank 2 on node01 at "
        "data.py:41 in __next__");

  // An older torchrun: "[default1]:" is the local rank; the node's workers stay apart under its
  // label even when their lines interleave, and the roll-call counts them per node.
  std::vector<std::string> old;
  auto l0 = teed(0, "[default0]:", waiting(0));
  auto l1 = teed(0, "[default1]:", {"1: Current thread 0x00007f00 (most recent call first):",
                                    "1:   File \"/home/me/proj/data.py\", line 41 in __next__"});
  for (size_t i = 0; i < l0.size(); ++i) {
    old.push_back(l0[i]);
    if (i < l1.size()) old.push_back(l1[i]);
  }
  node_of.clear();
  auto by_node = parse_python_stacks(old, &node_of);
  CHECK(node_of.empty());
  REQUIRE(by_node.size() == 1);
  REQUIRE(by_node[0].size() == 2);
  auto node_host = [](int l) { return l == 0 ? std::string("node01") : std::string("node02"); };
  CHECK(rollcall_summary(by_node, 4, node_host, true) ==
        "roll-call: 1 rank on node01 at data.py:41 in __next__; 1 rank on node01 at train.py:88 "
        "in main, inside all_reduce; 2 ranks: no stack");
  // Brackets that are not torchrun's prefix stay part of the line.
  CHECK(parse_python_stacks({"0: [x y1]:Current thread 0x1 (most recent call first):",
                             "0: [rank]:  File \"x.py\", line 3 in f"})
            .empty());
}

TEST_CASE("rollcall: lines that only look like a dump are skipped", "[rollcall]") {
  auto stacks = parse_python_stacks({"0:   File \"x.py\", line 12 in f",  // no thread header
                                     "1: Current thread 0x1 (most recent call first):",
                                     "1:   File \"x.py\", line notanumber in f", "padded",
                                     "12345678: Thread 0x2:", ": File"});
  CHECK(stacks.empty());
}
