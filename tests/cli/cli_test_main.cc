// Catch2's main() for the command-line integration tests (tests/cli/*_test.cc).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
