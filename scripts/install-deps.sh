#!/usr/bin/env bash
# Installs everything hpclaunch needs to build, run and test on Debian 12.
# Idempotent: packages already present are skipped by apt.
#   scripts/install-deps.sh            launcher + tests + trainer (default)
#   scripts/install-deps.sh --launcher only the launcher's build dependencies
#   scripts/install-deps.sh --fresh-root what scripts/fresh-root-test.sh needs on the host
#   scripts/install-deps.sh --list     print the packages named here, one per line
# Every program a test or script runs comes from a package named here, or from one that every
# Debian root has (Priority: required); tests/deps/commands_test.py checks that.
set -euo pipefail

launcher_pkgs=(
  build-essential cmake ccache pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev libkainjow-mustache-dev catch2 libssh-dev
  libssl-dev # libcrypto: SHA-256 of the spec and of checkpoint shards
  shellcheck gnuplot-nox
  libxml2-utils # xmllint: the sweep tests check that the SVG plots parse
  # The fuzz targets (fuzz/, scripts/fuzz.sh): clang++, its libFuzzer and sanitizer runtimes
  # (only recommended by clang, hence named), and llvm-symbolizer for readable sanitizer reports.
  clang libclang-rt-dev llvm
)
cluster_pkgs=(slurmctld slurmd slurm-client munge openssh-server openssh-client iproute2 util-linux procps
  # slurm:container: ch-run (Charliecloud, a real HPC container runtime) runs the tasks in an
  # image the test builds from the static busybox (tests/slurm/container_test.cc).
  charliecloud-runtime busybox-static
  # testcluster.sh --accounting (the preflight tests): slurmdbd with MariaDB, as sites run it
  slurmdbd mariadb-server)
# python3: the tests' reference implementation and helper scripts (the product needs no Python).
trainer_pkgs=(libtorch-dev libgloo-dev libopenblas0-openmp python3 python3-torch python3-numpy)

pkgs=("${launcher_pkgs[@]}")
case "${1:-all}" in
  --launcher) ;;
  all|--all) pkgs+=("${cluster_pkgs[@]}" "${trainer_pkgs[@]}") ;;
  --fresh-root) pkgs=(debootstrap iproute2 util-linux git) ;;
  --list)
    printf '%s\n' "${pkgs[@]}" "${cluster_pkgs[@]}" "${trainer_pkgs[@]}" debootstrap git
    exit 0
    ;;
  *) echo "usage: $0 [--launcher|--all|--fresh-root|--list]" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
# Package scripts must not start services (no systemd in containers; tests start their own daemons).
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
  "${SUDO[@]}" chmod +x /usr/sbin/policy-rc.d
fi
echo "install-deps: installing ${missing[*]}"
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
