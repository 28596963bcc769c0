#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine (as root, or with sudo): installs the
# dependencies, builds everything, brings up the test Slurm cluster through CTest fixtures, runs
# the unit and integration tests, and tears the cluster down again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
