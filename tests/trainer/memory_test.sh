#!/usr/bin/env bash
# FSDP's memory, measured on the process and on its storages (issue: fsdp's peak was above ddp's):
#  1. sharded initialisation: fsdp at W=2 builds no whole model (each rank materialises unit
#     after unit and keeps its shard), yet its parameters equal the unsharded model's bit for bit
#     (--strategy none, W=1, same seed): one step at learning rate 0, checkpoint, export, cmp;
#  2. real peak: the peak RSS (/usr/bin/time %M) of every fsdp rank at W=2 is at most 0.8 of the
#     largest ddp rank's, for 8 blocks of width 768 over the byte vocabulary (P = 56.9M, the
#     blocks are 99.6% of it). The bound from docs/strategies.md#memory-per-rank: ddp R0 + 16P, fsdp
#     R0 + 16P/W + ~3U (U = one block's fp32 buffer, 28 MB: the unit in use, the prefetched one,
#     a gradient buffer), with R0 ~ 0.2 GB (LibTorch, Gloo, activations): 0.74/1.11 GB = 0.67;
#     zero1 and zero2 (12P and 10P at W=2) peak below ddp;
#  3. sharded at rest, on real storages: between steps fsdp's rank holds at most 1/W + 5% of
#     ddp's 16P in parameters, gradients and AdamW state, counted as the distinct storages
#     behind its tensors (dist/storage_bytes.h): a unit whose free frees nothing counts whole.
source "$(dirname "$0")/lib.sh"
[[ -x /usr/bin/time ]] || fail "/usr/bin/time is missing (apt-get install time)"
make_corpus "$WORK/data"

# --- 1. sharded initialisation equals the unsharded one ---
common=(--data "$WORK/data/corpus_train.txt" --model tiny --n-embd 66 --block-size 63
        --micro-batch 2 --seq-len 32 --max-steps 1 --max-lr 0 --min-lr-ratio 0 --seed 11
        --threads 1 --dist-timeout 60 --eval-every 0 --sample-every 0 --checkpoint-at-end)
train none1 none 1 --total-batch-tokens 128 --checkpoint-dir "$WORK/ck_none"
train fsdp2 fsdp 2 --total-batch-tokens 128 --checkpoint-dir "$WORK/ck_fsdp"
"$HPCTRAIN" export --from "$WORK/ck_none" --to "$WORK/hf_none" >/dev/null
"$HPCTRAIN" export --from "$WORK/ck_fsdp" --to "$WORK/hf_fsdp" >/dev/null
cmp "$WORK/hf_none/model.safetensors" "$WORK/hf_fsdp/model.safetensors" ||
  fail "fsdp's sharded initialisation differs from the unsharded model's"
echo "sharded init: fsdp W=2 parameters equal none W=1's bit for bit"

# --- 2. peak RSS per rank at W=2 ---
common=(--data "$WORK/data/corpus_train.txt" --n-layer 8 --n-head 12 --n-embd 768 --block-size 64
        --vocab-size 256 --micro-batch 1 --seq-len 64 --total-batch-tokens 128 --max-steps 2
        --seed 5 --threads 1 --dist-timeout 120 --eval-every 0 --sample-every 0)
peak() {  # STRATEGY: the largest peak RSS (KiB) over the two ranks
  local s=$1 r pids=()
  next_port
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      /usr/bin/time -f %M -o "$WORK/$s.rss.$r" \
      "$HPCTRAIN" train "${common[@]}" --strategy "$s" --metrics "$WORK/$s.jsonl" \
      >"$WORK/$s.log.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || fail "$s at W=2 failed: $(tail -n3 "$WORK/$s.log.0")"; done
  cat "$WORK/$s.rss.0" "$WORK/$s.rss.1" | sort -n | tail -n1
}
ddp=$(peak ddp)
fsdp=$(peak fsdp)
zero1=$(peak zero1)
zero2=$(peak zero2)
awk -v d="$ddp" -v f="$fsdp" -v z1="$zero1" -v z2="$zero2" 'BEGIN {
  printf "peak RSS per rank at W=2 (MiB): ddp %d, zero1 %d (%.2f), zero2 %d (%.2f), fsdp %d (%.2f; bound 0.80)\n",
         d / 1024, z1 / 1024, z1 / d, z2 / 1024, z2 / d, f / 1024, f / d }'
awk -v d="$ddp" -v f="$fsdp" 'BEGIN { exit !(f <= 0.8 * d) }' ||
  fail "fsdp's peak RSS at W=2 ($fsdp KiB) is not below 0.8 of ddp's ($ddp KiB)"
((zero1 < ddp && zero2 < ddp)) || fail "zero1 ($zero1 KiB) or zero2 ($zero2 KiB) peaks above ddp ($ddp KiB)"

# --- 3. sharded at rest, on the storages ---
last() { grep '"tokens_per_s"' "$1" | tail -n1; }  # step lines only
state() { local l; l=$(last "$1")
  echo $(($(field <(echo "$l") param_bytes) + $(field <(echo "$l") grad_bytes) + $(field <(echo "$l") optimizer_bytes))); }
P=$(($(field <(last "$WORK/ddp.jsonl") param_bytes) / 4))
held=$(state "$WORK/fsdp.jsonl")
awk -v h="$held" -v p="$P" 'BEGIN {
  printf "at rest: fsdp W=2 rank 0 holds %d bytes in distinct storages = %.4f of 16P (bound 0.55)\n", h, h / (16 * p)
  exit !(h <= 16 * p * 0.55) }' || fail "fsdp's storages between steps are not 1/2 of the model state"
