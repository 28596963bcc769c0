#include <string>
#include <vector>

#include "cli/cli.h"
#include "backends/local_backend.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  // The local backend's srun/scontrol (argv[0]) and its job supervisor (__local-job).
  if (auto status = hpc::run_local_entry_point(args)) return *status;
  return hpc::run_cli(args);
}
