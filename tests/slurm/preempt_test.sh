#!/usr/bin/env bash
# preempt_test.sh CASE HPCLAUNCH HPCTRAIN: preemption and dead peers on the real test cluster
# (tests/cluster's slurm_cluster fixture; SLURM_CONF comes from CTest). The real hpctrain trains a
# tiny GPT on CPU with Gloo under `--strategy ddp` (fsdp for requeue_fsdp), 2 nodes x 1 rank (preset 2n2g with
# shape.gpus_per_node=1), launched by `hpclaunch run`, which follows the job to its end.
#   requeue    an uninterrupted run gives the final loss L; the same run sent
#              `scancel --signal=USR1 --batch` after its first steps checkpoints, exits 75,
#              requeues itself (Restarts=1), resumes from the checkpoint and ends with L (to
#              1e-6, every step's loss too); `hpclaunch run` follows it through the requeue and
#              exits 0; `hpclaunch status` shows "requeues 1 of at most 3"
#   requeue_fsdp  the same under --strategy fsdp (300 steps): each rank writes its shard of the
#              checkpoint, the requeued ranks load theirs
#   preempt    the same, stopped by real preemption: a job in the test cluster's "urgent"
#              partition (PriorityTier 10) preempts it (debug: PreemptMode=REQUEUE, GraceTime=60),
#              Slurm sends TERM to its tasks (not to the batch shell, not to srun), hpctrain
#              checkpoints and writes the requeue marker, the script requeues the job
#   term       the same after `scancel --signal=TERM JOBID` (TERM to the steps' tasks)
#   usr2       the same with job.signal=USR2 (#SBATCH --signal=B:USR2@90), USR2 to the batch shell
#   marker     launch srun, a bash program: after USR1 rank 0 writes the marker and every task
#              exits 3 (not 75): the job requeues, the restarted run exits 0, COMPLETED, Restarts=1
#   no_marker  launch srun: every task exits 75 after USR1 but none writes the marker: no
#              requeue, FAILED 75:0, the script says why
#   bound      job.max_requeues=0: after USR1 the trainer stops with 75, the script does not
#              requeue and says why, the job is FAILED with 75 and hpclaunch says the requeue
#              did not happen
#   dead_rank  rank 1's hpctrain is killed (kill -9, found by its SLURM_PROCID among the
#              processes of the job): the job is FAILED within 60 s and hpclaunch names rank 1
#   dead_rank0 the same for rank 0 (it serves the rendezvous store)
# Tests use only --checkpoint-dir and --resume (never checkpoint file names).
set -euo pipefail
case_name=$1 hpclaunch=$2 hpctrain=$3
: "${SLURM_CONF:?run me through ctest (the slurm_cluster fixture sets SLURM_CONF)}"
# job_field, wait_state, submitted_id, wait_submitted, begin_job_test, fail_showing
# shellcheck source-path=SCRIPTDIR source=job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
begin_job_test preempt
fail() { fail_showing 30 "$*" "$work"/*.err; }

for i in $(seq 1 400); do
  echo "line $i: the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs."
done >"$work/corpus.txt"

# hpclaunch run with the trainer's arguments after ours (and launcher_args before them).
launcher_args=()
strategy=ddp
run_job() {  # TAG MAX_STEPS [more trainer args]
  local tag=$1 steps=$2
  shift 2
  "$hpclaunch" run --no-project --preset 2n2g --strategy "$strategy" "${launcher_args[@]}" \
    --set shape.gpus_per_node=1 --set shape.cpus_per_gpu=1 --set "job.name=$name" \
    --set "trainer.program=$hpctrain" -- \
    --data "$work/corpus.txt" --data-format text --model tiny --micro-batch 4 --seq-len 64 \
    --total-batch-tokens 512 --warmup-steps 3 --decay-steps 600 --max-lr 3e-3 --eval-every 0 \
    --seed 9 --threads 1 --log-every 10 --max-steps "$steps" --checkpoint-dir "$work/ck-$tag" "$@"
}

# Step lines in the run's metrics file (written by rank 0 into the run directory).
metrics_of() { echo "$work/runs/$name-$1/metrics.jsonl"; }
step_count() { if [[ -f $1 ]]; then grep -c '"loss"' "$1" || true; else echo 0; fi; }
# "step loss" per step (the last line of a step wins), sorted by step. Keys come in any order.
losses() {
  awk '{ if (!match($0, /"step": *[0-9]+/)) next; st = $0; sub(/.*"step": */, "", st); sub(/[^0-9].*/, "", st)
         if (!match($0, /"loss": *[^,}]+/)) next; lo = substr($0, RSTART, RLENGTH); sub(/"loss": */, "", lo)
         l[st + 0] = lo } END { for (k in l) print k, l[k] }' "$1" | sort -n
}

