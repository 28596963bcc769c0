#!/usr/bin/env bash
# ZeRO-1 and ZeRO-2 on Gloo, 2 and 4 processes on this machine:
#  1. equivalence: 20 steps of zero1 and zero2 give DDP's losses to 1e-5 at W=2 (accumulation 4)
#     and W=4 (accumulation 2), with clipping active (--grad-clip 0.5 below most steps' norm).
#     n_embd 66 and block size 63 make the parameter count 2 mod 4: W=4 pads the last shard;
#  2. memory: per rank, zero1's and zero2's optimiser state is 1/W of DDP's (+ padding), and
#     zero2 keeps 1/W of the gradients between steps;
#  3. a dead peer under zero2 ends the survivor with an error, not a hang;
#  4. zero2's log names the collectives: each bucket reduced into the shard by all-reduce + slice
#     and gathered into one tensor on LibTorch 2.x's Gloo (NCCL: a reduce-scatter), into a list
#     on 1.13's;
#  5. LibTorch 2.x: the reduce-scatter NCCL uses, taken on Gloo with HPCTRAIN_GLOO_REDUCE_SCATTER=1
#     (reduce_scatter_single), gives zero2 and fsdp DDP's losses to 1e-5 at W=2, and the log says so.
# (Their checkpoints and resume: checkpoint_test.sh and reshard_test.sh.)
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
next_port
common=(--data "$WORK/data/corpus_train.txt" --model tiny --n-embd 66 --block-size 63
        --micro-batch 2 --seq-len 32 --total-batch-tokens 512 --max-steps 20 --warmup-steps 3
        --max-lr 3e-3 --grad-clip 0.5 --eval-every 0 --seed 3 --threads 1 --dist-timeout 30)

# Parameter, gradient and optimiser bytes held by rank 0 after the last step of a metrics file.
held() { echo $(field <(tail -n1 "$1") param_bytes) $(field <(tail -n1 "$1") grad_bytes) \
              $(field <(tail -n1 "$1") optimizer_bytes); }

# REF TAG WHAT: TAG's 20 losses are REF's (ddp's) to 1e-5; prints the worst difference.
same_losses() {
  paste <(field "$WORK/$1.jsonl" loss) <(field "$WORK/$2.jsonl" loss) |
    awk -v what="$3" '
      { n++; d = $1 - $2; if (d < 0) d = -d; if (d > worst) worst = d }
      END { printf "equivalence: %s vs ddp, %d steps, worst loss difference %.2e\n", what, n, worst;
            exit !(n == 20 && worst <= 1e-5) }'
}

# The collectives zero2's log names (as fsdp_test.sh's).
if "$HPCTRAIN" --version | grep -q '^LibTorch 1\.'; then
  want_collectives="all-reduce then this rank's slice, all-gather into a list"
else
  want_collectives="all-reduce then this rank's slice, all-gather into one tensor"
fi

for world in 2 4; do
  run_strategy ddp $world
  clipped=$(field "$WORK/ddp_$world.jsonl" grad_norm | awk '$1 > 0.5 { n++ } END { print n + 0 }')
  [[ $clipped -ge 10 ]] || fail "clipping was active in only $clipped of 20 steps"
  for strategy in zero1 zero2; do
    run_strategy $strategy $world
    same_losses "ddp_$world" "${strategy}_$world" "$strategy W=$world" ||
      fail "$strategy at W=$world does not reproduce DDP's losses"
  done
  grep -qF "each reduced to this rank's shard and gathered by $want_collectives" \
    "$WORK/zero2_${world}_0.log" ||
    fail "zero2 W=$world: expected '$want_collectives' in: $(grep '^zero2:' "$WORK/zero2_${world}_0.log")"

  # Memory, from rank 0's metrics after the last step (every rank's shard has the same size).
  read -r p_ddp g_ddp o_ddp <<<"$(held "$WORK/ddp_$world.jsonl")"
  [[ $o_ddp -eq $((2 * p_ddp)) ]] || fail "ddp: optimiser state $o_ddp, expected 2 x $p_ddp"
  for strategy in zero1 zero2; do
    read -r p g o <<<"$(held "$WORK/${strategy}_$world.jsonl")"
    # 1/W of DDP's, plus at most W - 1 padding elements per moment (4 bytes each).
    (( o * world >= o_ddp && o * world <= o_ddp + 2 * 4 * world )) ||
      fail "$strategy W=$world: optimiser state $o bytes is not 1/$world of ddp's $o_ddp"
    echo "memory: $strategy W=$world optimiser state $o bytes = 1/$(awk -v a="$o_ddp" -v b="$o" 'BEGIN { printf "%.3f", a / b }') of ddp's $o_ddp; gradients $g (ddp $g_ddp)"
    if [[ $strategy == zero2 ]]; then
      (( g * world <= p_ddp + 4 * world )) ||
        fail "zero2 W=$world: $g bytes of gradients between steps, expected 1/$world of $p_ddp"
    fi
  done
done

# 5. The flat reduce-scatter (NCCL's form) on 2.x's Gloo: same losses as ddp's.
if ! "$HPCTRAIN" --version | grep -q '^LibTorch 1\.'; then
  rs="reduce-scatter (HPCTRAIN_GLOO_REDUCE_SCATTER) and all-gather into one tensor"
  for strategy in zero2 fsdp; do
    HPCTRAIN_GLOO_REDUCE_SCATTER=1 train "${strategy}_rs" "$strategy" 2
    grep -qF "$rs" "$WORK/${strategy}_rs_0.log" ||
      fail "$strategy with HPCTRAIN_GLOO_REDUCE_SCATTER=1: expected '$rs' in: $(grep "^$strategy:" "$WORK/${strategy}_rs_0.log")"
    same_losses ddp_2 "${strategy}_rs" "$strategy W=2 by reduce-scatter" ||
      fail "$strategy by Gloo's reduce-scatter does not reproduce DDP's losses"
  done
fi

# A peer that dies mid-run under zero2: the survivor fails within the timeout instead of hanging.
dead_peer_check zero2 --strategy zero2
