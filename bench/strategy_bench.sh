#!/usr/bin/env bash
# Memory and step time of hpctrain's distribution strategies, measured on this machine with
# local processes (Gloo over loopback, 1 thread per rank):
#   1. peak resident set (VmHWM, from /usr/bin/time) of every rank, for ddp, zero1, zero2 and
#      fsdp at W=2 and W=4, beside rank 0's resident set at the end of a step (the metrics'
#      `memory`), the bytes rank 0 holds between steps in parameters, gradients and AdamW state
#      (the metrics' param_bytes, grad_bytes, optimizer_bytes) and the formula for their sum
#      (docs/strategies.md);
#   2. the median step time (step_ms, rank 0) at W=2 of each strategy against ddp, and the CPU
#      time all ranks used per step (user + system, /usr/bin/time; the whole run over its steps,
#      start-up included): on a shared machine the step time moves with the load, the CPU time
#      much less.
# Strategies the hpctrain given does not have (fsdp before it lands) are skipped with a note.
#
# Usage: bench/strategy_bench.sh [PATH/TO/hpctrain]
#   MODEL_ARGS  the model (default: 8 layers of width 512 over the byte vocabulary, 25.4M
#               parameters: the training state, not the activations, dominates the memory)
#   MODEL=mini  a named model instead (tiny, mini, gpt2, ...)
#   STEPS=10 ROUNDS=2 (W=2 runs, strategies interleaved; their steps are pooled for the median)
#   STRATEGIES="ddp zero1 zero2 fsdp"  WORLDS="2 4"  B=2 T=64 (micro-batch, seq-len per rank)
#   DATA=/usr/share/common-licenses/GPL-3 (byte-level text)
# Each step is one micro-batch per rank (no gradient accumulation), so zero2's full gradients
# are freed within the step and the between-steps figures are what the formulas describe.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HPCTRAIN=${1:-$here/../build/trainer/hpctrain}
if [[ -n ${MODEL:-} ]]; then
  read -r -a model_args <<<"--model $MODEL"
else
  read -r -a model_args <<<"${MODEL_ARGS:---n-layer 8 --n-head 8 --n-embd 512 --block-size 64 --vocab-size 256}"
