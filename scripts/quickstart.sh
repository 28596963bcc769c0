#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install, build, check a batch script for every
# shape preset, then `hpclaunch run` a small GPT-2 training (2 ranks, DDP over Gloo) on the
# local backend — the same rendered script a cluster would get, run here without Slurm.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh --system # the tests' Python environment (torch, ~3 GB) is not needed here
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)" --target hpclaunch hpctrain
export PATH="${PWD}/build/launcher:${PWD}/build/trainer:${PATH}"

hpclaunch presets list
for preset in 1n1g 1n2g 1n4g 2n2g 2n4g 4n4g 2n8g; do
  hpclaunch validate --no-project --preset "${preset}" --strategy ddp --cluster generic
done

# Training text: the GPL, which every Debian system has; byte-level tokens (vocab 256).
hpclaunch run --no-project --preset 1n2g --strategy ddp --local -- \
  --model tiny --data /usr/share/common-licenses/GPL-3 --data-format text \
  --max-steps 50 --total-batch-tokens 8192 --micro-batch 8 --seq-len 64 --warmup-steps 5 \
  --eval-every 25 --log-every 5
hpclaunch list
