// Catch2's main for the local backend's tests (the other files hold only tests).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