case "$case_name" in
  requeue | requeue_fsdp | preempt | term | usr2)
    steps=600  # ~10 s: time to see the first steps and signal the job before it ends
    if [[ $case_name == requeue_fsdp ]]; then
      strategy=fsdp steps=300  # fsdp's many small collectives make a tiny model's step ~3x longer
    fi
    stopped_by=SIGUSR1
    case $case_name in
      preempt | term) stopped_by=SIGTERM ;;
      usr2) stopped_by=SIGUSR2 launcher_args=(--set job.signal=USR2) ;;
    esac
    # (a) uninterrupted
    run_job full $steps 2>"$work/full.err" >"$work/full.out" || fail "uninterrupted run exited with $?"
    full_id=$(submitted_id "$work/full.err")
    [[ $(job_field "$full_id" JobState) == COMPLETED ]] || fail "uninterrupted job not COMPLETED"
    losses "$(metrics_of "$full_id")" >"$work/full.losses"
    [[ $(wc -l <"$work/full.losses") -eq $steps ]] || fail "uninterrupted run: $(wc -l <"$work/full.losses") steps, not $steps"

    # (b) the same run, USR1 to the batch shell after its first steps
    run_job split $steps 2>"$work/split.err" >"$work/split.out" &
    follower=$!
    job=$(wait_submitted "$work/split.err") || fail "no job submitted"
    m=$(metrics_of "$job")
    for _ in $(seq 600); do (($(step_count "$m") >= 5)) && break; sleep 0.1; done
    (($(step_count "$m") >= 5)) || fail "the job did not reach step 5"
    case $case_name in
      preempt)  # a job of the higher tier wants both nodes: Slurm preempts this one
        sbatch --parsable --partition=urgent --exclusive --nodes=2 --job-name "$name" \
          --output=/dev/null --wrap true >"$work/urgent.id" || fail "urgent job not submitted"
        ;;
      term) scancel --signal=TERM "$job" ;;
      usr2) scancel --signal=USR2 --batch "$job" ;;
      *) scancel --signal=USR1 --batch "$job" ;;
    esac
    signalled_at=$(step_count "$m")
    # The script requeues the job; it waits for BeginTime (cred_expire, 120 s by default). Let it
    # start sooner, but not in the second slurmd revoked its credential (it refuses one made then
    # or earlier): PENDING, no longer COMPLETING, says the nodes did; then the next second.
    [[ $(wait_state "$job" 60 PENDING) == PENDING ]] || fail "job $job not PENDING after $stopped_by ($(job_field "$job" JobState))"
    pending_at=$(date +%s)
    [[ $(job_field "$job" Restarts) == 1 ]] || fail "Restarts=$(job_field "$job" Restarts), not 1"
    while (($(date +%s) <= pending_at)); do sleep 0.05; done
    for _ in $(seq 20); do scontrol update "JobId=$job" StartTime=now 2>/dev/null && break; sleep 0.25; done
    rc=0
    wait "$follower" || rc=$?
    follower=
    [[ $rc -eq 0 ]] || fail "hpclaunch run exited $rc after the requeue"
    [[ $(job_field "$job" JobState) == COMPLETED ]] || fail "job $job $(job_field "$job" JobState), not COMPLETED"
    [[ $(job_field "$job" Restarts) == 1 ]] || fail "Restarts changed again"
    grep -q "job $job REQUEUED (restart 1 of at most 3).*; following the same job $job" "$work/split.err" ||
      fail "follow did not say it follows the requeued job"
    grep -q "job $job COMPLETED with exit code 0" "$work/split.err" || fail "no COMPLETED line"
    grep -q "$stopped_by: stopping (exit 75)" "$work/split.out" || fail "the trainer did not stop for a requeue after $stopped_by"
    grep -q "requeue marker: restart=0 step=" "$work/split.err" "$work/split.out" || fail "the script did not read the marker"
    if [[ $case_name == preempt ]]; then
      urgent=$(cat "$work/urgent.id")
      [[ $(wait_state "$urgent" 60 COMPLETED) == COMPLETED ]] || fail "the preempting job $urgent did not run"
    fi
    grep -q "requeueing job $job (restart 1 of at most 3)" "$work/split.err" "$work/split.out" ||
      fail "the script did not say it requeues"
    grep -q "resumed from " "$work/split.out" || fail "the requeued run did not resume from a checkpoint"
    # The run record has one file per start of the job (docs/records.md).
    record="$work/runs/$name-$job/record"
    [[ -f $record/restart-0.json && -f $record/restart-1.json ]] || fail "no record of both starts in $record"
    grep -q '"restart": 1,' "$record/restart-1.json" || fail "$record/restart-1.json: $(cat "$record/restart-1.json")"
    losses "$m" >"$work/split.losses"
    [[ $(wc -l <"$work/split.losses") -eq $steps ]] || fail "interrupted run: $(wc -l <"$work/split.losses") steps, not $steps"
    paste "$work/full.losses" "$work/split.losses" | awk '
      { d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-6) { print "step " $1 ": " $2 " vs " $4; bad = 1 } }
      END { exit bad }' >&2 || fail "losses differ"
    status=$("$hpclaunch" status "$job" 2>&1) || fail "hpclaunch status exited $?: $status"
    grep -q "^requeues 1 of at most 3 (job.max_requeues)" <<<"$status" || fail "status: $status"
    grep -q "world 2 ($strategy)" "$work/split.out" || fail "the job did not run $strategy"
    echo "$case_name: $strategy, $stopped_by after step $signalled_at, Restarts=1, final loss $(tail -n 1 "$work/split.losses" | cut -d' ' -f2) = $(tail -n 1 "$work/full.losses" | cut -d' ' -f2), all $steps losses equal to 1e-6"
    ;;
  bound)
    launcher_args=(--set job.max_requeues=0)
    run_job bound 600 2>"$work/bound.err" >"$work/bound.out" &
    follower=$!
    job=$(wait_submitted "$work/bound.err") || fail "no job submitted"
    m=$(metrics_of "$job")
    for _ in $(seq 600); do (($(step_count "$m") >= 5)) && break; sleep 0.1; done
    (($(step_count "$m") >= 5)) || fail "the job did not reach step 5"
    scancel --signal=USR1 --batch "$job"
    rc=0
    wait "$follower" || rc=$?
    follower=
    [[ $rc -eq 75 ]] || fail "hpclaunch run exited $rc, not 75"
    [[ $(job_field "$job" JobState) == FAILED ]] || fail "job $job $(job_field "$job" JobState), not FAILED"
    [[ $(job_field "$job" ExitCode) == 75:0 ]] || fail "ExitCode=$(job_field "$job" ExitCode), not 75:0"
    [[ $(job_field "$job" Restarts) == 0 ]] || fail "the job was requeued"
    grep -q "requeued 0 time(s) already (job.max_requeues = 0)" "$work/bound.out" ||
      fail "the script did not say why it does not requeue"
    grep -q "job $job FAILED with exit code 75.*stopped for a requeue (exit 75) that did not happen" "$work/bound.err" ||
      fail "hpclaunch did not say the requeue did not happen"
    echo "bound: max_requeues=0: FAILED 75:0, no requeue, both the script and hpclaunch say why"
    ;;
  dead_rank | dead_rank0)
    victim_rank=1 victim_node=node02
    [[ $case_name == dead_rank0 ]] && victim_rank=0 victim_node=node01
    run_job dead 100000 2>"$work/dead.err" >"$work/dead.out" &
    follower=$!
    job=$(wait_submitted "$work/dead.err") || fail "no job submitted"
    m=$(metrics_of "$job")
    for _ in $(seq 600); do (($(step_count "$m") >= 3)) && break; sleep 0.1; done
    (($(step_count "$m") >= 3)) || fail "the job did not reach step 3"
    # The rank's hpctrain: the test cluster's nodes share this machine's process table.
    victim=
    for p in $(pgrep -f -- "$hpctrain train"); do
      env_of=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
      grep -qx "SLURM_JOB_ID=$job" <<<"$env_of" && grep -qx "SLURM_PROCID=$victim_rank" <<<"$env_of" && victim=$p
    done
    [[ -n $victim ]] || fail "rank $victim_rank's hpctrain of job $job not found"
    kill -9 "$victim"
    killed_at=$(date +%s.%N)
    s=$(wait_state "$job" 90 FAILED COMPLETED CANCELLED TIMEOUT) || true
    ended_at=$(date +%s.%N)
    [[ $s == FAILED ]] || fail "job $job is $s after rank $victim_rank was killed, not FAILED"
    seconds=$(awk -v a="$killed_at" -v b="$ended_at" 'BEGIN { printf "%.1f", b - a }')
    awk -v s="$seconds" 'BEGIN { exit !(s < 60) }' || fail "FAILED only after $seconds s"
    rc=0
    wait "$follower" || rc=$?
    follower=
    [[ $rc -ne 0 ]] || fail "hpclaunch run exited 0 for a failed job"
    grep -q "job $job FAILED" "$work/dead.err" || fail "no FAILED line"
    named="rank $victim_rank on $victim_node failed first (Killed)"
    grep -qF "$named" "$work/dead.err" || fail "hpclaunch did not name rank $victim_rank"
    echo "$case_name: rank $victim_rank killed; job FAILED $seconds s later (hpclaunch exit $rc): $named"
    ;;
  marker | no_marker)
    # A user's program under launch srun (docs/programs.md#requeue), in bash.
    cat >"$work/program.sh" <<'PROGRAM'
