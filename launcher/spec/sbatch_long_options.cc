#include "spec/sbatch_long_options.h"

#include <algorithm>

namespace hpc {
namespace {

// Asked of sbatch 22.05.8: `sbatch --NAME` (no value) answers "requires an argument" for these.
const char* const kRequired[] = {"account",
                                 "acctg-freq",
                                 "array",
                                 "batch",
                                 "bb",
                                 "bbf",
                                 "begin",
                                 "chdir",
                                 "cluster",
                                 "cluster-constraint",
                                 "clusters",
                                 "comment",
                                 "constraint",
                                 "container",
                                 "context",
                                 "core-spec",
                                 "cores-per-socket",
                                 "cpu-freq",
                                 "cpus-per-gpu",
                                 "cpus-per-task",
                                 "deadline",
                                 "delay-boot",
                                 "dependency",
                                 "distribution",
                                 "error",
                                 "exclude",
                                 "export",
                                 "export-file",
                                 "extra-node-info",
                                 "gid",
                                 "gpu-bind",
                                 "gpu-freq",
                                 "gpus",
                                 "gpus-per-node",
                                 "gpus-per-socket",
                                 "gpus-per-task",
                                 "gres",
                                 "gres-flags",
                                 "hint",
                                 "input",
                                 "job-name",
                                 "kill-on-invalid-dep",
                                 "licenses",
                                 "mail-type",
                                 "mail-user",
                                 "mcs-label",
                                 "mem",
                                 "mem-bind",
                                 "mem-per-cpu",
                                 "mem-per-gpu",
                                 "mincpus",
                                 "network",
                                 "nodefile",
                                 "nodelist",
                                 "nodes",
                                 "ntasks",
                                 "ntasks-per-core",
                                 "ntasks-per-gpu",
                                 "ntasks-per-node",
                                 "ntasks-per-socket",
                                 "ntasks-per-tres",
                                 "open-mode",
                                 "output",
                                 "partition",
                                 "power",
                                 "prefer",
                                 "priority",
                                 "profile",
                                 "qos",
                                 "reservation",
                                 "signal",
                                 "sockets-per-node",
                                 "switches",
                                 "tasks-per-node",
                                 "thread-spec",
                                 "threads-per-core",
                                 "time",
                                 "time-min",
                                 "tmp",
                                 "uid",
                                 "wait-all-nodes",
                                 "wckey",
                                 "wrap"};
// A value only after '=' ("--exclusive", "--exclusive=user").
const char* const kOptional[] = {"exclusive", "get-user-env", "nice", "no-kill", "propagate"};
// `sbatch --NAME=x` answers "doesn't allow an argument".
const char* const kNone[] = {
    "contiguous",    "help",     "hold",          "ignore-pbs", "no-requeue", "overcommit",
    "oversubscribe", "parsable", "quiet",         "reboot",     "requeue",    "spread-job",
    "test-only",     "usage",    "use-min-nodes", "verbose",    "version",    "wait"};

// Second names: sbatch reports an error in --tasks-per-node=x as one in --ntasks-per-node.
std::string canonical_of(const std::string& name) {
  if (name == "tasks-per-node") return "ntasks-per-node";
  return name;
}

}  // namespace

const std::vector<SbatchLongOption>& sbatch_long_options() {
  static const std::vector<SbatchLongOption> all = [] {
    std::vector<SbatchLongOption> v;
    for (const char* n : kRequired) v.push_back({n, canonical_of(n), SbatchOptionValue::Required});
    for (const char* n : kOptional) v.push_back({n, canonical_of(n), SbatchOptionValue::Optional});
    for (const char* n : kNone) v.push_back({n, canonical_of(n), SbatchOptionValue::None});
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return v;
  }();
  return all;
}

SbatchOptionMatch resolve_sbatch_long_option(std::string_view written) {
  SbatchOptionMatch m;
  if (written.empty()) return m;
  std::vector<const SbatchLongOption*> matches;
  for (const auto& o : sbatch_long_options()) {
    if (o.name == written) {
      m.kind = SbatchOptionMatch::Exact;
      m.option = &o;
      return m;
    }
    if (o.name.compare(0, written.size(), written) == 0) matches.push_back(&o);
  }
  if (matches.size() == 1) {
    m.kind = SbatchOptionMatch::Prefix;
    m.option = matches.front();
  } else if (matches.size() > 1) {
    // getopt_long lets a prefix through when all it matches are one option under several
    // names; no prefix of sbatch 22.05's table is such a case, so more than one is ambiguous.
    m.kind = SbatchOptionMatch::Ambiguous;
    for (const auto* o : matches) m.candidates.push_back(o->name);
  }
  return m;
}

}  // namespace hpc
