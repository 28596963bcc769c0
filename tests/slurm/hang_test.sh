#!/usr/bin/env bash
# hang_test.sh CASE HPCLAUNCH HPCTRAIN: hang detection (job.hang_seconds) on the real test cluster
# (tests/cluster's slurm_cluster fixture; SLURM_CONF comes from CTest). 2 nodes x 1 rank (preset
# 2n2g with shape.gpus_per_node=1), `hpclaunch run` follows the job with job.hang_seconds=10.
#   hpctrain  the real hpctrain (tiny model, Gloo on CPU, ddp); HPCTRAIN_TEST_HANG=1:3 stops rank 1
#             for ever just before its first collective of step 3, so rank 0 waits inside that
#             collective. hpclaunch must say rank 1 is behind at step 3 and rank 0 waits inside
#             all_reduce #N, send SIGURG (scancel --signal=23: the tasks, not the batch shell),
#             show and save both ranks' answers in <run dir>/hang-<time>.txt, cancel the job and
#             exit 79, long before the job's time limit and the collective's timeout (300 s).
#   ssh       the hpctrain case through the test cluster's login node (--host testlogin): the
#             progress files are read over SFTP, scancel runs there, the report is saved in this
#             machine's copy of the run directory.
#   local     the hpctrain case on the local backend (no Slurm: `--local --preset 1n2g`, both
#             ranks on this machine; the signal goes to the job's session but the batch shell).
#   program   launch srun, a bash program that prints one line and then sleeps, answering URG
#             with a line of its own: no progress files, so hpclaunch names each rank's last log
#             line, and the answers come from the log.
#   python    the same with a Python program that does what docs/troubleshooting.md tells users:
#             faulthandler.register(signal.SIGURG, all_threads=True); its stack, naming the
#             function it sleeps in, is the answer.
#   slow_start    the local backend, launch srun: a program whose start (imports, rendezvous)
#                 takes 25 s, more than job.hang_seconds=10, before its first line; then 5 lines
#                 half a second apart, and exit 0. It is not ended: hang_seconds counts from a
#                 rank's first progress, the start has job.start_seconds (default 900).
#   never_starts  the same program never writes a line: with job.start_seconds=15 it is ended by
#                 the start's bound (exit 79), the hang line and the last line saying so.
set -euo pipefail
case_name=$1 hpclaunch=$2 hpctrain=$3
[[ $case_name == local || $case_name == slow_start || $case_name == never_starts ]] ||
  : "${SLURM_CONF:?run me through ctest (the slurm_cluster fixture sets SLURM_CONF)}"
