#include <string>
#include <vector>

#include "cli.h"

int main(int argc, char** argv) {
  return hpc::run_cli(std::vector<std::string>(argv, argv + argc));
}
