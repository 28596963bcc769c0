#!/usr/bin/env bash
# report_test.sh CASE HPCLAUNCH HPCTRAIN: `hpclaunch report RUN`, a job's goodput across requeues,
# from the timeline its batch script writes and hpctrain's metrics (docs/goodput.md).
#   requeue2  on the test cluster (fixture slurm_cluster; SLURM_CONF from CTest): the real
#             hpctrain, 2 nodes x 1 rank, gets `scancel --signal=USR1 --batch` twice (each time a
#             few steps after it started): it checkpoints and requeues itself twice, then
#             completes. The report says 3 runs, 2 requeues (USR1, USR1), completed; lost time
#             > 0 for each stop; every step once in the steps kept; tokens, goodput in (0, 1],
#             2 GPUs (the cluster's GPUs are declared in gres.conf); the plot as PNG and SVG;
#             the text and --json agree; the report by job id and by run directory; each
#             start's start-up phases (queue, environment, rendezvous, first step) measured.
#   preempt   the same, stopped once by real preemption (a job of the test cluster's "urgent"
#             partition wants both nodes; Slurm sends TERM to the tasks, not to the batch
#             script): 2 runs, the first ended by "TERM to the tasks (preemption ...)", requeued.
#   local     the local backend (no Slurm): hpctrain for 20 steps: 1 run, completed, CPU-hours
#             (no GPUs); and a program of one's own (launch srun, bash): the timeline's figures,
#             "no training steps" said; bad input: one line, exit 2, nothing written.
set -euo pipefail
case_name=$1 hpclaunch=$2 hpctrain=$3
# job_field, wait_state, submitted_id, begin_job_test, fail_showing
# shellcheck source-path=SCRIPTDIR source=job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
begin_job_test report
fail() { fail_showing 30 "$*" "$work"/*.err "$work"/*.out "$work"/runs/*/timeline.jsonl; }

for i in $(seq 1 400); do
  echo "line $i: the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs."
done >"$work/corpus.txt"
trainer_args=(--data "$work/corpus.txt" --data-format text --model tiny --micro-batch 4 --seq-len 64
  --total-batch-tokens 512 --warmup-steps 3 --decay-steps 600 --max-lr 3e-3 --eval-every 0
  --seed 9 --threads 1 --log-every 10 --checkpoint-dir "$work/ck")

