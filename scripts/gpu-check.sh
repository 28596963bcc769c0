#!/usr/bin/env bash
# hpctrain on a real GPU: builds hpctrain against the PyTorch of this machine's python3 (its
# LibTorch with CUDA and NCCL), then checks and measures what the project's CPU machines cannot:
#   1. CUDA against the CPU: the same 8 steps of a small model in fp32 on both give the same
#      losses (1e-4 relative), and bf16 autocast on CUDA stays within bf16's rounding (2e-2);
#   2. NCCL: ddp and fsdp over NCCL (one rank: the process group, the collectives and the
#      bf16 gathers of fsdp run; one GPU admits no second NCCL rank) equal the plain run (1e-4);
#   3. GPT-2 124M, bf16, micro-batch 16 x 1024: hpctrain's tokens/s, MFU and peak memory (the
#      CUDA caching allocator's peak) against the same recipe in PyTorch on the same GPU (the
#      repository's reference model with SDPA attention, bf16 autocast, fused AdamW; eager, then
#      torch.compile unless NO_COMPILE=1).
# Usage: scripts/gpu-check.sh [OUTDIR]   (default ./gpu-check-out; logs and a summary go there)
#   PYTHON=python3 (the Python whose torch is built on), DEPS_PREFIX=DIR: a folder holding Debian's
#   nlohmann-json3-dev, libcli11-dev, libfmt-dev/libfmt9, libgloo-dev and libssl-dev/libssl3
#   unpacked (dpkg -x), for a GPU machine that has none of them and no package registry;
#   BUILD_ONLY=1: build-gpu/trainer/hpctrain and nothing else.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
OUT=$(mkdir -p "${1:-gpu-check-out}" && cd "${1:-gpu-check-out}" && pwd)
PY=${PYTHON:-python3}
summary=$OUT/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
t0=$SECONDS
phase() { echo "== $* ($((SECONDS - t0)) s)"; }

nvidia-smi -L >/dev/null 2>&1 || { say "gpu-check: no GPU here (nvidia-smi lists none)"; exit 0; }
say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
say "torch: $("$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))')"

phase configure
prefix=$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
cmake_args=(-S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DHPC_TORCH2=ON -DHPC_TRAINER_NCCL=ON
  -DHPC_BUILD_TESTS=OFF "-DHPC_TORCH2_PREFIX=$prefix" "-DHPC_TORCH2_PYTHON=$(command -v "$PY")")
command -v ninja >/dev/null && cmake_args+=(-G Ninja)
if [[ -n ${DEPS_PREFIX:-} ]]; then
  d=$(cd "$DEPS_PREFIX" && pwd)/usr
  lib=$d/lib/x86_64-linux-gnu
  cmake_args+=("-DCMAKE_PREFIX_PATH=$d" "-Dnlohmann_json_DIR=$d/share/cmake/nlohmann_json"
    "-DCLI11_DIR=$d/share/cmake/CLI11" "-Dfmt_DIR=$lib/cmake/fmt" "-DOPENSSL_ROOT_DIR=$d"
    "-DOPENSSL_INCLUDE_DIR=$d/include" "-DOPENSSL_CRYPTO_LIBRARY=$lib/libcrypto.so.3"
    "-DOPENSSL_SSL_LIBRARY=$lib/libssl.so.3" "-DHPC_GLOO_INCLUDE_DIR=$d/include")
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
cmake "${cmake_args[@]}" >"$OUT/configure.log" 2>&1 || { say "configure FAILED"; tail -30 "$OUT/configure.log"; exit 1; }
phase build
cmake --build build-gpu --target hpctrain -j"$(nproc)" >"$OUT/build.log" 2>&1 ||
  { say "build FAILED"; grep -m5 -B2 -A8 'error' "$OUT/build.log"; exit 1; }
H=$PWD/build-gpu/trainer/hpctrain
"$H" --version | tee -a "$summary"
[[ -n ${BUILD_ONLY:-} ]] && exit 0

work=$(mktemp -d)
"$PY" -c "import numpy as np; np.save('$work/tokens_train.npy', np.random.default_rng(0).integers(0, 50257, size=20_000_000).astype(np.uint16))"
compare() {  # NAME TOL A.jsonl B.jsonl: the largest relative difference of the losses
  "$PY" - "$@" <<'PYEOF' | tee -a "$summary"
import json, sys
name, tol, a, b = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
la = [json.loads(l)["loss"] for l in open(a) if '"loss"' in l]
lb = [json.loads(l)["loss"] for l in open(b) if '"loss"' in l]
d = max(abs(x / y - 1) for x, y in zip(la, lb)) if la and len(la) == len(lb) else float("inf")
print(f"{'ok  ' if d <= tol else 'FAIL'} {name}: {len(la)} steps, largest relative loss difference {d:.2e} (bound {tol:g})")
PYEOF
}
small=(--n-layer 4 --n-head 4 --n-embd 256 --block-size 256 --vocab-size 50304 --micro-batch 8
  --seq-len 256 --total-batch-tokens 4096 --max-steps 8 --warmup-steps 2 --eval-every 0 --seed 7)
