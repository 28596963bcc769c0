#!/usr/bin/env bash
# `hpclaunch sweep --dry-run` over 1,000 points (2 presets x 2 strategies x 5 micro-batches x
# 5 NCCL_ALGO values x 10 seeds, hpctrain): every point resolved, rendered and written as
# OUT/scripts/NAME.sbatch. Prints the wall and CPU time of the best of N runs; target < 1 s.
# Not a test (the machine is shared and noisy).
#
# Usage: bench/sweep_dry_run_bench.sh [HPCLAUNCH] [RUNS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hpclaunch=$(realpath "${1:-$here/../build/launcher/hpclaunch}")
runs=${2:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export XDG_CONFIG_HOME="$work/config" HPCLAUNCH_PATH=""
cat >sweep.json <<'JSON'
{
  "presets": ["1n1g", "1n2g"],
  "strategies": ["ddp", "fsdp"],
  "trainer_args": ["--model", "tiny", "--micro-batch", "4", "--seq-len", "64"],
  "axes": [
    {"key": "trainer.args.micro_batch", "values": [1, 2, 4, 8, 16]},
    {"key": "profile.nccl.NCCL_ALGO", "values": ["Ring", "Tree", "CollNet", "NVLS", "PAT"]},
    {"key": "seed", "values": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}
  ]
}
JSON
best=""
for ((i = 0; i < runs; i++)); do
  t=$( { /usr/bin/time -f "%e %U %S" "$hpclaunch" sweep -f sweep.json --local --no-project \
          --dry-run --out sw >/dev/null; } 2>&1 | tail -1)
  [[ $(find sw/scripts -name '*.sbatch' | wc -l) -eq 1000 ]] || { echo "not 1000 scripts" >&2; exit 1; }
  wall=${t%% *}
  if [[ -z $best ]] || awk -v a="$wall" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then best=$t; fi
done
read -r wall user sys <<<"$best"
echo "sweep --dry-run, 1000 points: best of $runs: ${wall} s wall, ${user} s user, ${sys} s system"
