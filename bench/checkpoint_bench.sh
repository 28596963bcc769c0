#!/usr/bin/env bash
# Sharded checkpoints of GPT-2 124M on this machine (CPU): how long a save takes (parameters +
# AdamW moments, ~1.5 GB, SHA-256 while writing), a resume (size + SHA-256 of every file, then
# the loads), a resume at another world size, and `hpctrain export`. hpctrain prints the save and
# resume figures itself; this script runs the cases and collects them.
# Usage: bench/checkpoint_bench.sh [PATH/TO/hpctrain]   (MODEL=mini for a 4x smaller run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HPCTRAIN=${1:-$here/../build-trainer/trainer/hpctrain}
MODEL=${MODEL:-gpt2}
work=$(mktemp -d "${TMPDIR:-/tmp}/checkpoint-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog."; done >"$work/corpus.txt"
common=(--data "$work/corpus.txt" --model "$MODEL" --micro-batch 1 --seq-len 64
        --total-batch-tokens 128 --eval-every 0 --threads 1 --warmup-steps 1)
port=$((20000 + RANDOM % 20000))

run() {  # WORLD STRATEGY LOG [args]: rank 0's output in LOG
  local world=$1 strategy=$2 log=$3 pids=() r
  shift 3
  port=$((port + 1))
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$HPCTRAIN" train "${common[@]}" --strategy "$strategy" "$@" >"$log.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r"; done
  cp "$log.0" "$log"
}

loaded() { grep -o 'verified and loaded in [0-9.]* s' "$1"; }

echo "model $MODEL, load average before: $(cut -d' ' -f1 /proc/loadavg) on $(getconf _NPROCESSORS_ONLN) cores"
run 1 none "$work/save1" --max-steps 1 --checkpoint-at-end --checkpoint-dir "$work/ck1"
echo "save   W=1 none : $(grep -o 'checkpoint .*' "$work/save1" | sed 's/^checkpoint [^ ]* //')"
run 2 zero2 "$work/save2" --max-steps 1 --checkpoint-at-end --checkpoint-dir "$work/ck2"
echo "save   W=2 zero2: $(grep -o 'checkpoint .*' "$work/save2" | sed 's/^checkpoint [^ ]* //')"
run 1 none "$work/load1" --max-steps 1 --resume "$work/ck1"
echo "resume W=1 none  from W=1: $(loaded "$work/load1")"
run 1 none "$work/load21" --max-steps 1 --resume "$work/ck2"
echo "resume W=1 none  from W=2: $(loaded "$work/load21")"
run 2 zero2 "$work/load12" --max-steps 1 --resume "$work/ck1"
echo "resume W=2 zero2 from W=1: $(loaded "$work/load12")"
start=$(date +%s.%N)
"$HPCTRAIN" export --from "$work/ck2" --to "$work/hf" --threads 1 >/dev/null
echo "export of the W=2 checkpoint: $(printf '%.2f' "$(echo "$(date +%s.%N) - $start" | bc)") s (verify + load + write $(du -m "$work/hf/model.safetensors" | cut -f1) MB)"
