// Catch2's main for the SshHost tests (the other files hold only tests).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
