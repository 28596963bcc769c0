#!/usr/bin/env bash
# Installs everything hpclaunch needs to build, run and test on Debian 12.
# Idempotent: packages already present are skipped by apt.
#   scripts/install-deps.sh            launcher + tests + trainer + packaging tools (default)
#   scripts/install-deps.sh --launcher only the launcher's build dependencies
#   scripts/install-deps.sh --system   launcher + Slurm + trainer, without the tests' Python
#                                      environment (what scripts/quickstart.sh needs)
#   scripts/install-deps.sh --fresh-root what scripts/fresh-root-test.sh needs on the host
#   scripts/install-deps.sh --python   only the tests' Python environment (python3-venv from apt, then
#                                      the pinned torch/lightning/numpy of python-requirements.txt)
#   scripts/install-deps.sh --python-venv-path   print where that environment is (or would be)
#   scripts/install-deps.sh --torch2   the LibTorch 2.x (CUDA, NCCL) build's needs: that same
#                                      environment (its torch wheel is the LibTorch), the gloo
#                                      headers and the compilers; prints the CMake prefix path
#   scripts/install-deps.sh --torch2-prefix   print the CMake prefix path of that LibTorch
#                                      (exit 1 with a hint when the environment is missing)
#   scripts/install-deps.sh --list     print the packages named here, one per line
# Every program a test or script runs comes from a package named here, or from one that every
# Debian root has (Priority: required); tests/deps/commands_test.py checks that.
set -euo pipefail

launcher_pkgs=(
  build-essential cmake ccache pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev libkainjow-mustache-dev catch2 libssh-dev
  libssl-dev # libcrypto: SHA-256 of the spec and of checkpoint shards
  libre2-dev # RE2: linear-time regular expressions for logs and a sweep's metric regex
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
  # ssh:jump_kbdint: the jump sshd asks for a one-time code through PAM (pam_exec, pam_permit)
  libpam-modules
  # testcluster.sh --accounting (the preflight tests): slurmdbd with MariaDB, as sites run it
  slurmdbd mariadb-server)
# python3: the tests' reference implementation and helper scripts (the product needs no Python).
trainer_pkgs=(libtorch-dev libgloo-dev libopenblas0-openmp python3 python3-torch python3-numpy)
# The packaging tests (tests/packaging, docs/install.md): man pages rendered by man-db/groff, zsh and
# bash-completion for completion, Debian's Lmod for the modulefile, dpkg-dev (dpkg-shlibdeps),
# fakeroot and file for CPack's .deb, debootstrap for the clean Debian 12 root it installs into.
packaging_pkgs=(man-db groff-base zsh bash-completion lmod dpkg-dev fakeroot file debootstrap)
# python3-venv: the virtual environment with torch 2.x and Lightning from PyPI (python_venv below).
python_pkgs=(python3 python3-venv)
# The LibTorch 2.x build (CMakePresets.json, preset torch2-cuda; docs/libtorch2.md): the torch wheel
# of the Python environment is the LibTorch (CUDA 13, NCCL from the nvidia-nccl wheel); the wheel
# ships no gloo headers, so Debian's libgloo-dev gives them. The CUDA toolkit (nvcc, cudart
# headers) is not a Debian 12 package: it comes with the machine (/usr/local/cuda).
torch2_pkgs=(build-essential cmake ccache libgloo-dev python3 python3-venv)

