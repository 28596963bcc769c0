#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install, build, then render and validate a batch
# script for every shape preset (bash -n + shellcheck), and show one of them.
# Once the local backend lands (issue 3), this ends in `hpclaunch run --local` training a tiny
# GPT-2 on this machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)" --target hpclaunch
hpclaunch=build/launcher/hpclaunch

"${hpclaunch}" presets list
for preset in 1n1g 1n2g 1n4g 2n2g 2n4g 4n4g 2n8g; do
  "${hpclaunch}" validate --preset "${preset}" --strategy fsdp --cluster generic
done
mkdir -p runs
"${hpclaunch}" render --preset 2n4g --strategy fsdp --cluster jsc --set profile.account=myproject \
  -o runs/2n4g-fsdp-jsc.sbatch -- --model gpt2 --data /path/to/edu_fineweb10B
echo "Review it: less runs/2n4g-fsdp-jsc.sbatch; submit it on the cluster: sbatch runs/2n4g-fsdp-jsc.sbatch"
