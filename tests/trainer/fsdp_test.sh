#!/usr/bin/env bash
# FSDP (full shard, ZeRO-3) on Gloo, 2 and 4 processes on this machine:
#  1. equivalence: 20 steps of fsdp give DDP's losses to 1e-5 at W=2 (accumulation 4) and W=4
#     (accumulation 2), with clipping active (--grad-clip 0.5 below most steps' norm). n_embd 66 and
#     block size 63 make every unit's size indivisible by 4: W=4 pads the shards;
#  2. memory: per rank, fsdp holds at most 1/W + 5% of DDP's persistent model state (parameters,
#     gradients, AdamW moments: 16 bytes per parameter) between steps;
#  3. validation and samples (a forward pass on every rank, units gathered) match DDP's;
#  4. --dump-grads is refused with one line (only a shard of the gradients exists);
#  5. a dead peer ends the survivor with an error naming fsdp's collective, not a hang;
#  6. the log names the collectives: all-reduce + slice and one all-gather into a tensor on
#     LibTorch 2.x's Gloo (its reduce-scatter is an all-reduce of a copy: communicator.cc),
#     all-reduce + slice and a list gather on 1.13's.
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
next_port
common=(--data "$WORK/data/corpus_train.txt" --model tiny --n-embd 66 --block-size 63
        --micro-batch 2 --seq-len 32 --total-batch-tokens 512 --max-steps 20 --warmup-steps 3
        --max-lr 3e-3 --grad-clip 0.5 --seed 3 --threads 1 --dist-timeout 30
        --val-data "$WORK/data/corpus_val.txt" --eval-every 10 --val-batches 2 --sample-every 10
        --sample-tokens 16)

steps() { grep '"tokens_per_s"' "$1"; }  # step lines only
held() { local last; last=$(steps "$1" | tail -n1)
         echo $(field <(echo "$last") param_bytes) $(field <(echo "$last") grad_bytes) \
              $(field <(echo "$last") optimizer_bytes); }

# The collectives fsdp's log names: LibTorch 2.x's Gloo gathers into one tensor; 1.13's Gloo
# into a list; both reduce by all-reduce + slice.
if "$HPCTRAIN" --version | grep -q '^LibTorch 1\.'; then
  want_collectives="all-reduce then this rank's slice, all-gather into a list"
else
  want_collectives="all-reduce then this rank's slice, all-gather into one tensor"
fi
for world in 2 4; do
  run_strategy ddp $world
  run_strategy fsdp $world
  grep -qF "units, each gathered and its gradients reduced by $want_collectives" \
    "$WORK/fsdp_${world}_0.log" ||
    fail "fsdp W=$world: expected '$want_collectives' in: $(grep '^fsdp:' "$WORK/fsdp_${world}_0.log")"
  clipped=$(field <(steps "$WORK/ddp_$world.jsonl") grad_norm | awk '$1 > 0.5 { n++ } END { print n + 0 }')
  [[ $clipped -ge 10 ]] || fail "clipping was active in only $clipped of 20 steps"
  paste <(field <(steps "$WORK/ddp_$world.jsonl") loss) <(field <(steps "$WORK/fsdp_$world.jsonl") loss) |
    awk -v what="fsdp W=$world" '
      { n++; d = $1 - $2; if (d < 0) d = -d; if (d > worst) worst = d }
      END { printf "equivalence: %s vs ddp, %d steps, worst loss difference %.2e\n", what, n, worst;
            exit !(n == 20 && worst <= 1e-5) }' ||
    fail "fsdp at W=$world does not reproduce DDP's losses"
  # Validation losses (steps 0, 10, 19) agree too.
  paste <(field "$WORK/ddp_$world.jsonl" val_loss) <(field "$WORK/fsdp_$world.jsonl" val_loss) |
    awk '{ n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5) bad++ } END { exit !(n == 3 && !bad) }' ||
    fail "fsdp W=$world: validation losses differ from ddp's"
  # Samples: the same text as DDP's (rank 0 prints; every rank computed).
  diff <(grep "sample:" "$WORK/ddp_${world}_0.log") <(grep "sample:" "$WORK/fsdp_${world}_0.log") ||
    fail "fsdp W=$world: samples differ from ddp's"
  [[ $(grep -c "sample:" "$WORK/fsdp_${world}_0.log") -eq 2 ]] || fail "fsdp W=$world: expected 2 samples"

  # Memory after the last step, rank 0 (every rank's shards have the same size).
  read -r p_ddp g_ddp o_ddp <<<"$(held "$WORK/ddp_$world.jsonl")"
  read -r p g o <<<"$(held "$WORK/fsdp_$world.jsonl")"
  model=$((4 * p_ddp))  # DDP's parameters, gradients and two moments, 4 bytes each
  ddp_all=$((p_ddp + g_ddp + o_ddp))
  fsdp_all=$((p + g + o))
  awk -v f="$fsdp_all" -v m="$model" -v w="$world" -v d="$ddp_all" -v what="fsdp W=$world" '
    BEGIN { printf "memory: %s holds %d bytes = %.4f of ddp model state %d (1/%d = %.4f); ddp holds %d with its buckets\n",
                   what, f, f / m, m, w, 1 / w, d; exit !(f <= m * (1 / w + 0.05)) }' ||
    fail "fsdp W=$world holds more than 1/$world + 5% of DDP's model state"
  (( o * world <= o_ddp + 2 * 4 * world * 32 )) || fail "fsdp W=$world: optimiser state $o is not 1/$world of $o_ddp"
done

# Only a shard of the gradients exists: --dump-grads is refused before anything starts.
rc=0
next_port
RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$HPCTRAIN" train "${common[@]}" \
  --strategy fsdp --dump-grads "$WORK/g.safetensors" >"$WORK/dg.out" 2>"$WORK/dg.err" || rc=$?
[[ $rc -eq 2 && $(wc -l <"$WORK/dg.err") -eq 1 && ! -e $WORK/g.safetensors ]] && grep -q "fsdp keeps only a shard" "$WORK/dg.err" ||
  fail "fsdp with --dump-grads: status $rc, stderr: $(cat "$WORK/dg.err")"
echo "fsdp --dump-grads: refused with one line"

# A peer that dies mid-run: the survivor fails within the timeout instead of hanging.
dead_peer_check fsdp --strategy fsdp --eval-every 0 --sample-every 0
# Which collective rank 0 is in when rank 1 dies is a race: one of fsdp's gathers/reductions, or
# the loss all-reduce at the end of the step (when rank 1 died after the step's last reduction).
grep -qE "(fsdp .*|loss all-reduce) failed, a peer died" "$WORK/d0.log" ||
  fail "fsdp: no clear message: $(tail -n2 "$WORK/d0.log")"
