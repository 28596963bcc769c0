#!/usr/bin/env bash
# programs_test.sh CASE HPCLAUNCH VENV PROGRAMS: users' own programs (examples/programs/*.py),
# launched by hpclaunch on the real 2-node test cluster (tests/cluster's slurm_cluster fixture;
# SLURM_CONF comes from CTest). Everything runs on CPU with Gloo: the cluster's GPUs are
# /dev/null clones. VENV is the Python environment of scripts/install-deps.sh (torch 2.x,
# Lightning); without it the test is skipped (77), and fails under CI=true.
#   allreduce_srun      torch.distributed under --launch srun on 2n2g: 4 ranks all-reduce their
#                       rank, rank 0 prints 6, the ranks ran on node01 and node02
#   allreduce_torchrun  the same under --launch torchrun (the venv's torch 2.x torchrun, one per
#                       node, c10d rendezvous at MASTER_ADDR:MASTER_PORT)
#   lightning_srun      Lightning DDP, devices=2 num_nodes=2, under --launch srun: its
#                       SLURMEnvironment finds world_size 4 and every global rank; the run ends at
#                       max_steps with a loss below the start's
#   lightning_requeue   the same, slowed down and preempted with `scancel --signal=USR1 --batch`:
#                       Lightning saves hpc_ckpt_1.ckpt and requeues the job itself; the requeued
#                       job resumes at the step it saved and finishes; hpclaunch run follows it
#                       through the requeue and exits 0
#   nanogpt_torchrun    a tiny char-level GPT under --launch torchrun: hpclaunch run's output has
#                       one "0: step N | loss" line per step, in order, and the loss falls
#   sweep_metric        hpclaunch sweep over 1n1g, 1n2g, 2n2g with --metric-regex on the
#                       nanoGPT script's tokens/s line: results.csv has the figure of each point,
#                       speedup.png and speedup.svg are written (the SVG parses), and each point's
#                       start-up phases (startup_* columns, the first step from the regex)
#   hang_rollcall       stuck_loader.py under --launch srun on 2n2g with job.hang_seconds=10: rank 2
#                       stops in its data loader, the others wait in all_reduce; hpclaunch run's
#                       roll-call names rank 2 on node02 in __next__ and the 3 others in
#                       all_reduce within hang_seconds + 30 s of the hang (the time is printed)
#   hang_heartbeat      the same with --heartbeat: no line a step for 15 s (more than
#                       hang_seconds), only heartbeat files; the job is not ended before rank 2
#                       gets stuck, and the roll-call then names it
#   hang_torchrun       hang_rollcall under --launch torchrun: srun's labels are nodes (the hang
#                       summary says "node 0"); the workers' stderr comes through torchrun's tee
#                       with each one's rank, so the roll-call is the same as under srun, rank 2
#                       named on the node whose label printed the stall
# allreduce_srun and lightning_requeue also check `hpclaunch report JOB --json`'s start-up phases
# (queue, environment, rendezvous) of the 2-node run, and of both starts of the requeued one.
set -euo pipefail
case_name=$1 hpclaunch=$2 venv=$3 programs=$4
: "${SLURM_CONF:?run me through ctest (the slurm_cluster fixture sets SLURM_CONF)}"

if [[ -z $venv || ! -e $venv/.hpclaunch-complete ]]; then
  msg="the tests' Python environment ${venv:-(none: no Debian python3?)} is not installed; run scripts/install-deps.sh --python"
  if [[ ${CI:-} == true ]]; then
    echo "FAIL (CI=true): $msg" >&2
    exit 1
  fi
  echo "WARN: skipped: $msg" >&2
  exit 77
fi
py=$venv/bin/python

