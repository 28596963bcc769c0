#!/usr/bin/env bash
# ZeRO-1 and ZeRO-2 on Gloo, 2 and 4 processes on this machine:
#  1. equivalence: 20 steps of zero1 and zero2 give DDP's losses to 1e-5 at W=2 (accumulation 4)
#     and W=4 (accumulation 2), with clipping active (--grad-clip 0.5 below most steps' norm).
#     n_embd 66 and block size 63 make the parameter count 2 mod 4: W=4 pads the last shard;
#  2. memory: per rank, zero1's and zero2's optimiser state is 1/W of DDP's (+ padding), and
#     zero2 keeps 1/W of the gradients between steps;
#  3. a dead peer under zero2 ends the survivor with an error, not a hang.
# (Their checkpoints and resume: checkpoint_test.sh and reshard_test.sh.)
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
port=$((20000 + RANDOM % 20000))
common=(--data "$WORK/data/corpus_train.txt" --model tiny --n-embd 66 --block-size 63
        --micro-batch 2 --seq-len 32 --total-batch-tokens 512 --max-steps 20 --warmup-steps 3
        --max-lr 3e-3 --grad-clip 0.5 --eval-every 0 --seed 3 --threads 1 --dist-timeout 30)

run() {  # STRATEGY WORLD: metrics in $WORK/STRATEGY_WORLD.jsonl
  local strategy=$1 world=$2 pids=() r
  port=$((port + 1))
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$HPCTRAIN" train "${common[@]}" --strategy "$strategy" \
      --metrics "$WORK/${strategy}_$world.jsonl" >"$WORK/${strategy}_${world}_$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do
    wait "$r" || fail "$strategy at W=$world failed: $(cat "$WORK/${strategy}_${world}"_*.log)"
  done
  grep -q "world $world ($strategy)" "$WORK/${strategy}_${world}_0.log" ||
    fail "rank 0 did not run $strategy: $(head -n1 "$WORK/${strategy}_${world}_0.log")"
}
field() { grep -o "\"$2\":[^,}]*" "$1" | cut -d: -f2; }  # FILE NAME: one value per step
# Parameter, gradient and optimiser bytes held by rank 0 after the last step of a metrics file.
held() { echo $(field <(tail -n1 "$1") param_bytes) $(field <(tail -n1 "$1") grad_bytes) \
              $(field <(tail -n1 "$1") optimizer_bytes); }

for world in 2 4; do
  run ddp $world
  clipped=$(field "$WORK/ddp_$world.jsonl" grad_norm | awk '$1 > 0.5 { n++ } END { print n + 0 }')
  [[ $clipped -ge 10 ]] || fail "clipping was active in only $clipped of 20 steps"
  for strategy in zero1 zero2; do
    run $strategy $world
    paste <(field "$WORK/ddp_$world.jsonl" loss) <(field "$WORK/${strategy}_$world.jsonl" loss) |
      awk -v what="$strategy W=$world" '
        { n++; d = $1 - $2; if (d < 0) d = -d; if (d > worst) worst = d }
        END { printf "equivalence: %s vs ddp, %d steps, worst loss difference %.2e\n", what, n, worst;
              exit !(n == 20 && worst <= 1e-5) }' ||
      fail "$strategy at W=$world does not reproduce DDP's losses"
  done

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

# A peer that dies mid-run under zero2: the survivor fails within the timeout instead of hanging.
port=$((port + 2))
long=("${common[@]}" --max-steps 100000 --dist-timeout 10 --strategy zero2)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$HPCTRAIN" train "${long[@]}" >"$WORK/d0.log" 2>&1 &
pid0=$!
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$HPCTRAIN" train "${long[@]}" >"$WORK/d1.log" 2>&1 &
pid1=$!
for _ in $(seq 100); do grep -q "^step     3 " "$WORK/d0.log" && break; sleep 0.2; done
kill -9 $pid1
wait $pid1 2>/dev/null || true
start=$SECONDS
rc=0
timeout 60 tail --pid=$pid0 -f /dev/null || { kill -9 $pid0; fail "zero2: rank 0 hung after its peer died"; }
wait $pid0 || rc=$?
[[ $rc -ne 0 ]] || fail "zero2: rank 0 exited 0 after its peer died"
echo "dead peer: zero2 rank 0 exited with status $rc after $((SECONDS - start)) s: $(tail -n1 "$WORK/d0.log")"