run_small() {  # NAME [args]: one process (RANK etc. set by the caller for the strategies)
  local n=$1
  shift
  "$H" train --data "$work/tokens_train.npy" "${small[@]}" --metrics "$work/$n.jsonl" "$@" \
    >"$OUT/$n.log" 2>&1 || { say "FAIL $n: exit $? ($(tail -n1 "$OUT/$n.log"))"; return 1; }
}

phase "CUDA against the CPU"
run_small cpu-fp32 --device cpu --precision fp32 --threads "$(nproc)"
run_small cuda-fp32 --device cuda --precision fp32
run_small cuda-bf16 --device cuda --precision bf16
compare "cuda fp32 = cpu fp32" 1e-4 "$work/cuda-fp32.jsonl" "$work/cpu-fp32.jsonl"
compare "cuda bf16 near cpu fp32" 2e-2 "$work/cuda-bf16.jsonl" "$work/cpu-fp32.jsonl"

phase NCCL
for s in ddp fsdp; do
  RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29500 + RANDOM % 1000)) \
    run_small "nccl-$s" --device cuda --precision fp32 --strategy "$s" &&
    compare "nccl $s = plain cuda" 1e-4 "$work/nccl-$s.jsonl" "$work/cuda-fp32.jsonl"
  if grep -q 'destroy_process_group() was not called' "$OUT/nccl-$s.log"; then
    say "FAIL nccl $s: ProcessGroupNCCL warns at exit that the group was not shut down"
  else
    say "ok   nccl $s: the group shut down at exit (no warning from ProcessGroupNCCL)"
  fi
done

phase "GPT-2 124M: hpctrain"
B=${MICRO_BATCH:-16} T=1024 STEPS=${STEPS:-30}
"$H" train --data "$work/tokens_train.npy" --model gpt2 --device cuda --micro-batch "$B" \
  --seq-len $T --total-batch-tokens $((B * T)) --max-steps "$STEPS" --warmup-steps 10 \
  --eval-every 0 --metrics "$work/gpt2.jsonl" >"$OUT/gpt2.log" 2>&1 || say "FAIL gpt2: $(tail -n1 "$OUT/gpt2.log")"
cp "$work/gpt2.jsonl" "$OUT/" 2>/dev/null
"$PY" - "$work/gpt2.jsonl" <<'PYEOF' | tee -a "$summary"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l][5:]
if rows:
    tps = statistics.median(r["tokens_per_s"] for r in rows)
    mfu = [r["mfu"] for r in rows if r.get("mfu") is not None]
    mem = max(r["memory"] for r in rows)
    print(f"hpctrain gpt2: {tps:,.0f} tokens/s (median of {len(rows)} steps after 5), "
          f"MFU {statistics.median(mfu):.1%}, step {statistics.median(r['step_ms'] for r in rows):.1f} ms, "
          f"peak allocated {mem / 2**30:.2f} GiB, last loss {rows[-1]['loss']:.4f}")
PYEOF

phase "GPT-2 124M: the PyTorch reference"
for mode in eager compile; do
  [[ $mode == compile && -n ${NO_COMPILE:-} ]] && continue
  timeout 240 "$PY" - "$mode" "$B" "$STEPS" <<'PYEOF' >"$OUT/ref-$mode.log" 2>&1
import statistics, sys, time, torch, torch.nn.functional as F
sys.path.insert(0, "tests/trainer")
import reference_gpt as ref
mode, B, steps, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 1024
def sdpa(self, x):  # nanoGPT's attention: fused causal SDPA
    Bx, Tx, C = x.size()
    q, k, v = (t.view(Bx, Tx, self.n_head, C // self.n_head).transpose(1, 2)
               for t in self.c_attn(x).split(self.n_embd, dim=2))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.c_proj(y.transpose(1, 2).contiguous().view(Bx, Tx, C))
ref.CausalSelfAttention.forward = sdpa
torch.manual_seed(0)
m = ref.GPT(ref.Config(12, 12, 768, 1024, 50304)).cuda()
groups = [{"params": [p for p in m.parameters() if p.dim() >= 2], "weight_decay": 0.1},
          {"params": [p for p in m.parameters() if p.dim() < 2], "weight_decay": 0.0}]
opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
f = torch.compile(m) if mode == "compile" else m
tok = torch.randint(0, 50257, (B, T + 1), device="cuda")
x, y = tok[:, :-1].contiguous(), tok[:, 1:].contiguous()
ms = []
for s in range(steps):
    t = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        _, loss = f(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step(); opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    ms.append((time.perf_counter() - t) * 1e3)
med = statistics.median(ms[5:])
print(f"reference {mode}: {B * T / med * 1e3:,.0f} tokens/s (median of {len(ms) - 5} steps after 5), "
      f"step {med:.1f} ms, peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
PYEOF
  tail -n1 "$OUT/ref-$mode.log" | tee -a "$summary"
done
phase "all done"
rm -rf "$work"
