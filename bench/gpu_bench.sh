#!/usr/bin/env bash
# GPT-2 124M in bf16 on this machine's GPUs: tokens/s and MFU of hpctrain (the LibTorch 2.x CUDA
# build). MFU = model FLOPs per token x tokens/s / (GPUs x the GPU's dense bf16 peak), with
# 6N + 12·L·C·T FLOPs per token (docs/libtorch2.md#gpu-benchmark gives the formula, the peaks and
# their sources). On a machine without a GPU it says so and exits 0: nothing to measure.
# Usage: bench/gpu_bench.sh [PATH/TO/hpctrain]   (default build-torch2/trainer/hpctrain)
#   STEPS=N (30), MICRO_BATCH=B (16), SEQ_LEN=T (1024), GPUS=G (1: one process; G > 1: DDP with
#   G local ranks), PEAK_TFLOPS=X for a GPU the table does not know.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HPCTRAIN=${1:-$here/../build-torch2/trainer/hpctrain}
STEPS=${STEPS:-30} B=${MICRO_BATCH:-16} T=${SEQ_LEN:-1024} GPUS=${GPUS:-1}

if ! command -v nvidia-smi >/dev/null || ! gpus=$(nvidia-smi -L 2>/dev/null) || [[ -z $gpus ]]; then
  echo "gpu_bench: no GPU on this machine (nvidia-smi missing or lists none): nothing measured"
  exit 0
fi
if [[ ! -x $HPCTRAIN ]]; then
  echo "gpu_bench: $HPCTRAIN is not built: cmake --preset torch2-cuda && cmake --build build-torch2" >&2
  exit 2
fi
if ! "$HPCTRAIN" --version | grep -q '^CUDA: compiled in'; then
  echo "gpu_bench: $HPCTRAIN was built without CUDA (hpctrain --version): use the torch2-cuda build" >&2
  exit 2
fi
PY=/usr/bin/python3 # Debian's python3 with python3-numpy: the token file and the medians
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$PY" -c "import numpy as np; np.save('$work/tokens_train.npy', np.random.default_rng(0).integers(0, 50257, size=20_000_000).astype(np.uint16))"

peak=()
[[ -n ${PEAK_TFLOPS:-} ]] && peak=(--peak-tflops "$PEAK_TFLOPS")
run_rank() { # RANK
  "$HPCTRAIN" train --data "$work/tokens_train.npy" --model gpt2 --device cuda \
    --micro-batch "$B" --seq-len "$T" --total-batch-tokens $((B * T * GPUS)) \
    --max-steps "$STEPS" --warmup-steps 10 --eval-every 0 --log-every 1000000 \
    --metrics "$work/rank$1.jsonl" "${peak[@]}" "${@:2}" >"$work/rank$1.log" 2>&1
}
echo "# gpu_bench: GPT-2 124M bf16, $GPUS x $(head -n1 <<<"$gpus" | sed 's/ (UUID.*//'), micro-batch $B x $T, $STEPS steps"
"$HPCTRAIN" --version | sed 's/^/#   /'
if ((GPUS == 1)); then
  run_rank 0 || { tail -n 5 "$work/rank0.log" >&2; exit 1; }
else
  port=$((20000 + RANDOM % 10000)) pids=()
  for ((r = 0; r < GPUS; r++)); do
    RANK=$r WORLD_SIZE=$GPUS LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      run_rank "$r" --strategy ddp &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { tail -n 5 "$work"/rank*.log >&2; exit 1; }; done
fi
# Medians over the steps after the first five (warm-up: cuBLAS heuristics, the allocator).
"$PY" - "$work/rank0.jsonl" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l][5:]
if not rows:
    sys.exit("gpu_bench: too few steps to measure (STEPS > 5)")
tps = statistics.median(r["tokens_per_s"] for r in rows)
mfu = [r["mfu"] for r in rows if r.get("mfu") is not None]
print(f"tokens/s  {tps:,.0f}  (all GPUs, median of {len(rows)} steps)")
print(f"MFU       {statistics.median(mfu):.1%}" if mfu else
      "MFU       unknown: this GPU is not in the table (device.cc); set PEAK_TFLOPS")
PYEOF
