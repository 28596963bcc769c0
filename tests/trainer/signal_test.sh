#!/usr/bin/env bash
# SIGUSR1 (what the batch script forwards before the time limit) or SIGTERM (Slurm's preemption,
# scancel, time limit): hpctrain finishes the step, writes a checkpoint, exits 75 (stopped for a
# requeue); the requeued job (SLURM_RESTART_COUNT=1, no --resume flag) resumes from it, and the
# losses of stop + resume equal those of an uninterrupted run. Under DDP a signal seen by one
# rank only stops both at the same step.
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
common=(--data "$WORK/data/corpus_train.txt" --model tiny --micro-batch 2 --seq-len 32
        --total-batch-tokens 128 --warmup-steps 3 --decay-steps 40 --max-lr 3e-3 --eval-every 0
        --seed 9 --threads 1 --max-steps 40)

wait_for_step() {  # LOG STEP PID
  local i
  for i in $(seq 300); do
    grep -q "^step *$2 |" "$1" && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

"$HPCTRAIN" train "${common[@]}" --metrics "$WORK/full.jsonl" >"$WORK/full.log"

env -u SLURM_RESTART_COUNT "$HPCTRAIN" train "${common[@]}" --metrics "$WORK/split.jsonl" \
  --checkpoint-dir "$WORK/ck" >"$WORK/a.log" 2>&1 &
pid=$!
wait_for_step "$WORK/a.log" 3 $pid || fail "run did not reach step 3: $(cat "$WORK/a.log")"
kill -USR1 $pid
rc=0
wait $pid || rc=$?
[[ $rc -eq 75 ]] || fail "exit status $rc after SIGUSR1, not 75: $(tail -n 3 "$WORK/a.log")"
grep -q "SIGUSR1: stopping (exit 75)" "$WORK/a.log" || fail "no stop line: $(tail -n 3 "$WORK/a.log")"
stopped=$(losses "$WORK/split.jsonl" | wc -l)
[[ $stopped -lt 40 ]] || fail "the run did not stop early"
SLURM_RESTART_COUNT=1 "$HPCTRAIN" train "${common[@]}" --metrics "$WORK/split.jsonl" \
  --checkpoint-dir "$WORK/ck" >"$WORK/b.log"
grep -q "resumed from .* at step $stopped" "$WORK/b.log" || fail "requeued run did not resume: $(head -n 3 "$WORK/b.log")"
diff <(losses "$WORK/full.jsonl") <(losses "$WORK/split.jsonl") >/dev/null ||
  fail "stop + resume changed the losses"
echo "signal: stopped after $stopped steps, resumed under SLURM_RESTART_COUNT=1, 40 losses identical"

# SIGTERM: the same stop, named as such; the requeued run resumes from its checkpoint.
env -u SLURM_RESTART_COUNT "$HPCTRAIN" train "${common[@]}" --checkpoint-dir "$WORK/term" \
  >"$WORK/t.log" 2>&1 &
pid=$!
wait_for_step "$WORK/t.log" 3 $pid || fail "run did not reach step 3: $(cat "$WORK/t.log")"
kill -TERM $pid
rc=0
wait $pid || rc=$?
[[ $rc -eq 75 ]] || fail "exit status $rc after SIGTERM, not 75: $(tail -n 3 "$WORK/t.log")"
grep -q "SIGTERM: stopping (exit 75)" "$WORK/t.log" || fail "no SIGTERM stop line: $(tail -n 3 "$WORK/t.log")"
SLURM_RESTART_COUNT=1 "$HPCTRAIN" train "${common[@]}" --checkpoint-dir "$WORK/term" >"$WORK/t2.log"
grep -q "resumed from " "$WORK/t2.log" || fail "no resume after SIGTERM: $(head -n 3 "$WORK/t2.log")"
echo "signal: SIGTERM stopped with 75 and the rerun resumed"

# SIGUSR2 (job.signal=USR2): the same stop; rank 0 writes the requeue marker the batch script
# reads, whole, after the checkpoint: "restart=N step=S checkpoint=DIR" (N: SLURM_RESTART_COUNT).
for restart in 0 2; do
  # The last round's log goes first: its "step 3" line would otherwise be read before the new
  # process truncates the file, and the signal would reach it before its handler is installed.
  rm -f "$WORK/marker" "$WORK/u.log"
  restart_env=(-u SLURM_RESTART_COUNT)  # unset: restart=0; 2: a run after two requeues
  ((restart == 0)) || restart_env=("SLURM_RESTART_COUNT=$restart")
  env "${restart_env[@]}" HPCLAUNCH_REQUEUE_MARKER="$WORK/marker" "$HPCTRAIN" train "${common[@]}" \
    --checkpoint-dir "$WORK/usr2-$restart" >"$WORK/u.log" 2>&1 &
  pid=$!
  wait_for_step "$WORK/u.log" 3 $pid || fail "run did not reach step 3: $(cat "$WORK/u.log")"
  kill -USR2 $pid
  rc=0
  wait $pid || rc=$?
  [[ $rc -eq 75 ]] || fail "exit status $rc after SIGUSR2, not 75: $(tail -n 3 "$WORK/u.log")"
  grep -q "SIGUSR2: stopping (exit 75)" "$WORK/u.log" || fail "no SIGUSR2 stop line: $(tail -n 3 "$WORK/u.log")"
  marker=$(cat "$WORK/marker") || fail "no requeue marker after SIGUSR2"
  [[ $marker =~ ^restart=$restart\ step=([0-9]+)\ checkpoint=(.*)$ ]] || fail "marker: '$marker'"
  [[ -f ${BASH_REMATCH[2]}/manifest.json ]] || fail "the marker's checkpoint ${BASH_REMATCH[2]} is not whole"
  if compgen -G "$WORK/marker?*" >/dev/null; then fail "a temporary marker file was left"; fi
done
echo "signal: SIGUSR2 stopped with 75 and wrote the marker ($marker)"


# DDP: only rank 1 gets the signal; both stop after the same step.
next_port
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$HPCTRAIN" train "${common[@]}" --strategy ddp --checkpoint-dir "$WORK/ddp" \
    --total-batch-tokens 256 --log-every 1 >"$WORK/d$r.log" 2>&1 &
  pids[$r]=$!
done
wait_for_step "$WORK/d0.log" 3 "${pids[0]}" || fail "DDP run did not reach step 3: $(cat "$WORK"/d*.log)"
kill -USR1 "${pids[1]}"
for r in 0 1; do
  rc=0
  wait "${pids[$r]}" || rc=$?
  [[ $rc -eq 75 ]] || fail "rank $r exited $rc after SIGUSR1, not 75: $(tail -n 2 "$WORK/d$r.log")"
done
grep -q "SIGUSR1: stopping" "$WORK/d0.log" || fail "rank 0 did not stop: $(tail -n 2 "$WORK/d0.log")"
grep -q "| checkpoint " "$WORK/d0.log" || fail "no DDP checkpoint: $(tail -n 2 "$WORK/d0.log")"
ls "$WORK/ddp"/step_*/rank00001.safetensors >/dev/null || fail "no DDP checkpoint with both ranks' files"
echo "signal: DDP ranks stopped together at $(grep -o 'checkpoint .*' "$WORK/d0.log" | tail -n 1)"
