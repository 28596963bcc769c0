#!/usr/bin/env bash
# Sharded checkpoints of GPT-2 124M on this machine (CPU), measured against the disk they land
# on: the save (parameters + AdamW moments, ~1.5 GB, hashed while written) and the resume (each
# file streamed from the disk, hashed while read, verified) at W=1 and W=2, the resumes across
# world sizes, and `hpctrain export`. In the same run, dd writes the same bytes with fsync and
# reads them back with the page cache dropped, so that each figure is also a ratio to the disk's
# own time for the same bytes, which is what to compare between runs on a shared machine.
# Before every resume the checkpoint's files are dropped from the page cache (dd iflag=nocache),
# so a resume reads from the disk as after a requeue on another node.
# hpctrain prints the save and resume seconds and (since SHA-256 comes from libcrypto) the
# seconds in SHA-256 and waiting for it; this script runs the cases and collects them.
# Usage: bench/checkpoint_bench.sh [PATH/TO/hpctrain]   (MODEL=mini for a 4x smaller run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HPCTRAIN=${1:-$here/../build/trainer/hpctrain}
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

now() { date +%s.%N; }
calc() { echo "scale=4; $*" | bc; }
uncache() { local f; for f in "$@"; do dd if="$f" iflag=nocache count=0 status=none; done; }
# The number after "WORDS " on rank 0's line in LOG, or "-" (hpctrain before libcrypto printed
# neither the seconds in SHA-256 nor the seconds reading the files).
after() { grep -o "$2 [0-9.]*" "$1" | head -n 1 | awk '{print $NF}' | grep . || echo -; }
ratio() { if [[ $1 == - ]]; then echo -; else printf '%.2fx' "$(calc "$1 / $2")"; fi; }
share() { if [[ $1 == - ]]; then echo -; else printf '%.0f%%' "$(calc "100 * $1 / $2")"; fi; }
# NAME LOG DISK_SECONDS: the whole save or resume and its ratio to the disk's time for the same
# bytes; for a resume also the part reading the files (the rest: the strategy's all-gather);
# SHA-256's seconds (beside the writes or reads) and the seconds waited for it, as a share; for
# a resume the process's CPU seconds reading the files (all threads), against dd's CPU seconds:
# a figure the machine's other load does not change.
row() {
  local total files sha wait cpu
  total=$(after "$2" 'files,')
  [[ $total != - ]] || total=$(after "$2" 'loaded in')
  files=$(after "$2" 'read in') sha=$(after "$2" 'SHA-256') wait=$(after "$2" 'waited for')
  cpu=$(after "$2" 'CPU')
  printf '%-26s %6.2f s %6s disk | files %5s s %6s disk | SHA-256 %5s s, waited %5s s (%s)' \
    "$1" "$total" "$(ratio "$total" "$3")" "$files" "$(ratio "$files" "$3")" "$sha" "$wait" \
    "$(share "$wait" "$total")"
  if [[ $cpu != - ]]; then printf ' | CPU %5s s, dd %.2f s' "$cpu" "$disk_read_cpu"; fi
  echo
}

echo "hpctrain $HPCTRAIN, model $MODEL, load average before: $(cut -d' ' -f1 /proc/loadavg) on $(getconf _NPROCESSORS_ONLN) cores"
run 1 none "$work/save1" --max-steps 1 --checkpoint-at-end --checkpoint-dir "$work/ck1"
run 2 zero2 "$work/save2" --max-steps 1 --checkpoint-at-end --checkpoint-dir "$work/ck2"
ck1=$(ls -d "$work"/ck1/step_*) ck2=$(ls -d "$work"/ck2/step_*)
bytes=$(du -cb "$ck1"/*.safetensors | tail -n 1 | cut -f1)

# The disk: the same bytes written with fsync, then read back from the disk.
t0=$(now); dd if="$ck1/rank00000.safetensors" of="$work/dd.bin" bs=8M conv=fsync status=none; t1=$(now)
disk_write=$(calc "$t1 - $t0")
uncache "$work/dd.bin"
TIMEFORMAT='%R %U %S'  # bash's time: wall, user and system seconds
{ time dd if="$work/dd.bin" of=/dev/null bs=8M status=none; } 2>"$work/dd.time"
disk_read=$(awk '{print $1}' "$work/dd.time")
disk_read_cpu=$(awk '{print $2 + $3}' "$work/dd.time")
rm -f "$work/dd.bin"
printf 'disk (dd, %d MB)            write+fsync %.2f s (%.0f MB/s), read %.2f s (%.0f MB/s, CPU %.2f s)\n' \
  "$((bytes / 1000000))" "$disk_write" "$(calc "$bytes / 1000000 / $disk_write")" "$disk_read" \
  "$(calc "$bytes / 1000000 / $disk_read")" "$disk_read_cpu"

row "save   W=1 none" "$work/save1" "$disk_write"
row "save   W=2 zero2" "$work/save2" "$disk_write"
resume() {  # NAME WORLD STRATEGY CHECKPOINT
  uncache "$4"/*.safetensors
  run "$2" "$3" "$work/load" --max-steps 1 --resume "$4"
  row "$1" "$work/load" "$disk_read"
}
resume "resume W=1 none  from W=1" 1 none "$ck1"
resume "resume W=2 zero2 from W=2" 2 zero2 "$ck2"
resume "resume W=1 none  from W=2" 1 none "$ck2"
resume "resume W=2 zero2 from W=1" 2 zero2 "$ck1"
uncache "$ck2"/*.safetensors
start=$(now)
"$HPCTRAIN" export --from "$ck2" --to "$work/hf" --threads 1 >/dev/null
printf 'export of the W=2 checkpoint: %.2f s (verify + load + write %d MB)\n' "$(calc "$(now) - $start")" \
  "$(du -m "$work/hf/model.safetensors" | cut -f1)"