if ((${SLURM_RESTART_COUNT:-0} >= 1)); then echo "rank $SLURM_PROCID resumed"; exit 0; fi
stop=0
trap 'stop=1' USR1 TERM
while ((!stop)); do sleep 0.1; done
if [[ $MODE == marker && $SLURM_PROCID == 0 ]]; then
  echo "restart=${SLURM_RESTART_COUNT:-0}" >"$HPCLAUNCH_REQUEUE_MARKER.tmp"
  mv "$HPCLAUNCH_REQUEUE_MARKER.tmp" "$HPCLAUNCH_REQUEUE_MARKER"
fi
sleep 1  # every rank past the marker before the first exit ends the step
if [[ $MODE == marker ]]; then exit 3; fi
exit 75
PROGRAM
    MODE=$case_name "$hpclaunch" run --no-project --preset 2n2g --launch srun \
      --set shape.gpus_per_node=1 --set shape.cpus_per_gpu=1 --set "job.name=$name" \
      -- bash "$work/program.sh" 2>"$work/$case_name.err" >"$work/$case_name.out" &
    follower=$!
    job=$(wait_submitted "$work/$case_name.err") || fail "no job submitted"
    [[ $(wait_state "$job" 60 RUNNING) == RUNNING ]] || fail "job $job not RUNNING"
    sleep 2
    scancel --signal=USR1 --batch "$job"
    if [[ $case_name == marker ]]; then
      [[ $(wait_state "$job" 60 PENDING) == PENDING ]] || fail "job $job not PENDING after USR1"
      pending_at=$(date +%s)
      while (($(date +%s) <= pending_at)); do sleep 0.05; done
      for _ in $(seq 20); do scontrol update "JobId=$job" StartTime=now 2>/dev/null && break; sleep 0.25; done
    fi
    rc=0
    wait "$follower" || rc=$?
    follower=
    log="$work/$case_name.out"
    if [[ $case_name == marker ]]; then
      [[ $rc -eq 0 ]] || fail "hpclaunch run exited $rc"
      [[ $(job_field "$job" JobState) == COMPLETED ]] || fail "job $job $(job_field "$job" JobState), not COMPLETED"
      [[ $(job_field "$job" Restarts) == 1 ]] || fail "Restarts=$(job_field "$job" Restarts), not 1"
      grep -q "requeue marker: restart=0 (tasks ended with status 3)" "$log" || fail "the script did not requeue on the marker"
      grep -q "rank 0 resumed" "$log" || fail "the requeued program did not run"
      echo "marker: tasks exited 3 after USR1, rank 0 wrote the marker: requeued (Restarts=1), COMPLETED"
    else
      [[ $rc -eq 75 ]] || fail "hpclaunch run exited $rc, not 75"
      [[ $(job_field "$job" JobState) == FAILED ]] || fail "job $job $(job_field "$job" JobState), not FAILED"
      [[ $(job_field "$job" ExitCode) == 75:0 ]] || fail "ExitCode=$(job_field "$job" ExitCode), not 75:0"
      [[ $(job_field "$job" Restarts) == 0 ]] || fail "the job was requeued"
      grep -q "USR1: the tasks ended with status 75 and wrote no requeue marker for restart 0" "$log" ||
        fail "the script did not say why it does not requeue"
      echo "no_marker: tasks exited 75 without a marker: no requeue, FAILED 75:0, the script says why"
    fi
    ;;
  *) echo "usage: $0 requeue|requeue_fsdp|preempt|term|usr2|marker|no_marker|bound|dead_rank|dead_rank0 HPCLAUNCH HPCTRAIN" >&2; exit 2 ;;
esac
