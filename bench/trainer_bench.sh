#!/usr/bin/env bash
# hpctrain's CPU figures, measured in one run on this machine:
#   1. tokens/s of hpctrain (1 process) vs the PyTorch reference (nanoGPT's model.py structure,
#      Debian's python3-torch) at L4 H4 C256 T256 B4 V50304, 1 thread each, same OpenBLAS;
#   2. DDP efficiency: 2 ranks x 1 thread vs 1 rank x 1 thread (tokens/s per rank);
#   3. training FLOP/s (6N + 12LCT per token) as a fraction of the measured sgemm rate.
# The two implementations alternate (ABAB) so that load from other processes hits both alike.
# Usage: bench/trainer_bench.sh [PATH/TO/hpctrain]   (STEPS=N to change the 12 steps per run;
# NANOGPT_MODEL=/path/to/nanoGPT/model.py to time nanoGPT's own model.py as the reference)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HPCTRAIN=${1:-$here/../build-trainer/trainer/hpctrain}
STEPS=${STEPS:-12}
PY=/usr/bin/python3  # Debian's python3-torch lives here; another python3 may come first on PATH
L=4 H=4 C=256 T=256 B=4 V=50304
work=$(mktemp -d "${TMPDIR:-/tmp}/trainer-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

"$PY" -c "import numpy as np; np.save('$work/tokens_train.npy', np.random.default_rng(0).integers(0, 50257, size=1_000_000).astype(np.uint16))"

hpctrain_run() {  # METRICS [extra args]
  local m=$1
  shift
  "$HPCTRAIN" train --data "$work/tokens_train.npy" --n-layer $L --n-head $H --n-embd $C \
    --block-size $T --vocab-size $V --micro-batch $B --seq-len $T --total-batch-tokens $((B * T)) \
    --max-steps "$STEPS" --eval-every 0 --threads 1 --log-every 1000000 --metrics "$m" "$@" >/dev/null
}
median_tps() {  # METRICS -> "tokens/s cpu_ms": medians over the steps after the first two
  "$PY" -c "import json,statistics; v=[json.loads(l) for l in open('$1') if '\"loss\"' in l][2:]; print(statistics.median(x['tokens_per_s'] for x in v), statistics.median(x['cpu_ms'] for x in v))"
}

load_before=$(cut -d' ' -f1 /proc/loadavg)
sgemm=$("$PY" "$here/trainer_sgemm.py" 1)
ours=() theirs=()
for round in 1 2; do
  hpctrain_run "$work/ours$round.jsonl"
  ours+=("$(median_tps "$work/ours$round.jsonl")")
  theirs+=("$("$PY" "$here/trainer_reference_step.py" "$work/tokens_train.npy" $L $H $C $T $B $V "$STEPS" 1)")
done

# DDP: 2 ranks, each its own micro-batch of B x T (accumulation 1), vs the 1-rank runs above.
port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    hpctrain_run "$work/ddp$r.jsonl" --strategy ddp --total-batch-tokens $((2 * B * T)) &
done
wait
ddp=$(median_tps "$work/ddp0.jsonl" | cut -d' ' -f1)
load_after=$(cut -d' ' -f1 /proc/loadavg)

"$PY" - "$sgemm" "$ddp" "$load_before" "$load_after" "${ours[@]}" "${theirs[@]}" <<PYEOF
import json, statistics, sys
sgemm = json.loads(sys.argv[1])["sgemm_gflops"]
ddp, load0, load1 = float(sys.argv[2]), sys.argv[3], sys.argv[4]
ours_cpu = [float(x.split()[1]) for x in sys.argv[5:7]]
ours = [float(x.split()[0]) for x in sys.argv[5:7]]
ref = [json.loads(x) for x in sys.argv[7:9]]
tokens_per_step = $B * $T
L, H, C, T, V = $L, $H, $C, $T, $V
N = V * C + L * (12 * C * C + 13 * C) + 2 * C          # weights without the position table
flops_per_token = 6 * N + 12 * L * C * T
best_ours, best_ref = max(ours), max(r["tokens_per_s"] for r in ref)
# Tokens per CPU-second: what each would do on a core of its own (robust to load from others).
cpu_ours = tokens_per_step / (min(ours_cpu) / 1e3)
cpu_ref = tokens_per_step / (min(r["cpu_ms"] for r in ref) / 1e3)
one = statistics.median(ours)
fig = {
  "config": f"L{L} H{H} C{C} T{T} B{$B} V{V}, 1 thread",
  "hpctrain_tokens_per_s": ours,
  "reference_tokens_per_s": [r["tokens_per_s"] for r in ref],
  "speedup_best_vs_best": best_ours / best_ref,
  "hpctrain_tokens_per_cpu_s": cpu_ours,
  "reference_tokens_per_cpu_s": cpu_ref,
  "speedup_cpu_time": cpu_ours / cpu_ref,
  "ddp_2x1_tokens_per_s": ddp,
  "ddp_efficiency": ddp / (2 * one),
  "sgemm_gflops_1_thread": sgemm,
  "train_gflops": flops_per_token * best_ours / 1e9,
  "fraction_of_sgemm": flops_per_token * best_ours / 1e9 / sgemm,
  "train_gflops_per_cpu_s": flops_per_token * cpu_ours / 1e9,
  "fraction_of_sgemm_cpu_time": flops_per_token * cpu_ours / 1e9 / sgemm,
  "loadavg_before_after": [load0, load1],
}
ours_s = ", ".join("%.0f" % x for x in ours)
ref_s = ", ".join("%.0f" % r["tokens_per_s"] for r in ref)
print("hpctrain   tokens/s: %s" % ours_s)
print("reference  tokens/s: %s   (%s, python3-torch)" % (ref_s, ref[0].get("reference", "reference")))
print("speed-up (best/best): %.2fx wall; %.2fx in tokens per CPU-second (%.0f vs %.0f)"
      % (fig["speedup_best_vs_best"], fig["speedup_cpu_time"], cpu_ours, cpu_ref))
print("DDP 2 ranks x 1 thread: %.0f tokens/s, efficiency %.2f" % (ddp, fig["ddp_efficiency"]))
print("sgemm 1 thread: %.1f GFLOP/s; training %.1f GFLOP/s = %.0f%% of it (per CPU-second: %.1f = %.0f%%)"
      % (sgemm, fig["train_gflops"], 100 * fig["fraction_of_sgemm"], fig["train_gflops_per_cpu_s"],
         100 * fig["fraction_of_sgemm_cpu_time"]))
print("load average before/after: %s/%s (2 cores shared with other work)" % (load0, load1))
print(json.dumps(fig))
PYEOF