# job_field, wait_state, submitted_id, begin_job_test, fail_showing
# shellcheck source-path=SCRIPTDIR source=job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
begin_job_test hang
# The local backend's job: no Slurm to ask, hpclaunch cancels it.
cleanup_extra() {
  if [[ $case_name == local || $case_name == slow_start || $case_name == never_starts ]] &&
    [[ -n ${job:-} ]]; then
    (cd "$work" && "$hpclaunch" cancel "$job" >/dev/null 2>&1) || true
  fi
}
fail() { fail_showing 40 "$*" "$work"/*.err "$work"/*.out; }

common=(run --no-project --preset 2n2g --set shape.gpus_per_node=1 --set shape.cpus_per_gpu=1
  --set "job.name=$name" --set job.hang_seconds=10 --set shape.time=00:10:00)
node0=node01 node1=node02
if [[ $case_name == ssh ]]; then
  cluster_dir=$(dirname "$(dirname "$SLURM_CONF")")
  common+=(--host testlogin --ssh-config "$cluster_dir/ssh/config" --remote-runs-dir "$work/remote-runs"
    --set 'profile.env.HPCTRAIN_TEST_HANG={"value": "1:3", "reason": "test"}')  # this shell's environment does not travel over SSH
fi
if [[ $case_name == local || $case_name == slow_start || $case_name == never_starts ]]; then
  common=(run --no-project --local --preset 1n2g --set shape.cpus_per_gpu=1
    --set "job.name=$name" --set job.hang_seconds=10 --set shape.time=00:10:00)
  node0=$(hostname) node1=$(hostname)
fi
started=$SECONDS
rc=0
case "$case_name" in
  hpctrain | local | ssh)
    for i in $(seq 1 400); do
      echo "line $i: the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs."
    done >"$work/corpus.txt"
    HPCTRAIN_TEST_HANG=1:3 "$hpclaunch" "${common[@]}" --strategy ddp \
      --set "trainer.program=$hpctrain" -- \
      --data "$work/corpus.txt" --data-format text --model tiny --micro-batch 4 --seq-len 64 \
      --total-batch-tokens 512 --warmup-steps 3 --max-lr 3e-3 --eval-every 0 --seed 9 \
      --threads 1 --log-every 1 --max-steps 1000 2>"$work/run.err" >"$work/run.out" || rc=$?
    ;;
  program)
    cat >"$work/program.sh" <<'PROGRAM'
echo "rank $SLURM_PROCID: loading the data"
trap 'echo "rank $SLURM_PROCID: asked where I am: sleeping in program.sh"' URG
while true; do sleep 1 & wait $! || true; done
PROGRAM
    "$hpclaunch" "${common[@]}" --launch srun -- bash "$work/program.sh" \
      2>"$work/run.err" >"$work/run.out" || rc=$?
    ;;
  python)
    cat >"$work/program.py" <<'PROGRAM'
import faulthandler, os, signal, sys, time
faulthandler.register(signal.SIGURG, file=sys.stderr, all_threads=True)
def wait_for_the_other_ranks():
    while True:
        time.sleep(1)
print(f"rank {os.environ['RANK']}: loading the data", flush=True)
wait_for_the_other_ranks()
PROGRAM
    "$hpclaunch" "${common[@]}" --launch srun -- python3 "$work/program.py" \
      2>"$work/run.err" >"$work/run.out" || rc=$?
    ;;
  slow_start | never_starts)
    # The start: 25 s without a line, the time `import torch` and the rendezvous may take on a
    # cluster (a sleep, since the slow start is the point); never_starts never gets past it.
    start=25 after=()
    [[ $case_name != never_starts ]] || { start=100000 after=(--set job.start_seconds=15); }
    cat >"$work/program.sh" <<'PROGRAM'
sleep "$1"
for i in $(seq 5); do echo "rank $SLURM_PROCID: step $i"; sleep 0.5; done
PROGRAM
    "$hpclaunch" "${common[@]}" "${after[@]}" --launch srun -- bash "$work/program.sh" "$start" \
      2>"$work/run.err" >"$work/run.out" || rc=$?
    if [[ $case_name == slow_start ]]; then
      took=$((SECONDS - started))
      [[ $rc == 0 ]] || fail "hpclaunch run exited $rc after $took s: a slow start was taken for a hang"
      ! grep -q "hang:" "$work/run.err" || fail "hpclaunch spoke of a hang in a job that only started slowly"
      grep -q "^1: rank 1: step 5$" "$work/run.out" || fail "rank 1's last line is not in the log"
      echo "slow_start: a 25 s start with job.hang_seconds=10 ran to its end (exit 0) in $took s"
      exit 0
    fi
    ;;
  *) echo "usage: $0 hpctrain|ssh|local|program|python|slow_start|never_starts HPCLAUNCH HPCTRAIN" >&2; exit 2 ;;
esac
took=$((SECONDS - started))
job=$(submitted_id "$work/run.err")
[[ -n $job ]] || fail "no job submitted"
[[ $rc == 79 ]] || fail "hpclaunch run exited $rc, not 79 (a hang)"
((took < 120)) || fail "the hang ended the job only after $took s"
if [[ $case_name == local || $case_name == never_starts ]]; then
  for _ in $(seq 100); do
    "$hpclaunch" status "$job" 2>&1 | grep -q CANCELLED && break
    sleep 0.2
  done
  "$hpclaunch" status "$job" 2>&1 | grep -q CANCELLED || fail "local job $job is not CANCELLED"
else
  s=$(wait_state "$job" 60 CANCELLED) || fail "job $job is $s, not CANCELLED"
fi
err=$(cat "$work/run.err")
has() { grep -qF -- "$1" <<<"$err" || fail "hpclaunch did not say: $1"; }
has "asking every rank where it is (SIGURG to the tasks of job $job)"
if [[ $case_name == never_starts ]]; then
  has "hang: no rank has started after 1"
  has "(job.start_seconds = 15): no rank wrote a line of its own"
  has "ending job $job (job.start_seconds = 15); hang report: "
else
  has "hang: no rank reported"
  has "ending job $job (job.hang_seconds = 10); hang report: "
fi
run_dir="$work/runs/$name-$job"
reports=("$run_dir"/hang-*.txt)
[[ -f ${reports[0]} ]] || fail "no hang-*.txt in $run_dir"
report=$(cat "${reports[0]}")
in_report() { grep -qF -- "$1" <<<"$report" || fail "the hang report lacks: $1"; }
case "$case_name" in
  hpctrain | local | ssh)
    has "hang: no rank reported progress for"
    has "rank 1 on $node1 is behind the others: step 3, phase stopped (HPCTRAIN_TEST_HANG)"
    # Rank 0 waits inside the collective that rank 1 never started: one number higher.
    line0=$(grep -o "rank 0 on $node0: step 3, phase [a-z]*, waiting inside [a-z_]* #[0-9]*" <<<"$err" | head -n 1) ||
      fail "hpclaunch did not say rank 0 waits inside a collective at step 3"
    seq0=${line0##*#}
    last1=$(grep -o "is behind the others: .*not in a collective (last: [a-z_]* #[0-9]*)" <<<"$err" | grep -o '#[0-9]*' | tail -n 1)
    [[ ${last1#\#} == $((seq0 - 1)) ]] || fail "rank 1's last collective $last1, rank 0 waits in #$seq0"
    # The ranks' own answers (the SIGURG thread), shown and saved.
    has "hpctrain: rank 0 on $node0: step 3, phase"
    has "hpctrain: rank 1 on $node1: step 3, phase stopped (HPCTRAIN_TEST_HANG)"
    in_report "rank 1 on $node1 is behind the others: step 3"
    in_report "hpctrain: rank 0 on $node0: step 3, phase"
    in_report ", waiting in ${line0##*waiting inside } for"
    remote_dir=$run_dir
    [[ $case_name != ssh ]] || remote_dir="$work/remote-runs/$name-$job"
    [[ -f $remote_dir/progress/rank-0 && -f $remote_dir/progress/rank-1.where ]] || fail "no progress files in $remote_dir/progress"
    ;;
  program)
    has "hang: no rank reported output for"
    has "this program writes no progress files"
    has "rank 1, "
    has "1: rank 1: loading the data"
    has "1: rank 1: asked where I am: sleeping in program.sh"
    in_report "0: rank 0: asked where I am: sleeping in program.sh"
    ;;
  never_starts)
    has "ranks 0-1: no line in the log"
    in_report "(job.start_seconds = 15)"
    ;;
  python)
    has "this program writes no progress files"
    has "1: rank 1: loading the data"
    has 'line 5 in wait_for_the_other_ranks'
    in_report "0: Current thread"
    in_report '1:   File "'"$work"'/program.py", line 7 in <module>'
    ;;
esac
echo "$case_name: job $job ended by hang detection after $took s (hpclaunch exit $rc); what hpclaunch said:"
grep "hpclaunch: " "$work/run.err" | sed -n '/hang: no rank/,$p'
echo "--- ${reports[0]##*/}:"
cat "${reports[0]}"