# The tests' Python environment: Debian's python3 (never a pyenv or /usr/local one, which a fresh
# Debian 12 lacks) with exactly the pins of scripts/python-requirements.txt, in a virtual
# environment outside the checkout so that a reused machine keeps it. Its name carries a hash of
# the requirements and of the Python version: a change to either makes a new one. The tests' jobs
# run as the user who runs the tests, so that user's cache directory serves them.
requirements="$(dirname "${BASH_SOURCE[0]}")/python-requirements.txt"
venv_path() {
  local hash
  hash="$({ cat "${requirements}"; /usr/bin/python3 -c 'import sys; print(sys.version)'; } |
    sha256sum | cut -c1-12)"
  echo "${XDG_CACHE_HOME:-${HOME}/.cache}/hpclaunch/venv-${hash}"
}
# A venv is complete when its marker exists; it is written last. A failed install removes the
# directory again (EXIT trap), and a directory without the marker (a killed install) is rebuilt.
# pip reads PIP_INDEX_URL / PIP_FIND_LINKS from the environment (a local mirror or a wheel folder).
python_venv() {
  local venv marker started
  venv="$(venv_path)"
  marker="${venv}/.hpclaunch-complete"
  if [[ -e "${marker}" ]]; then
    echo "install-deps: Python environment present: ${venv}"
    return 0
  fi
  mkdir -p "$(dirname "${venv}")"
  exec {lock_fd}>"${venv}.lock"
  flock "${lock_fd}" # another install-deps.sh building the same venv: wait for it
  if [[ -e "${marker}" ]]; then
    echo "install-deps: Python environment present: ${venv}"
    return 0
  fi
  rm -rf "${venv}"
  started=${SECONDS}
  echo "install-deps: building the Python environment ${venv} (torch, lightning: ~3 GB from PyPI)"
  venv_in_progress="${venv}" # global: the EXIT trap runs after this function has returned
  trap 'rm -rf "${venv_in_progress}"' EXIT
  /usr/bin/python3 -m venv "${venv}"
  "${venv}/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
    --only-binary=:all: -r "${requirements}"
  "${venv}/bin/python" -c 'import torch, lightning, numpy'
  echo "$(sha256sum <"${requirements}" | cut -c1-64) ${requirements##*/}" >"${marker}"
  trap - EXIT
  echo "install-deps: Python environment ready in $((SECONDS - started)) s ($(du -sh "${venv}" | cut -f1)): ${venv}"
}

# TorchConfig.cmake's folder inside the environment's torch wheel (torch.utils.cmake_prefix_path).
torch2_prefix() {
  local venv
  venv="$(venv_path)"
  if [[ ! -e "${venv}/.hpclaunch-complete" ]]; then
    echo "install-deps: no Python environment at ${venv}: run scripts/install-deps.sh --torch2" >&2
    return 1
  fi
  "${venv}/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)'
}

pkgs=("${launcher_pkgs[@]}")
with_python=0
with_torch2=0
case "${1:-all}" in
  --launcher) ;;
  --system) pkgs+=("${cluster_pkgs[@]}" "${trainer_pkgs[@]}") ;; # all but the tests' Python
  all|--all)
    pkgs+=("${cluster_pkgs[@]}" "${trainer_pkgs[@]}" "${packaging_pkgs[@]}" "${python_pkgs[@]}")
    with_python=1
    ;;
  --python) pkgs=("${python_pkgs[@]}"); with_python=1 ;;
  --python-venv-path) venv_path; exit 0 ;;
  --torch2) pkgs=("${torch2_pkgs[@]}"); with_python=1; with_torch2=1 ;;
  --torch2-prefix) torch2_prefix; exit ;;
  --fresh-root) pkgs=(debootstrap iproute2 util-linux git) ;;
  --list)
    printf '%s\n' "${pkgs[@]}" "${cluster_pkgs[@]}" "${trainer_pkgs[@]}" "${packaging_pkgs[@]}" \
      "${python_pkgs[@]}" "${torch2_pkgs[@]}" debootstrap git
    exit 0
    ;;
  *) echo "usage: $0 [--launcher|--system|--all|--python|--python-venv-path|--torch2|--torch2-prefix|--fresh-root|--list]" >&2; exit 2 ;;
esac

# After the packages: the Python environment; for --torch2 also the CUDA toolkit and the prefix.
finish() {
  if ((with_python)); then python_venv; fi
  if ((with_torch2)); then
    if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
      echo "install-deps: no CUDA toolkit (nvcc); the torch2-cuda build needs one in /usr/local/cuda" >&2
      exit 1
    fi
    echo "install-deps: LibTorch 2.x for CMake (cmake --preset torch2-cuda finds it itself):"
    torch2_prefix
  fi
}

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  finish
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
finish
