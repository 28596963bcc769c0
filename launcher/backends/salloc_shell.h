// `hpclaunch shell`: an allocation from salloc with an interactive shell on its first node, set
// up by the batch script itself (rendered with RenderContext::interactive): salloc gets the
// script's #SBATCH options, and the script runs in a one-task step with a terminal where a batch
// job's script would run, ending in the user's shell instead of the program.
//
//   salloc OPTIONS srun --nodes=1 --ntasks=1 [--overlap] --preserve-env --pty
//     bash -c SCRIPT hpclaunch-shell
//
// The script travels as an argument, so nothing is written anywhere and nothing is left behind.
// salloc runs its command on the submitting host (also under LaunchParameters=use_interactive_step,
// which only changes salloc without a command) and exits with the command's status: the shell's.
#pragma once

#include <string>
#include <vector>

#include "backends/host.h"

namespace hpc {

struct SallocCommand {
  std::vector<std::string> options;   // the salloc options alone (sbatch --test-only takes them)
  std::vector<std::string> argv;      // salloc OPTIONS srun ... bash -c SCRIPT hpclaunch-shell
  std::vector<std::string> left_out;  // batch-only options a user asked for: "--array=0-3 (line 9)"
};

// The salloc command for an interactive script: its #SBATCH options as sbatch reads them, less
// those salloc 22.05 does not take (--output, --requeue, --array, ...; hpclaunch's own ones are
// left out silently, others are listed in left_out). `srun_has_overlap`: Slurm 20.11 and later.
// Throws UserError "ORIGIN:LINE: ..." for an option sbatch would not know either.
SallocCommand salloc_command(const std::string& script, bool srun_has_overlap,
                             const std::string& origin = "script");

// Whether `srun --help` on the host lists --overlap (Slurm 20.11 and later).
bool srun_has_overlap(Host& host);

// Asks the controller, through `sbatch --test-only`, whether the allocation could ever be
// granted; nothing is submitted. Throws BackendError (one line: sbatch's reason and the fix)
// when it cannot, BackendUnreachable when the controller does not answer.
void check_allocation_fits(Host& host, const SallocCommand& command);

// The one line of the remote command for `ssh -t HOST -- LINE`: each argument shell-quoted for
// the login node's shell (sh, bash, zsh or ksh, as for every command hpclaunch runs there).
std::string remote_command_line(const std::vector<std::string>& argv);

// Replaces this process with argv[0] (found in PATH), standard streams and terminal inherited, so
// that its exit status is hpclaunch's. Returns only on failure: throws BackendError.
[[noreturn]] void exec_in_terminal(const std::vector<std::string>& argv);

}  // namespace hpc
