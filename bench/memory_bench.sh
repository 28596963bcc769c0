#!/usr/bin/env bash
# Peak memory per rank of hpctrain's strategies on one model (default GPT-2 124M), the process's
# real figure, not the trainer's own tally:
#   - peak resident set of every rank (VmHWM, from `/usr/bin/time -f %M`), for ddp, zero1, zero2
#     and fsdp at W = 1, 2 and 4 (local processes, Gloo over loopback, one thread per rank);
#   - with DEVICE=cuda, the CUDA caching allocator's peak of rank 0 too (the metrics' `memory`,
#     which on CUDA is the allocator's peak allocated bytes);
#   - beside them, each strategy's peak as a fraction of ddp's at the same W, what rank 0's
#     trainer says it holds between steps (param_bytes + grad_bytes + optimizer_bytes) and the
#     formula for it (docs/strategies.md#memory-per-rank).
# The runs go one at a time, so several ranks of one run share the cores but no two runs do.
#
# Usage: bench/memory_bench.sh [PATH/TO/hpctrain]
#   MODEL=gpt2 B=1 T=64 STEPS=2 WORLDS="1 2 4" STRATEGIES="ddp zero1 zero2 fsdp" DEVICE=cpu
#   DATA=/usr/share/common-licenses/GPL-3 (byte-level text)
# GPT-2 124M at W=4 needs about 4 x 2.8 GB for ddp: check `free -g` first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HPCTRAIN=${1:-$here/../build/trainer/hpctrain}
MODEL=${MODEL:-gpt2}
B=${B:-1} T=${T:-64} STEPS=${STEPS:-2}
WORLDS=${WORLDS:-1 2 4}
STRATEGIES=${STRATEGIES:-ddp zero1 zero2 fsdp}
DEVICE=${DEVICE:-cpu}
DATA=${DATA:-/usr/share/common-licenses/GPL-3}
[[ -x $HPCTRAIN ]] || { echo "memory_bench: no hpctrain at '$HPCTRAIN'; pass its path" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "memory_bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
command -v jq >/dev/null || { echo "memory_bench: jq is missing (apt-get install jq)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/memory-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cores=$(env -u OMP_NUM_THREADS nproc)
export OMP_NUM_THREADS=1
port=$((20000 + RANDOM % 10000))

# run STRATEGY W: W local ranks; rank r's peak RSS (KiB) in S-W.rss.r, rank 0's metrics in S-W.jsonl.
run() {
  local s=$1 w=$2 tag=$1-$2 r pids=() status=0
  port=$((port + 1))
  for ((r = 0; r < w; r++)); do
    RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      /usr/bin/time -f '%M' -o "$work/$tag.rss.$r" \
      "$HPCTRAIN" train --strategy "$s" --data "$DATA" --data-format text --model "$MODEL" \
      --micro-batch "$B" --seq-len "$T" --total-batch-tokens $((B * T * w)) --max-steps "$STEPS" \
      --eval-every 0 --sample-every 0 --threads 1 --device "$DEVICE" --dist-timeout 600 \
      --metrics "$work/$tag.jsonl" >"$work/$tag.out.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || status=$?; done
  if ((status != 0)); then
    echo "memory_bench: $s at W=$w failed (exit $status):" >&2
    tail -n 3 "$work/$tag.out.0" >&2
    return 1
  fi
}

mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }

load_before=$(cut -d' ' -f1 /proc/loadavg)
for w in $WORLDS; do
  for s in $STRATEGIES; do run "$s" "$w" || true; done
done
load_after=$(cut -d' ' -f1 /proc/loadavg)

echo "# hpctrain memory per rank: model $MODEL, micro-batch $B x seq-len $T, $STEPS steps, device $DEVICE,"
echo "# 1 thread per rank, Gloo on loopback; $cores cores; load average $load_before -> $load_after"
echo "# peak RSS: /usr/bin/time %M of each rank (MiB); vs ddp: the max over ranks / ddp's at that W;"
echo "# held: what rank 0's trainer counts between steps (params + grads + AdamW, MiB); formula: the"
echo "# same from docs/strategies.md (P parameters, fp32: ddp 16P, zero1 8P+8P/W, zero2 4P+12P/W, fsdp 16P/W)"
header='%-8s %2s  %-22s %7s %7s %9s %7s %8s\n'
# shellcheck disable=SC2059
printf "$header" strategy W "peak RSS rank 0..W-1" max "vs ddp" "cuda peak" held formula
for w in $WORLDS; do
  ddp_max=""
  for s in $STRATEGIES; do
    tag=$s-$w
    if [[ ! -s $work/$tag.jsonl ]]; then printf '%-8s %2s  (failed)\n' "$s" "$w"; continue; fi
    rss="" max=0
    for ((r = 0; r < w; r++)); do
      k=$(tail -n 1 "$work/$tag.rss.$r")
      rss+="$((k / 1024)) "
      ((k > max)) && max=$k
    done
    [[ $s == ddp ]] && ddp_max=$max
    ratio=$([[ -n $ddp_max ]] && awk -v a="$max" -v b="$ddp_max" 'BEGIN { printf "%.2f", a / b }' || echo -)
    read -r pb gb ob mem < <(jq -rs 'map(select(.param_bytes != null)) | last |
      "\(.param_bytes) \(.grad_bytes) \(.optimizer_bytes) \(.memory)"' "$work/$tag.jsonl")
    cuda=-
    [[ $DEVICE == cuda* ]] && cuda=$(mib "$mem")
    P=$(jq -rs 'map(select(.param_bytes != null)) | .[0].param_bytes' "$work/ddp-$w.jsonl" 2>/dev/null || echo 0)
    P=$((P / 4))
    case $s in
      ddp) formula=$((16 * P)) ;;
      zero1) formula=$((8 * P + 8 * P / w)) ;;
      zero2) formula=$((4 * P + 12 * P / w)) ;;
      fsdp) formula=$((16 * P / w)) ;;
    esac
    # shellcheck disable=SC2059
    printf "$header" "$s" "$w" "$rss" "$((max / 1024))" "$ratio" "$cuda" "$(mib $((pb + gb + ob)))" \
      "$(mib "$formula")"
  done
done