# jfield EXPR: a Python expression over the report's JSON (r), printed; jtrue EXPR: its truth.
jfield() { python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$work/report.json" "$1"; }
jtrue() { [[ $(jfield "bool($1)") == True ]]; }
# The plot: a PNG (its signature) and an SVG (its root element) beside run.json.
check_plot() {  # RUN_DIR
  [[ $(head -c 8 "$1/goodput.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "no PNG at $1/goodput.png"
  grep -q '<svg' "$1/goodput.svg" || fail "no SVG at $1/goodput.svg"
  [[ -s $1/goodput.gp ]] || fail "no gnuplot script"
}

case "$case_name" in
  requeue2 | preempt)
    : "${SLURM_CONF:?run me through ctest (the slurm_cluster fixture sets SLURM_CONF)}"
    steps=600
    "$hpclaunch" run --no-project --preset 2n2g --strategy ddp \
      --set shape.gpus_per_node=1 --set shape.cpus_per_gpu=1 --set "job.name=$name" \
      --set "trainer.program=$hpctrain" -- "${trainer_args[@]}" --max-steps $steps \
      2>"$work/run.err" >"$work/run.out" &
    follower=$!
    job=$(wait_submitted "$work/run.err") || fail "no job submitted"
    run_dir="$work/runs/$name-$job"
    m="$run_dir/metrics.jsonl"
    step_count() { if [[ -f $m ]]; then grep -c '"loss"' "$m" || true; else echo 0; fi; }
    stops=(usr1 usr1)
    [[ $case_name == preempt ]] && stops=(preempt)
    restart=0
    for stop in "${stops[@]}"; do
      restart=$((restart + 1))
      # A few steps into this run: USR1 to the batch shell, or a job of the test cluster's
      # "urgent" partition that wants both nodes (Slurm sends TERM to the tasks): checkpoint,
      # marker, requeue.
      want=$(($(step_count) + 5))
      for _ in $(seq 600); do (($(step_count) >= want)) && break; sleep 0.1; done
      (($(step_count) >= want)) || fail "run $((restart - 1)) did not reach $want step lines"
      if [[ $stop == usr1 ]]; then
        scancel --signal=USR1 --batch "$job"
      else
        sbatch --parsable --partition=urgent --exclusive --nodes=2 --job-name "$name" \
          --output=/dev/null --wrap true >/dev/null || fail "urgent job not submitted"
      fi
      [[ $(wait_state "$job" 60 PENDING) == PENDING ]] || fail "job $job not PENDING after $stop ($(job_field "$job" JobState))"
      pending_at=$(date +%s)
      [[ $(job_field "$job" Restarts) == "$restart" ]] || fail "Restarts=$(job_field "$job" Restarts), not $restart"
      # BeginTime is cred_expire away: start it sooner, once the nodes let its credential go.
      while (($(date +%s) <= pending_at)); do sleep 0.05; done
      for _ in $(seq 20); do scontrol update "JobId=$job" StartTime=now 2>/dev/null && break; sleep 0.25; done
      [[ $(wait_state "$job" 60 RUNNING COMPLETED) != "?" ]] || fail "job $job did not start again"
    done
    rc=0
    wait "$follower" || rc=$?
    follower=
    [[ $rc -eq 0 ]] || fail "hpclaunch run exited $rc"
    [[ $(job_field "$job" JobState) == COMPLETED ]] || fail "job $job not COMPLETED"

    "$hpclaunch" report "$job" >"$work/report.txt" 2>"$work/report.err" || fail "report exited $?: $(cat "$work/report.err")"
    "$hpclaunch" report "$run_dir" --json >"$work/report.json" 2>"$work/report-json.err" || fail "report --json exited $?"
    cat "$work/report.txt"
    if [[ $case_name == preempt ]]; then
      [[ $(jfield "','.join(x['why'] for x in r['runs'])") == requeued,completed ]] || fail "why: $(jfield "[x['why'] for x in r['runs']]")"
      [[ $(jfield "r['runs'][0]['stop_signal']") == "" ]] || fail "preempted run 0 names a signal to the batch script"
      jtrue "r['runs'][0]['lost_s'] > 0 and r['runs'][1]['resume_step'] == r['runs'][0]['last_checkpoint_step'] + 1" ||
        fail "lost time or resume step"
      jtrue "r['tokens'] == $steps * 512 and 0 < r['goodput'] <= 1" || fail "tokens $(jfield "r['tokens']")"
      grep -q "run 0: TERM to the tasks (preemption, or scancel --signal=TERM); checkpoint after step [0-9]*, requeued" "$work/report.txt" ||
        fail "no preemption reason for run 0"
      check_plot "$run_dir"
      echo "preempt: job $job, 2 runs (preempted: TERM to the tasks, completed), lost $(jfield "r['lost_s']") s, goodput $(jfield "r['goodput']")"
      exit 0
    fi
    [[ $(jfield "r['requeues']") == 2 ]] || fail "requeues $(jfield "r['requeues']"), not 2"
    [[ $(jfield "len(r['runs'])") == 3 ]] || fail "not 3 runs"
    [[ $(jfield "','.join(x['why'] for x in r['runs'])") == requeued,requeued,completed ]] || fail "why: $(jfield "','.join(x['why'] for x in r['runs'])")"
    [[ $(jfield "','.join(x['stop_signal'] for x in r['runs'])") == USR1,USR1, ]] || fail "signals: $(jfield "','.join(x['stop_signal'] for x in r['runs'])")"
    [[ $(jfield "','.join(str(x['restart']) for x in r['runs'])") == 0,1,2 ]] || fail "restarts"
    jtrue "r['runs'][0]['lost_s'] > 0 and r['runs'][1]['lost_s'] > 0 and r['runs'][2]['lost_s'] == 0" ||
      fail "lost time: $(jfield "[x['lost_s'] for x in r['runs']]")"
    jtrue "all(r['runs'][i]['resume_step'] == r['runs'][i - 1]['last_checkpoint_step'] + 1 for i in (1, 2))" || fail "the resumed runs did not start after the stops' checkpoints"
    jtrue "r['runs'][2]['last_step'] == $steps - 1 and sum(x['steps'] for x in r['runs']) - r['redone_steps'] == $steps" ||
      fail "steps: $(jfield "[x['steps'] for x in r['runs']]"), redone $(jfield "r['redone_steps']")"
    jtrue "r['tokens'] == $steps * 512 and 0 < r['goodput'] <= 1 and r['tokens_per_device_hour'] > 0" ||
      fail "tokens $(jfield "r['tokens']"), goodput $(jfield "r['goodput']")"
    jtrue "r['device'] == 'gpu' and r['devices'] == 2 and r['checkpoints'] >= 2 and r['checkpoint_s'] > 0 and r['queue_wait_s'] >= 0" ||
      fail "device $(jfield "r['device']") x $(jfield "r['device']"s), checkpoints $(jfield "r['checkpoints']")"
    jtrue "r['runs'][1]['waited_s'] > 0 and r['runs'][2]['waited_s'] > 0 and r['runs'][0]['nodelist'] == 'node[01-02]'" ||
      fail "waits or node list"
    # The start-up of each of the 3 starts: queue (the requeue's pending time for 1 and 2), the
    # script's set-up, hpctrain's first collective ("hpctrain: model" line), its first step.
    jtrue "len(r['startup']) == 3 and all(s[k] is not None and s[k] >= 0 for s in r['startup'] for k in ('queue_s', 'environment_s', 'rendezvous_s', 'first_step_s'))" ||
      fail "start-up phases: $(jfield "r['startup']")"
    jtrue "all(s['started'] <= s['environment_ready'] <= s['rendezvous'] <= s['first_step'] for s in r['startup'])" ||
      fail "start-up phases out of order: $(jfield "r['startup']")"
    grep -q "^start-up, each start of the job (rendezvous: hpctrain's first collective):" "$work/report.txt" ||
      fail "no start-up table"
    grep -q "^Job $job ($name, hpctrain): 3 runs, 2 requeues" "$work/report.txt" || fail "no heading"
    grep -q "run 0: USR1 to the batch script" "$work/report.txt" || fail "no reason for run 0"
    grep -q "run 2: completed (exit 0)" "$work/report.txt" || fail "run 2 not completed"
    grep -q "^GPU-hours charged  " "$work/report.txt" || fail "no GPU-hours"
    goodput=$(jfield "r['goodput']")
    grep -q "^goodput            $(awk -v g="$goodput" 'BEGIN { printf "%.1f", 100 * g }')%" "$work/report.txt" ||
      fail "text and JSON disagree on goodput ($goodput)"
    check_plot "$run_dir"
    # REPORT_TEST_KEEP=DIR keeps a copy of the run directory (docs/img's plot comes from one).
    [[ -z ${REPORT_TEST_KEEP:-} ]] || cp -r "$run_dir" "$REPORT_TEST_KEEP"
    echo "requeue2: job $job, 3 runs (USR1, USR1, completed), lost $(jfield "r['lost_s']") s, goodput $goodput, $(jfield "r['tokens']") tokens"
    ;;
  local)
    # hpctrain for 20 steps on the local backend: one run, no GPUs.
    "$hpclaunch" run --no-project --local --preset 1n1g --strategy ddp --set "job.name=$name" \
      --set "trainer.program=$hpctrain" -- "${trainer_args[@]}" --max-steps 20 --checkpoint-every 10 \
      2>"$work/run.err" >"$work/run.out" || fail "local run exited $?"
    job=$(sed -n 's/.*submitted job \([0-9]*\).*/\1/p' "$work/run.err" | head -n 1)
    [[ -n $job ]] || fail "no job id"
    "$hpclaunch" report "$job" --json >"$work/report.json" 2>"$work/report.err" || fail "report exited $?: $(cat "$work/report.err")"
    jtrue "r['requeues'] == 0 and r['runs'][0]['why'] == 'completed' and r['device'] == 'cpu' and r['runs'][0]['steps'] == 20 and r['checkpoints'] == 2" ||
      fail "local hpctrain: $(cat "$work/report.json")"
    jtrue "r['tokens'] == 20 * 512 and 0 < r['goodput'] <= 1 and r['runs'][0]['lost_s'] == 0" ||
      fail "local hpctrain figures: $(cat "$work/report.json")"
    "$hpclaunch" report "$job" >"$work/report.txt" 2>/dev/null || fail "text report exited $?"
    grep -q "^CPU-hours charged  " "$work/report.txt" || fail "no CPU-hours: $(cat "$work/report.txt")"
    jtrue "all(r['startup'][0][k] is not None for k in ('environment_s', 'rendezvous_s', 'first_step_s'))" ||
      fail "local hpctrain start-up: $(jfield "r['startup']")"
    check_plot "$work/runs/$name-$job"
    cat "$work/report.txt"
    # --plot PATH: the plot elsewhere (its folder made), by name with or without .png.
    "$hpclaunch" report "$job" --plot "$work/plots/gp.png" >/dev/null 2>&1 || fail "report --plot exited $?"
    [[ -s $work/plots/gp.png && -s $work/plots/gp.svg && -s $work/plots/gp.gp ]] || fail "--plot wrote $(ls "$work/plots")"
    # --plot FOLDER: the files go into it as goodput.*, never beside it as FOLDER.gp (issue 35).
    mkdir "$work/into"
    "$hpclaunch" report "$job" --plot "$work/into" >/dev/null 2>&1 || fail "report --plot FOLDER exited $?"
    [[ -s $work/into/goodput.png && -s $work/into/goodput.gp ]] || fail "--plot FOLDER wrote $(ls "$work/into")"
    [[ ! -e $work/into.gp && ! -e $work/into-steps.dat ]] || fail "--plot FOLDER wrote beside it"

    # A program of one's own: the timeline alone.
    "$hpclaunch" run --no-project --local --preset 1n1g --launch srun --set "job.name=$name-own" \
      -- bash -c 'sleep 1' 2>"$work/own.err" >"$work/own.out" || fail "own program exited $?"
    own=$(sed -n 's/.*submitted job \([0-9]*\).*/\1/p' "$work/own.err" | head -n 1)
    "$hpclaunch" report "$own" >"$work/own.txt" 2>/dev/null || fail "report of the own program exited $?"
    grep -q "note: no training steps with times" "$work/own.txt" || fail "no note: $(cat "$work/own.txt")"
    grep -q "run 0: completed (exit 0)" "$work/own.txt" || fail "own program not completed: $(cat "$work/own.txt")"

    # Bad input: one line, exit 2, nothing written.
    own_dir="$work/runs/$name-own-$own"
    echo 'not json' >>"$own_dir/timeline.jsonl"
    rm -f "$own_dir"/goodput.*
    rc=0
    "$hpclaunch" report "$own" >/dev/null 2>"$work/bad.err" || rc=$?
    [[ $rc -eq 2 && $(wc -l <"$work/bad.err") -eq 1 ]] || fail "bad timeline: exit $rc, $(cat "$work/bad.err")"
    bad_line=$(wc -l <"$own_dir/timeline.jsonl")
    grep -q "timeline.jsonl:$bad_line: is not a JSON object" "$work/bad.err" || fail "bad timeline: $(cat "$work/bad.err")"
    ! compgen -G "$own_dir/goodput.*" >/dev/null || fail "a refused report wrote its plot"
    rc=0
    "$hpclaunch" report 987654 >/dev/null 2>"$work/none.err" || rc=$?
    [[ $rc -eq 2 && $(wc -l <"$work/none.err") -eq 1 ]] || fail "unknown job: exit $rc, $(cat "$work/none.err")"
    rc=0
    "$hpclaunch" report "$own" --out x >/dev/null 2>"$work/out.err" || rc=$?
    [[ $rc -eq 2 ]] || fail "--out with a run: exit $rc"
    echo "local: hpctrain 20 steps, 1 run, CPU-hours, goodput $(jfield "r['goodput']"); own program: timeline only; bad input refused"
    ;;
  *) echo "usage: $0 requeue2|preempt|local HPCLAUNCH HPCTRAIN" >&2; exit 2 ;;
esac
