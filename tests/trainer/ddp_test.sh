#!/usr/bin/env bash
# DDP on Gloo, two processes on this machine:
#  1. equivalence: 2 ranks x micro-batch 2 x accumulation 2 == 1 process x micro-batch 2 x
#     accumulation 4, same losses over 10 steps to 1e-5 (fp32, CPU);
#  2. a dead peer ends the job with an error, not a hang.
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
next_port
common=(--data "$WORK/data/corpus_train.txt" --model tiny --micro-batch 2 --seq-len 32
        --total-batch-tokens 256 --max-steps 10 --warmup-steps 3 --max-lr 3e-3 --eval-every 0
        --seed 3 --threads 1 --dist-timeout 20)

"$HPCTRAIN" train "${common[@]}" --metrics "$WORK/one.jsonl" >"$WORK/one.log"

launch() {  # RANK WORLD PORT ARGS... (background)
  local rank=$1 world=$2 p=$3
  shift 3
  RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$p \
    "$HPCTRAIN" train "$@" &
}
launch 0 2 "$port" "${common[@]}" --strategy ddp --metrics "$WORK/two.jsonl" >"$WORK/r0.log" 2>&1
pid0=$!
launch 1 2 "$port" "${common[@]}" --strategy ddp >"$WORK/r1.log" 2>&1
pid1=$!
wait $pid0 || fail "rank 0 failed: $(cat "$WORK/r0.log")"
wait $pid1 || fail "rank 1 failed: $(cat "$WORK/r1.log")"
grep -q "world 2 (ddp)" "$WORK/r0.log" || fail "rank 0 did not run DDP: $(head -n1 "$WORK/r0.log")"
[[ ! -s "$WORK/r1.log" ]] || fail "rank 1 printed: $(cat "$WORK/r1.log")"
paste <(losses "$WORK/one.jsonl") <(losses "$WORK/two.jsonl") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > worst) worst = r }
  END { printf "equivalence: %d steps, worst relative loss difference %.2e\n", n, worst;
        exit !(n == 10 && worst <= 1e-5) }' || fail "DDP losses differ from the single process"

# DDP resume: 6 steps == 3 + resume + 3 on 2 ranks (every rank skips its own batches).
ddp_run() {  # TAG MAX_STEPS [args]
  local tag=$1 steps=$2
  shift 2
  next_port
  local pids=() r
  for r in 0 1; do
    launch $r 2 "$port" "${common[@]}" --strategy ddp --max-steps "$steps" "$@" \
      >"$WORK/$tag$r.log" 2>&1
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || fail "ddp run $tag failed: $(cat "$WORK/$tag"*.log)"; done
}
ddp_run full 6 --decay-steps 10 --metrics "$WORK/rfull.jsonl"
ddp_run half 3 --decay-steps 10 --metrics "$WORK/rsplit.jsonl" --checkpoint-every 3 --checkpoint-dir "$WORK/rck"
ddp_run rest 6 --decay-steps 10 --metrics "$WORK/rsplit.jsonl" --checkpoint-dir "$WORK/rck" --resume auto
diff <(losses "$WORK/rfull.jsonl") <(losses "$WORK/rsplit.jsonl") >/dev/null ||
  fail "DDP resume changed the losses"
echo "ddp resume: 6 steps == 3 + resume + 3 on 2 ranks"

# Slurm's variables instead of torchrun's: MASTER_ADDR from SLURM_JOB_NODELIST.
next_port
pids=()
for r in 0 1; do
  env -u RANK -u WORLD_SIZE SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r \
    SLURM_JOB_NODELIST=localhost MASTER_PORT=$port \
    "$HPCTRAIN" train "${common[@]}" --max-steps 2 --strategy ddp >"$WORK/slurm$r.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "the Slurm-variable run failed: $(cat "$WORK"/slurm*.log)"; done
grep -q "world 2 (ddp)" "$WORK/slurm0.log" || fail "no DDP under Slurm variables: $(cat "$WORK/slurm0.log")"
echo "slurm variables: 2 ranks met at localhost:$port"

# A peer that dies mid-run: the survivor must fail within the timeout, not hang.
dead_peer_check ddp --strategy ddp

# A peer that stops answering (SIGSTOP): the survivor's collective times out after --dist-timeout.
next_port
long=("${common[@]}" --max-steps 100000 --dist-timeout 5 --strategy ddp)
launch 0 2 "$port" "${long[@]}" >"$WORK/s0.log" 2>&1
pid0=$!
launch 1 2 "$port" "${long[@]}" >"$WORK/s1.log" 2>&1
pid1=$!
for _ in $(seq 100); do grep -q "^step     3 " "$WORK/s0.log" && break; sleep 0.2; done
kill -STOP $pid1
start=$SECONDS
rc=0
timeout 60 tail --pid=$pid0 -f /dev/null || { kill -9 $pid0 $pid1; fail "rank 0 hung on a stopped peer"; }
wait $pid0 || rc=$?
kill -9 $pid1
wait $pid1 2>/dev/null || true
[[ $rc -ne 0 ]] || fail "rank 0 exited 0 with a stopped peer"
echo "stopped peer: rank 0 exited with status $rc after $((SECONDS - start)) s: $(tail -n1 "$WORK/s0.log")"
