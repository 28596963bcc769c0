#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine (as root, or with sudo): installs the
# dependencies, builds both trees and runs their tests:
#   build/         the default build (Debian's LibTorch 1.13, CPU): the launcher, hpctrain and
#                  every test; brings up the test Slurm cluster through CTest fixtures
#   build-torch2/  the main hpctrain build (LibTorch 2.x with CUDA and NCCL from the torch wheel,
#                  cmake --preset torch2-cuda; docs/libtorch2.md): hpctrain and its tests
#                  (unit:trainer2:*, integration:trainer2:*) on the CPU
#   Slurm 24.11    the cluster-backed test groups again on Debian 13's Slurm 24.11.5, in a
#                  Debian 13 root of their own (scripts/slurm-matrix.sh --suites trixie;
#                  docs/slurm-versions.md); build/ runs them on this machine's Slurm 22.05.8
# Arguments go to both ctest runs (and then skip the 24.11 run: a chosen subset). All runs go
# on when one fails; the exit status is non-zero when any failed. Under CI=true a missing
# LibTorch 2.x fails the run (configure).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh
scripts/install-deps.sh --torch2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
cmake --preset torch2-cuda
cmake --build build-torch2 -j"$(nproc)"
status=0
(cd build && ctest --output-on-failure -j"$(nproc)" "$@") || status=1
echo "test.sh: now the LibTorch 2.x build (build-torch2)"
(cd build-torch2 && ctest --output-on-failure -j"$(nproc)" "$@") || status=1
if (($# == 0)); then
  echo "test.sh: now the cluster tests on Slurm 24.11 (scripts/slurm-matrix.sh --suites trixie)"
  sudo_=()
  [[ $(id -u) -eq 0 ]] || sudo_=(sudo -n)
  scripts/install-deps.sh --fresh-root # debootstrap
  "${sudo_[@]}" scripts/slurm-matrix.sh --suites trixie || status=1
fi
exit "${status}"