fi
STEPS=${STEPS:-10}
ROUNDS=${ROUNDS:-2}
STRATEGIES=${STRATEGIES:-ddp zero1 zero2 fsdp}
WORLDS=${WORLDS:-2 4}
DATA=${DATA:-/usr/share/common-licenses/GPL-3}
B=${B:-2} T=${T:-64}
[[ -x $HPCTRAIN ]] || { echo "strategy_bench: no hpctrain at '$HPCTRAIN'; pass its path" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "strategy_bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
command -v jq >/dev/null || { echo "strategy_bench: jq is missing (apt-get install jq)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/strategy-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cores=$(env -u OMP_NUM_THREADS nproc)
export OMP_NUM_THREADS=1
port=$((20000 + RANDOM % 10000))

# Which strategies this hpctrain knows: an unknown --strategy is refused with one line naming
# the flag (exit 2), before the data is opened or any peer is met.
available=()
for s in $STRATEGIES; do
  msg=$("$HPCTRAIN" train --strategy "$s" --data "$work/none.txt" --model tiny --max-steps 1 2>&1 >/dev/null || true)
  if grep -qi -- "unknown strategy" <<<"$msg"; then
    echo "strategy_bench: skipping $s: $msg" >&2
  else
    available+=("$s")
  fi
done
((${#available[@]})) || { echo "strategy_bench: no strategy to measure" >&2; exit 2; }

# run STRATEGY W TAG: W local ranks; rank r's peak RSS (KiB) in TAG.rss.r, rank 0's metrics in TAG.jsonl.
run() {
  local s=$1 w=$2 tag=$3 r pids=() status=0
  port=$((port + 1))
  for ((r = 0; r < w; r++)); do
    RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      /usr/bin/time -f '%M %U %S' -o "$work/$tag.rss.$r" \
      "$HPCTRAIN" train --strategy "$s" --data "$DATA" --data-format text "${model_args[@]}" \
      --micro-batch "$B" --seq-len "$T" --total-batch-tokens $((B * T * w)) --max-steps "$STEPS" \
      --eval-every 0 --threads 1 --log-every 1000000 --dist-timeout 120 \
      --metrics "$work/$tag.jsonl" >"$work/$tag.out.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || status=$?; done
  if ((status != 0)); then
    echo "strategy_bench: $s at W=$w failed (exit $status):" >&2
    tail -n 3 "$work/$tag.out.0" >&2
    return 1
  fi
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

load_before=$(cut -d' ' -f1 /proc/loadavg)
# Step time at W=2: the strategies interleaved, ROUNDS times, so that load from other work on
# the machine hits them alike.
for ((round = 1; round <= ROUNDS; round++)); do
  for s in "${available[@]}"; do run "$s" 2 "$s-2-$round" || true; done
done
for w in $WORLDS; do
  [[ $w == 2 ]] && continue
  for s in "${available[@]}"; do run "$s" "$w" "$s-$w-1" || true; done
done
# The reference: one process, no strategy (16P of state, no buckets, nothing gathered).
run none 1 none-1-1 || true
load_after=$(cut -d' ' -f1 /proc/loadavg)

params=$(jq -s 'map(select(.param_bytes != null)) | .[0].param_bytes // 0' "$work/${available[0]}-2-1.jsonl" 2>/dev/null || echo 0)
P=$((params / 4))
echo "# hpctrain strategies: model ${model_args[*]} ($P parameters, fp32), micro-batch $B x seq-len $T"
echo "# per rank, $STEPS steps, 1 thread per rank, Gloo on loopback; $cores cores; load average $load_before -> $load_after"
echo "#"
echo "# Peak RSS per rank (MiB, /usr/bin/time); rank 0's RSS at the end of its last step and what it"
echo "# holds between steps (MiB, --metrics):"
printf '%-8s %3s  %-24s %7s %8s %8s %8s %8s %8s %8s\n' strategy W "peak RSS rank 0..W-1" max "RSS end" params grads adamw held formula
rows=("none 1")
for w in $WORLDS; do
  for s in "${available[@]}"; do rows+=("$s $w"); done
done
for row in "${rows[@]}"; do
  read -r s w <<<"$row"
  tag=$s-$w-1
  if [[ ! -s $work/$tag.jsonl ]]; then printf '%-8s %3s  (failed)\n' "$s" "$w"; continue; fi
  rss="" max=0
  for ((r = 0; r < w; r++)); do
    read -r k _ < <(tail -n 1 "$work/$tag.rss.$r")
    rss+="$(awk -v k="$k" 'BEGIN { printf "%.0f", k / 1024 }') "
    ((k > max)) && max=$k
  done
  read -r pb gb ob mem < <(jq -rs 'map(select(.param_bytes != null)) | last | "\(.param_bytes) \(.grad_bytes) \(.optimizer_bytes) \(.memory)"' "$work/$tag.jsonl")
  # docs/strategies.md: per rank, fp32 parameters + gradients + AdamW's two moments.
  case $s in
    ddp) formula=$((16 * P)) ;;
    zero1) formula=$((8 * P + 8 * P / w)) ;;
    zero2) formula=$((4 * P + 12 * P / w)) ;;
    fsdp) formula=$((16 * P / w)) ;;
    *) formula=$((16 * P)) ;;
  esac
  printf '%-8s %3s  %-24s %7s %8s %8s %8s %8s %8s %8s\n' "$s" "$w" "$rss" "$(awk -v k="$max" 'BEGIN { printf "%.0f", k / 1024 }')" \
    "$(mib "$mem")" "$(mib "$pb")" "$(mib "$gb")" "$(mib "$ob")" "$(mib $((pb + gb + ob)))" "$(mib "$formula")"
done
echo "#"
echo "# (held: params + grads + adamw between steps; formula: none and ddp 16P, zero1 8P+8P/W,"
echo "#  zero2 4P+12P/W, fsdp 16P/W; ddp's and zero1's grads are views of their all-reduce buckets)"
echo "#"
echo "# Step time at W=2 (ms, rank 0, median over steps 3..$STEPS of $ROUNDS interleaved runs):"
printf '%-8s %10s %10s %12s %14s\n' strategy "median ms" "tokens/s" "time / ddp's" "CPU s / step"
base=""
for s in "${available[@]}"; do
  files=()
  for ((round = 1; round <= ROUNDS; round++)); do
    [[ -s $work/$s-2-$round.jsonl ]] && files+=("$work/$s-2-$round.jsonl")
  done
  ((${#files[@]})) || { printf '%-8s %10s\n' "$s" "(failed)"; continue; }
  # Steps 1 and 2 of every run are warm-up (first allocations, first buckets).
  med=$(jq -r 'select(.step_ms != null and .step > 1) | .step_ms' "${files[@]}" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  [[ -n $base ]] || base=$med
  # CPU seconds of both ranks per step, the median over the rounds.
  cpu=$(for ((round = 1; round <= ROUNDS; round++)); do
          tail -q -n 1 "$work/$s-2-$round".rss.* 2>/dev/null | awk -v n="$STEPS" '{ c += $2 + $3 } END { if (NR) print c / n }'
        done | sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }')
  printf '%-8s %10.1f %10.0f %11.2fx %14.3f\n' "$s" "$med" "$(awk -v m="$med" -v t=$((B * T * 2)) 'BEGIN { print t / (m / 1000) }')" \
    "$(awk -v m="$med" -v b="$base" 'BEGIN { print m / b }')" "$cpu"
done
