#include <signal.h>

#include <string>
#include <vector>

#include "backends/local_backend.h"
#include "cli/cli.h"
#include "subprocess.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  // The local backend's srun/scontrol (argv[0]) and its job supervisor (__local-job) run jobs:
  // they and their programs get the default SIGPIPE, even if the CLI that started them (below)
  // ignored it (an ignored signal stays ignored across exec).
  signal(SIGPIPE, SIG_DFL);
  if (auto status = hpc::run_local_entry_point(args)) return *status;
  // The CLI: a reader that went away is a write error (EPIPE) it reports in one line and an
  // exit status (run_cli), not a silent death by SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  // No command it starts (gnuplot, git, scontrol, shellcheck) outlives a Ctrl-C or a kill.
  hpc::end_commands_with_this_process();
  return hpc::run_cli(args);
}
