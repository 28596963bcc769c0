// The roll-call of a hung Python program (job.hang_seconds, launch srun or torchrun): the
// Python stacks its ranks printed when hang detection asked them where they are (SIGURG, to
// which a program answers through faulthandler.register(signal.SIGURG, all_threads=True);
// docs/troubleshooting.md#a-job-that-hangs), read from the log's lines that srun labelled with
// the rank (under torchrun: the node, and torchrun's rank prefix), summed up in one line:
//   roll-call: 3 of 4 ranks at train.py:88 in main, inside all_reduce;
//              rank 2 on node02 at data.py:41 in __next__
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hpc {

// One frame of faulthandler's dump: `File "PATH", line N in FUNCTION`.
struct PyFrame {
  std::string file;  // as printed (a path)
  int line = 0;
  std::string function;
};
using PyStack = std::vector<PyFrame>;  // innermost frame first

// The stacks in log lines ("2:   File ..."), per srun label: of each process's dump, the thread
// that answered ("Current thread"), else the last listed (the main thread, which faulthandler
// lists last). Under launch srun a label is a rank and holds one process (a rank asked twice:
// both dumps). Under torchrun a label is a node, and the batch script has torchrun pass each
// worker's stderr on a line at a time with its rank ("0: [rank2]:  File ..."): then the stacks
// are per rank, and `node_of` (if given) gets each rank's label. An older torchrun's
// "[default1]:" (the local rank) keeps a node's workers apart under its label; lines without
// such a prefix are each node's workers' dumps, one after another (a second "Current thread"
// begins the next; lines the workers wrote at the same moment may mix). Other lines are skipped.
std::map<int, std::vector<PyStack>> parse_python_stacks(const std::vector<std::string>& lines,
                                                        std::map<int, int>* node_of = nullptr);

// Where a stack stands, in words: its innermost frame in the program's own code (not in
// site-packages, dist-packages or Python's library), and the innermost library function below
// it: "train.py:88 in main, inside all_reduce"; "" for an empty stack.
std::string stack_place(const PyStack& stack);

// The summary: the most common place first ("3 of 4 ranks at ..."), then each other group with
// its ranks and their hosts (under torchrun: how many ranks, on which nodes), then the ranks
// without a stack ("rank 3 on node02: no stack": not registered, or not a Python process).
// `ranks`: the world size; `host_of` names a label's node (may return ""). "" when no rank
// printed a stack.
std::string rollcall_summary(const std::map<int, std::vector<PyStack>>& stacks, int ranks,
                             const std::function<std::string(int)>& host_of, bool labels_are_nodes);

}  // namespace hpc
