// Catch2's main for the slurm backend's integration tests (the other files hold only tests).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
