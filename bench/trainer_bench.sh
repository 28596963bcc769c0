#!/usr/bin/env bash
# hpctrain's CPU figures, measured side by side in one run on this machine, 1 thread each
# (OMP_NUM_THREADS=1, --threads 1), L4 H4 C256 T256 B4 V50304:
#   1. tokens/s of hpctrain (1 process) vs the PyTorch reference GPT-2 (tests/trainer/
#      reference_gpt.py: nanoGPT's model.py in structure, written for this repository, with
#      nanoGPT's SDPA attention where torch has it), eager and under torch.compile, both on the
#      torch wheel of the tests' Python environment (scripts/install-deps.sh --python);
#   2. DDP efficiency: 2 ranks x 1 thread vs 1 rank x 1 thread (tokens/s per rank), a DDP run in
#      each round;
#   3. training FLOP/s (6N + 12LCT per token) as a fraction of the sgemm rate measured through
#      the LibTorch each one runs on (hpctrain: the one it is built with; the reference: the
#      wheel).
# The implementations alternate (ABCDABCD) so that load from other processes hits them alike; a
# run's figures are the medians of its steps after the first two (torch.compile compiles in the
# first), as wall-clock tokens/s and as tokens per CPU-second (robust to load from others); the
# table gives each run's and the median over runs, the ratios and whether issue 13's goals are met.
# Usage: bench/trainer_bench.sh [PATH/TO/hpctrain]   (STEPS=N to change the 12 steps per run;
# ROUNDS=N the 3 rounds; NANOGPT_MODEL=/path/to/nanoGPT/model.py to time nanoGPT's own model.py
# as the reference: fetch it yourself, it is not part of this repository)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HPCTRAIN=${1:-$here/../build/trainer/hpctrain}
STEPS=${STEPS:-12}
ROUNDS=${ROUNDS:-3}
venv=$("$here/../scripts/install-deps.sh" --python-venv-path)
PY=$venv/bin/python
[[ -x $PY ]] || { echo "trainer_bench: no $PY: run scripts/install-deps.sh --python" >&2; exit 2; }
[[ -x $HPCTRAIN ]] || { echo "trainer_bench: no hpctrain at $HPCTRAIN (build it first)" >&2; exit 2; }
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
    --max-steps "$STEPS" --eval-every 0 --threads 1 --log-every 1000000 --metrics "$m" "$@" >"$m.log"
}
median_tps() {  # METRICS -> {"tokens_per_s", "cpu_ms"}: medians over the steps after the first two
  "$PY" -c "import json,statistics; v=[json.loads(l) for l in open('$1') if '\"loss\"' in l][2:]; print(json.dumps({'tokens_per_s': statistics.median(x['tokens_per_s'] for x in v), 'cpu_ms': statistics.median(x['cpu_ms'] for x in v)}))"
}
# MKL's kernels: hpctrain (trainer/mkl_cpu_dispatch.cc) makes MKL choose them by the CPU's
# features, not its vendor (on AMD: its AVX-512 instead of its generic AVX2 code); the same
# function, preloaded, does it for the Python references and the sgemm figures, so that both
# sides run the same kernels. HPCTRAIN_MKL_VENDOR_CHECK=1 keeps MKL's own choice on both sides.
dispatch_lib=$(dirname "$HPCTRAIN")/libhpc_mkl_cpu_dispatch.so
if [[ -f $dispatch_lib && $(nm -D "$HPCTRAIN") == *" T mkl_serv_intel_cpu_true"* ]]; then
  py_env=(env "LD_PRELOAD=$dispatch_lib")
  if [[ ${HPCTRAIN_MKL_VENDOR_CHECK:-} == 1 ]]; then
    mkl_kernels="MKL's own choice (vendor check kept: HPCTRAIN_MKL_VENDOR_CHECK=1) on both sides"
  else
    mkl_kernels="by the CPU's features on both sides (mkl_cpu_dispatch.cc; the references with $(basename "$dispatch_lib") preloaded)"
  fi
else
  py_env=(env)
  mkl_kernels="MKL's own choice on both sides (this hpctrain has no mkl_cpu_dispatch)"
fi