work=$(mktemp -d "${TMPDIR:-/tmp}/programs-test.XXXXXX")
chmod 755 "$work" # the jobs run as this user, but keep it readable like a project directory
name="programs-$case_name-$$"
# This test's jobs: named $name, or $name-PRESET-STRATEGY (the sweep's points).
jobs_of_test() {
  squeue --noheader --format '%i %j' 2>/dev/null | awk -v n="$name" '$2 == n || index($2, n "-") == 1 { print $1 }' || true
}
cleanup() {
  local ids
  mapfile -t ids < <(jobs_of_test)
  ((${#ids[@]} == 0)) || scancel "${ids[@]}" 2>/dev/null || true
  [[ -z "${follower:-}" ]] || kill "$follower" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
export XDG_CONFIG_HOME="$work/xdg" HPCLAUNCH_PATH="" GLOO_SOCKET_IFNAME=lo

fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.err "$work"/*.out; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 40 "$f" >&2; }; done
  # The jobs' own logs (a sweep's points, hpclaunch run's job), which go with $work.
  for f in "$work"/runs/*/*.out; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 60 "$f" >&2; }; done
  exit 1
}
expect() {  # FILE REGEX WHAT: FILE has a line matching the extended REGEX
  grep -Eq -- "$2" "$1" || fail "$3 (no line matching '$2' in ${1##*/})"
}

# hpclaunch run on 2 nodes x 2 GPUs, one CPU per rank, as this test's job name; the program and
# its arguments after ours.
launch_run() {  # MODE PROGRAM [ARGS...]
  local mode=$1
  shift
  local extra=()
  if [[ $mode == torchrun ]]; then extra=(--set "torchrun.command=[\"$venv/bin/torchrun\"]"); fi
  timeout 300 "$hpclaunch" run --no-project --preset 2n2g --launch "$mode" "${extra[@]}" \
    --set shape.cpus_per_gpu=1 --set "job.name=$name" -- "$@"
}

# job_field, wait_state, submitted_id, wait_submitted
# shellcheck source-path=SCRIPTDIR source=../slurm/job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../slurm/job_lib.sh"
wait_line() {  # FILE REGEX SECONDS: waits until FILE has a line matching REGEX (bound: job_lib.sh)
  local until=$((SECONDS + $(bound "$3")))
  while ((SECONDS < until)); do
    grep -Eq -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

# OUT LABEL: 4 ranks, the sum, both nodes. LABEL: the srun label of rank 0's lines (a regex).
check_allreduce() {
  local out=$1 label=$2 r
  grep -E "rank [0-9]/4|sum of ranks|hosts:" "$out" # what the program printed, for the log
  for r in 0 1 2 3; do expect "$out" "rank $r/4 local [01] on node0[12]" "rank $r did not report"; done
  expect "$out" "^$label: sum of ranks: 6 \(expected 6\)$" "rank 0 did not print the all-reduced sum 6"
  expect "$out" "^$label: hosts: node01,node02$" "the ranks did not run on node01 and node02"
  [[ $(grep -c "sum of ranks" "$out") -eq 1 ]] || fail "only rank 0 prints the sum"
}

# JOB STARTS [METRIC_REGEX]: `hpclaunch report JOB --json` has STARTS starts, each with its
# queue, environment and rendezvous (the program's first line) phases measured, and with
# METRIC_REGEX its first step (the first line it matches); prints the text report.
check_startup() {
  local metric=()
  [[ -z ${3:-} ]] || metric=(--metric-regex "$3")
  "$hpclaunch" report "$1" "${metric[@]}" >report.txt 2>report.err || fail "hpclaunch report $1 exited $?"
  cat report.txt
  "$hpclaunch" report "$1" "${metric[@]}" --json >report.json 2>>report.err || fail "hpclaunch report --json"
  "$py" - report.json "$2" "${3:+step}" <<'PY' || fail "the start-up phases are incomplete (report.json)"
import json, sys
starts = json.load(open(sys.argv[1]))["startup"]
assert len(starts) == int(sys.argv[2]), starts
for s in starts:
    for k in ("queue_s", "environment_s", "rendezvous_s") + (("first_step_s",) if sys.argv[3] else ()):
        assert s[k] is not None and 0 <= s[k] < 300, (k, s)
    assert s["started"] < s["environment_ready"] < s["rendezvous"], s
PY
}

# "STEP LOSS" per line from the nanoGPT script's rank-0 lines (under torchrun, srun's label is
# the node that rank 0 landed on: either).
nanogpt_losses() { sed -n 's/^[01]: step \([0-9]*\) | loss \([0-9.]*\) .*/\1 \2/p' "$1"; }

case "$case_name" in
  allreduce_srun)
    launch_run srun "$py" "$programs/allreduce.py" >run.out 2>run.err ||
      fail "hpclaunch run exited $?"
    check_allreduce run.out 0
    # srun's labels are the global ranks: one task per GPU.
    expect run.out "^2: rank 2/4 local 0 on node02$" "rank 2 is not node02's first task"
    check_startup "$(wait_submitted run.err)" 1
    ;;
  allreduce_torchrun)
    launch_run torchrun "$programs/allreduce.py" >run.out 2>run.err || fail "hpclaunch run exited $?"
    # srun's labels are the nodes (one torchrun per node); torchrun numbers the ranks, and its
    # c10d rendezvous numbers the nodes in the order they join: rank 0 may be on either node.
    check_allreduce run.out "[01]"
    awk '/rank [0-9]\/4 local/ { split($1, l, ":"); if ($NF != sprintf("node%02d", l[1] + 1)) bad = 1; n[l[1]]++ }
         END { exit bad || n[0] != 2 || n[1] != 2 }' run.out ||
      fail "each node's torchrun (label 0: node01, 1: node02) did not start 2 ranks there"
    ;;
  lightning_srun)
    launch_run srun "$py" "$programs/lightning_train.py" --nodes 2 --devices 2 --max-steps 30 \
      --root "$work/lightning" >run.out 2>run.err || fail "hpclaunch run exited $?"
    for r in 0 1 2 3; do
      expect run.out "^$r: lightning: global_rank $r of world_size 4 \(node_rank $((r / 2)), local_rank $((r % 2))\) on node0$((r / 2 + 1))$" \
        "Lightning's SLURMEnvironment did not give task $r global_rank $r of 4"
    done
    expect run.out "^0: lightning: training starts at step 0$" "training did not start at step 0"
    expect run.out "^0: lightning: finished at step 30, train_loss [0-9.]+$" "the run did not reach step 30"
    first=$(sed -n 's/^0: lightning: step 1 loss \([0-9.]*\)$/\1/p' run.out)
    last=$(sed -n 's/^0: lightning: finished at step 30, train_loss \([0-9.]*\)$/\1/p' run.out)
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(a != "" && b < a) }' ||
      fail "the loss did not fall (step 1: $first, end: $last)"
    grep -E "lightning: (global_rank|training starts|finished)" run.out
    echo "lightning: loss $first at step 1, $last at step 30"
    ;;
  lightning_requeue)
    steps=40
    launch_run srun "$py" "$programs/lightning_train.py" --nodes 2 --devices 2 --max-steps $steps \
      --step-sleep 0.5 --root "$work/lightning" >run.out 2>run.err &
    follower=$!
    job=$(wait_submitted run.err) || fail "no job submitted"
    wait_line run.out "^0: lightning: step 5 loss" 240 || fail "the job did not reach step 5"
    scancel --signal=USR1 --batch "$job"
    # Lightning's rank 0 runs `scontrol requeue`: the job is killed and queued again with a
    # BeginTime (cred_expire, 120 s by default). Let it start sooner once the nodes let go of it
    # (PENDING, no longer COMPLETING), in the next second (as tests/slurm/preempt_test.sh).
    [[ $(wait_state "$job" 120 PENDING) == PENDING ]] ||
      fail "job $job not PENDING after USR1 ($(job_field "$job" JobState))"
    pending_at=$(date +%s)
    [[ $(job_field "$job" Restarts) == 1 ]] || fail "Restarts=$(job_field "$job" Restarts), not 1"
    while (($(date +%s) <= pending_at)); do sleep 0.05; done
    for _ in $(seq 20); do scontrol update "JobId=$job" StartTime=now 2>/dev/null && break; sleep 0.25; done
    rc=0
    wait "$follower" || rc=$?
    follower=
    [[ $rc -eq 0 ]] || fail "hpclaunch run exited $rc after the requeue"
    [[ $(job_field "$job" JobState) == COMPLETED ]] || fail "job $job $(job_field "$job" JobState), not COMPLETED"
    [[ -f $work/lightning/hpc_ckpt_1.ckpt ]] || fail "Lightning wrote no hpc_ckpt_1.ckpt"
    expect run.out "Handling auto-requeue signal" "Lightning did not handle USR1"
    # The script asks the tasks once: the TERM of Lightning's own `scontrol requeue` is not passed
    # on as a second USR1 (which made Lightning save and requeue again while KillWait ran out).
    asked=$(cat run.out run.err | grep -c "asking the tasks to checkpoint" || true)
    [[ $asked -eq 1 ]] || fail "the script did not ask the tasks exactly once: $asked times"
    handled=$(grep -c "Handling auto-requeue signal" run.out || true)
    [[ $handled -eq 1 ]] || fail "Lightning handled the requeue signal $handled times, not once"
    expect run.err "job $job REQUEUED" "hpclaunch run did not follow the requeue"
    resumed=$(sed -n 's/^0: lightning: training starts at step \([0-9]*\)$/\1/p' run.out | tail -n 1)
    [[ -n $resumed && $resumed -gt 0 ]] || fail "the requeued job started at step ${resumed:-?}, not where it saved"
    [[ $(grep -c "training starts at step" run.out) -eq 2 ]] || fail "expected two starts (before and after the requeue)"
    expect run.out "^0: lightning: finished at step $steps, " "the resumed run did not finish at step $steps"
    grep -E "lightning: (training starts|finished)|auto-requeue|Requeued SLURM|Restoring states|REQUEUED|checkpoint" run.out run.err
    echo "lightning: preempted, requeued (Restarts=1), resumed at step $resumed, finished at step $steps"
    check_startup "$job" 2 'lightning: step [0-9]+ loss'
    ;;
  nanogpt_torchrun)
    steps=20
    launch_run torchrun "$programs/nanogpt_train.py" --steps $steps >run.out 2>run.err ||
      fail "hpclaunch run exited $?"
    nanogpt_losses run.out >losses
    [[ $(wc -l <losses) -eq $steps ]] || fail "$(wc -l <losses) step lines, not $steps"
    awk '$1 != NR - 1 { exit 1 }' losses || fail "step lines out of order: $(tr '\n' ' ' <losses)"
    [[ $(grep -c "| loss " run.out) -eq $steps ]] || fail "a rank other than 0 printed steps"
    expect run.out "^[01]: step 0 \| loss [0-9.]+ \| [0-9]+ tokens/s \| 4 ranks$" "no step line of 4 ranks"
    awk 'NR == 1 { a = $2 } END { b = $2; exit !(b < a - 0.2) }' losses ||
      fail "the loss did not fall: $(head -n 1 losses) ... $(tail -n 1 losses)"
    grep -E "^[01]: step (0|1|$((steps - 1))) " run.out
    echo "nanogpt: loss $(head -n 1 losses | cut -d' ' -f2) at step 0, $(tail -n 1 losses | cut -d' ' -f2) at step $((steps - 1))"
    ;;
  sweep_metric)
    timeout 360 "$hpclaunch" sweep --no-project --presets 1n1g,1n2g,2n2g --launch torchrun \
      --set "torchrun.command=[\"$venv/bin/torchrun\"]" --set shape.cpus_per_gpu=1 \
      --metric-regex '\| ([0-9.]+) tokens/s' --out "$work/$name" \
      --runs-dir "$work/runs" -- "$programs/nanogpt_train.py" --steps 8 >sweep.out 2>sweep.err ||
      fail "hpclaunch sweep exited $?"
    sw=$work/$name
    csv=$sw/results.csv
    [[ -f $csv ]] || fail "no results.csv"
    cat "$csv"
    # preset, state and the figure (tokens_per_s_mean): > 0 for every point.
    "$py" - "$csv" <<'PY' || fail "results.csv lacks a figure"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["preset"] for r in rows] == ["1n1g", "1n2g", "2n2g"], rows
