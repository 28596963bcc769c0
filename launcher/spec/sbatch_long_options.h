// sbatch's long options, read the way sbatch reads them. sbatch parses its command line and a
// script's #SBATCH lines with getopt_long, which takes any unambiguous prefix of a long option
// ("--partitio=x" is --partition) and refuses an ambiguous one ("--par": --parsable or
// --partition?); a few options also have a second name (--tasks-per-node is --ntasks-per-node).
// An exact-name check alone lets a profile set a managed option through a prefix or an alias;
// resolving names here first does not.
//
// The table is Slurm 22.05.8's (Debian 12's slurm-client), taken from the real sbatch: every
// prefix sbatch accepts, refuses as ambiguous or does not know was asked of it, and the
// resolution below gives the same answer for each of them (tests/cli/hostile_inputs_sbatch_test.cc
// asks the test cluster's sbatch again).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hpc {

enum class SbatchOptionValue { Required, Optional, None };

struct SbatchLongOption {
  std::string name;       // as written in Slurm's table: "tasks-per-node"
  std::string canonical;  // the option it sets: "ntasks-per-node" (== name for most)
  SbatchOptionValue argument = SbatchOptionValue::Required;
};

// Every long option sbatch 22.05 knows, sorted by name.
const std::vector<SbatchLongOption>& sbatch_long_options();

struct SbatchOptionMatch {
  enum Kind { Exact, Prefix, Ambiguous, Unknown } kind = Unknown;
  const SbatchLongOption* option = nullptr;  // Exact and Prefix
  std::vector<std::string> candidates;       // Ambiguous: the names the prefix could mean
};

// `written` without the leading "--" and without "=value": what getopt_long makes of it. An
// exact name wins over longer names it is a prefix of ("mem" is --mem, not --mem-per-gpu).
SbatchOptionMatch resolve_sbatch_long_option(std::string_view written);

}  // namespace hpc