reference_run() {  # MODE
  "${py_env[@]}" "$PY" "$here/trainer_reference_step.py" "$work/tokens_train.npy" $L $H $C $T $B $V "$STEPS" 1 "$1" \
    2>"$work/ref-$1.err" || { cat "$work/ref-$1.err" >&2; exit 1; }
}

# Which LibTorch hpctrain runs on: the one its binary links, and an sgemm through it (the wheel's
# python when it is the wheel's; else Debian's python3-torch, the same 1.13 and BLAS as Debian's
# libtorch-dev).
hpctrain_torch=$(ldd "$HPCTRAIN" | grep -o '/[^ ]*libtorch_cpu[^ ]*' | head -n1)
hpctrain_torch=$(readlink -f "$hpctrain_torch")
case $hpctrain_torch in
  "$(readlink -f "$venv")"/*) hpc_py=$PY ;;
  *) hpc_py=/usr/bin/python3 ;;
esac
hpc_torch_version=$("$hpc_py" -c "import torch; print(torch.__version__)")

load_before=$(cut -d' ' -f1 /proc/loadavg)
sgemm_wheel=$("${py_env[@]}" "$PY" "$here/trainer_sgemm.py" 1)
sgemm_hpc=$("${py_env[@]}" "$hpc_py" "$here/trainer_sgemm.py" 1)
# DDP: 2 ranks, each its own micro-batch of B x T (accumulation 1), vs the 1-rank runs; rank 0's
# figures.
ddp_run() {  # ROUND
  local port=$((20000 + RANDOM % 20000)) r
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      hpctrain_run "$work/ddp$1-$r.jsonl" --strategy ddp --total-batch-tokens $((2 * B * T)) &
  done
  wait
  median_tps "$work/ddp$1-0.jsonl"
}

ours=() eager=() compiled=() ddp=()
for round in $(seq "$ROUNDS"); do
  hpctrain_run "$work/ours$round.jsonl"
  ours+=("$(median_tps "$work/ours$round.jsonl")")
  eager+=("$(reference_run eager)")
  compiled+=("$(reference_run compile)")
  ddp+=("$(ddp_run "$round")")
done
load_after=$(cut -d' ' -f1 /proc/loadavg)

FIG_OURS="[$(IFS=,; echo "${ours[*]}")]" FIG_EAGER="[$(IFS=,; echo "${eager[*]}")]"
FIG_COMPILED="[$(IFS=,; echo "${compiled[*]}")]"
FIG_DDP="[$(IFS=,; echo "${ddp[*]}")]"
export FIG_OURS FIG_EAGER FIG_COMPILED FIG_DDP
export FIG_SGEMM_WHEEL=$sgemm_wheel FIG_SGEMM_HPC=$sgemm_hpc FIG_LOAD="$load_before/$load_after"
export FIG_MKL_KERNELS=$mkl_kernels
export FIG_HPC_TORCH="$hpc_torch_version ($hpctrain_torch)" FIG_SHAPE="$L $H $C $T $B $V"
"$PY" - <<'PYEOF'
import json, os, statistics
env = lambda k: json.loads(os.environ[k])
ours, eager, compiled, ddp = env("FIG_OURS"), env("FIG_EAGER"), env("FIG_COMPILED"), env("FIG_DDP")
# CPU-time rates on both sides: the training figures are per CPU-second too.
sg_wheel = env("FIG_SGEMM_WHEEL")["sgemm_gflops_cpu_time"]
sg_hpc = env("FIG_SGEMM_HPC")["sgemm_gflops_cpu_time"]
L, H, C, T, B, V = map(int, os.environ["FIG_SHAPE"].split())
N = V * C + L * (12 * C * C + 13 * C) + 2 * C  # weights without the position table
flops_per_token = 6 * N + 12 * L * C * T
tokens = B * T

def per_cpu_s(r):  # tokens per CPU-second of one run (its median step)
    return tokens / (r["cpu_ms"] / 1e3)

rows = [("hpctrain", os.environ["FIG_HPC_TORCH"], ours, sg_hpc),
        ("reference eager", eager[0]["torch"] + " wheel", eager, sg_wheel),
        ("reference torch.compile", compiled[0]["torch"] + " wheel", compiled, sg_wheel)]
fig = {"config": f"L{L} H{H} C{C} T{T} B{B} V{V}, 1 thread", "load_before_after": os.environ["FIG_LOAD"],
       "sgemm_gflops_hpctrain_torch": sg_hpc, "sgemm_gflops_wheel": sg_wheel}
print(f"config L{L} H{H} C{C} T{T} B{B} V{V}, 1 thread each, {len(ours)} alternating runs each; "
      "a run's figure is the median of its steps 3..; the table gives the median over runs")
print("%-24s %-26s %-24s %9s %10s %8s" % ("", "torch", "tok/CPU-s (each run)", "tok/CPU-s",
                                           "wall tok/s", "% sgemm"))
med = {}
for name, torch_v, runs, sg in rows:
    cpu = statistics.median(per_cpu_s(r) for r in runs)
    wall = statistics.median(r["tokens_per_s"] for r in runs)
    med[name] = (wall, cpu)
    frac = flops_per_token * cpu / 1e9 / sg
    print("%-24s %-26s %-24s %9.0f %10.0f %7.0f%%" % (
        name, torch_v.split(" (")[0][:26], ", ".join("%.0f" % per_cpu_s(r) for r in runs), cpu,
        wall, 100 * frac))
    fig[name] = {"tokens_per_s": [r["tokens_per_s"] for r in runs],
                 "tokens_per_cpu_s": [per_cpu_s(r) for r in runs], "median_tokens_per_cpu_s": cpu,
                 "fraction_of_sgemm_cpu_time": frac}
print("hpctrain's LibTorch: %s" % os.environ["FIG_HPC_TORCH"])
print("MKL kernels: %s" % os.environ["FIG_MKL_KERNELS"])
fig["mkl_kernels"] = os.environ["FIG_MKL_KERNELS"]
for ref, goal in (("reference eager", 1.5), ("reference torch.compile", 1.0)):
    w = med["hpctrain"][0] / med[ref][0]
    c = med["hpctrain"][1] / med[ref][1]
    print("hpctrain / %-24s %.2fx per CPU-second, %.2fx wall (medians; goal >= %.1fx per CPU-second: %s)"
          % (ref, c, w, goal, "met" if c >= goal else "missed"))
    fig["speedup_vs_" + ref.split()[-1]] = {"wall": w, "cpu_time": c}
one = statistics.median(r["tokens_per_s"] for r in ours)
one_cpu = statistics.median(r["cpu_ms"] for r in ours)
# A DDP run's tokens/s count both ranks' tokens; each rank's CPU time is for its own B x T. Each
# round's DDP run is paired with that round's 1-rank run; the verdict takes the medians.
ddp_tps = statistics.median(r["tokens_per_s"] for r in ddp)
ddp_cpu = statistics.median(r["cpu_ms"] for r in ddp)
eff, eff_cpu = ddp_tps / (2 * one), one_cpu / ddp_cpu
print("DDP 2 ranks x 1 thread: %.0f tokens/s (both ranks); efficiency per CPU-second %s in "
      "each round, %.2f of the medians (goal >= 0.9: %s), %.2f wall" % (
          ddp_tps, ", ".join("%.2f" % (o["cpu_ms"] / d["cpu_ms"]) for o, d in zip(ours, ddp)),
          eff_cpu, "met" if eff_cpu >= 0.9 else "missed", eff))
print("sgemm 1 thread (2048^3, per CPU-second): %.1f GFLOP/s through hpctrain's LibTorch, %.1f "
      "through the wheel; %% sgemm = (6N + 12LCT) x tokens per CPU-second / that" % (sg_hpc, sg_wheel))
print("load average before/after: %s (wall figures measure the neighbours too)" % os.environ["FIG_LOAD"])
fig.update({"ddp_2x1_tokens_per_s": [r["tokens_per_s"] for r in ddp], "ddp_efficiency": eff,
            "ddp_efficiency_cpu_time": eff_cpu,
            "compile_first_step_s": [r["first_step_s"] for r in compiled]})
print(json.dumps(fig))
PYEOF
