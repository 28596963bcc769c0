#include <string>
#include <vector>

#include "backends/local_backend.h"
#include "cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  // The local backend's srun/scontrol (argv[0]) and its job supervisor (__local-job).
  if (auto status = hpc::run_local_entry_point(args)) return *status;
  return hpc::run_cli(args);
}
