// A batch script's #SBATCH lines, read the way sbatch reads them (for the local backend).
#pragma once

#include <string>
#include <vector>

namespace hpc {

// What a batch script's #SBATCH lines ask for, as far as the local backend needs to know.
struct SbatchOptions {
  std::string job_name;            // --job-name / -J; "" when not given
  int nodes = 1;                   // --nodes / -N (the minimum of a range)
  int ntasks = 0;                  // --ntasks / -n; 0 when not given
  int ntasks_per_node = 0;         // --ntasks-per-node; 0 when not given
  int cpus_per_task = 0;           // --cpus-per-task / -c; 0 when not given
  long time_limit_seconds = -1;    // --time / -t; -1: no limit
  std::string output, error;       // --output / -o, --error / -e (patterns, unexpanded)
  std::string chdir;               // --chdir / -D
  bool open_mode_append = false;   // --open-mode=append
  int signal_number = 0;           // --signal=[B:]SIG[@SECONDS]; 0: none
  int signal_seconds = 0;          //   seconds before the time limit (Slurm's default: 60)
  bool signal_batch_only = false;  //   B: only the batch shell gets it
  bool requeue = false;            // --requeue
  bool no_requeue = false;         // --no-requeue
  std::string array;               // --array / -a (the local backend refuses it)
  std::string dependency;          // --dependency / -d (the local backend refuses it)

  int tasks() const;  // ntasks, else ntasks_per_node x nodes, else 1
};

// The arguments of a script's #SBATCH lines, split the way sbatch splits them: a backslash
// escapes the next character, ' and " quote, unquoted whitespace separates arguments, an unquoted
// # starts a comment; parsing stops at the first line that is neither blank nor a comment.
// Each argument comes with its 1-based line number.
struct SbatchArgument {
  std::string text;
  int line = 0;
};
std::vector<SbatchArgument> sbatch_script_arguments(const std::string& script);

// Parses the options the local backend honours from a script's #SBATCH lines; others (GPUs,
// partition, account, ...) are skipped. Throws UserError "origin:LINE: ..." for a value it cannot
// read (--nodes=abc, --time=soon, --signal=FOO@5).
SbatchOptions parse_sbatch_options(const std::string& script, const std::string& origin = "script");

}  // namespace hpc