for r in rows:
    assert r["state"] == "COMPLETED", r
    assert float(r["tokens_per_s_mean"]) > 0, r
    for k in ("queue", "environment", "rendezvous", "first_step"):
        assert 0 <= float(r[f"startup_{k}_s"]) < 300, (k, r)
assert float(rows[0]["speedup"]) == 1.0, rows[0]
PY
    for f in speedup.png speedup.svg; do [[ -s $sw/plots/$f ]] || fail "no plots/$f"; done
    xmllint --noout "$sw/plots/speedup.svg" || fail "speedup.svg does not parse"
    ;;
  hang_rollcall | hang_heartbeat | hang_torchrun)
    hang=10 stuck=3 quiet=() launch=srun extra=() interpreter=("$py")
    # 60 steps of 0.25 s: 15 s without a line, which only the heartbeats keep from being a hang.
    [[ $case_name != hang_heartbeat ]] || { stuck=60 quiet=(--heartbeat --step-sleep 0.25); }
    if [[ $case_name == hang_torchrun ]]; then
      launch=torchrun extra=(--set "torchrun.command=[\"$venv/bin/torchrun\"]") interpreter=()
    fi
    timeout 300 "$hpclaunch" run --no-project --preset 2n2g --launch "$launch" "${extra[@]}" \
      --set shape.cpus_per_gpu=1 --set "job.name=$name" --set job.hang_seconds=$hang -- \
      "${interpreter[@]}" "$programs/stuck_loader.py" --stuck-rank 2 --stuck-step $stuck "${quiet[@]}" \
      >run.out 2>run.err &
    follower=$!
    wait_line run.out "^[0-9]: rank 2: stuck in the data loader at step $stuck at " 240 ||
      fail "rank 2 did not get stuck at step $stuck"
    hung_at=$(sed -n "s/^[0-9]: rank 2: stuck in the data loader at step $stuck at \([0-9.]*\)$/\1/p" run.out)
    wait_line run.err "roll-call: " $((hang + 60)) || fail "no roll-call within $((hang + 60)) s"
    named_at=$(date +%s.%N)
    rc=0
    wait "$follower" || rc=$?
    follower=
    [[ $rc -eq 79 ]] || fail "hpclaunch run exited $rc, not 79 (hang)"
    grep -E "hang:|roll-call:|ending job" run.err
    node=node02
    if [[ $case_name == hang_torchrun ]]; then
      # The node whose label printed the stall (torchrun's rendezvous places rank 2 on either).
      # Each worker's stderr comes through torchrun's tee with its rank ("0: [rank2]:  File"), so
      # the roll-call is per rank as under srun, the node taken from the label.
      node=node0$(($(sed -n 's/^\([0-9]\): rank 2: stuck in the data loader.*/\1/p' run.out) + 1))
      expect run.err "hpclaunch: node 0, [0-9]+ s ago: " "the hang summary did not name node 0's last line"
    fi
    expect run.err "roll-call: 3 of 4 ranks at stuck_loader.py:[0-9]+ in main, inside all_reduce; rank 2 on $node at stuck_loader.py:[0-9]+ in __next__$" \
      "the roll-call did not name rank 2 in its data loader on $node"
    latency=$(awk -v a="$named_at" -v b="$hung_at" 'BEGIN { printf "%.1f", a - b }')
    echo "$case_name: rank 2 hung at $hung_at; the roll-call named it $latency s later (job.hang_seconds = $hang)"
    awk -v l="$latency" -v h="$hang" -v m="$(bound 30)" 'BEGIN { exit !(l <= h + m) }' ||
      fail "the roll-call came $latency s after the hang, more than job.hang_seconds + 30"
    ls runs/*/hang-*.txt >/dev/null || fail "no hang report in the run directory"
    grep -q "roll-call: " runs/*/hang-*.txt || fail "the hang report lacks the roll-call"
    ;;
  *)
    echo "unknown case $case_name" >&2
    exit 2
    ;;
esac
echo "programs:$case_name passed"
