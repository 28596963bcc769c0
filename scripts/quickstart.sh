#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install, build, check a batch script for every
# shape preset, then `hpclaunch run` a small GPT-2 training (2 ranks, DDP over Gloo) on the
# local backend — the same rendered script a cluster would get, run here without Slurm.
# On a fresh 2-core machine it takes about 12 minutes, nearly all of it installing packages and
# compiling hpctrain (LibTorch headers); each phase prints its number and the time so far.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=${SECONDS}
phase() { # N WHAT
  local t=$((SECONDS - started))
  printf '\n== quickstart %s/5: %s (%d min %02d s so far)\n' "$1" "$2" $((t / 60)) $((t % 60))
}

phase 1 "install the Debian packages (the tests' Python environment is not needed here)"
scripts/install-deps.sh --system
phase 2 "configure"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
phase 3 "build hpclaunch and hpctrain (the [NN%] lines count the files; hpctrain's take ~30 s each)"
cmake --build build -j"$(nproc)" --target hpclaunch hpctrain
export PATH="${PWD}/build/launcher:${PWD}/build/trainer:${PATH}"

phase 4 "validate a batch script for every shape preset (bash -n, shellcheck)"
hpclaunch presets list
for preset in 1n1g 1n2g 1n4g 2n2g 2n4g 4n4g 2n8g; do
  hpclaunch validate --no-project --preset "${preset}" --strategy ddp --cluster generic
done

phase 5 "hpclaunch run: a tiny GPT-2, 2 ranks, DDP, on this machine (--local)"
# Training text: the GPL, which every Debian system has; byte-level tokens (vocab 256). --model
# tiny brings its own batch (8192 tokens a step, micro-batch 8, 5 warm-up steps).
hpclaunch run --no-project --preset 1n2g --strategy ddp --local -- \
  --model tiny --data /usr/share/common-licenses/GPL-3 --data-format text \
  --max-steps 50 --eval-every 25 --log-every 5
hpclaunch list
t=$((SECONDS - started))
printf '\n== quickstart done in %d min %02d s\n' $((t / 60)) $((t % 60))
