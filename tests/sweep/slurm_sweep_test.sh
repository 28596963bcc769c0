#!/usr/bin/env bash
# slurm_sweep_test.sh CASE HPCLAUNCH HPCTRAIN STRATEGIES: one integration test of hpclaunch sweep
# on the real test cluster (tests/cluster: scripts/testcluster.sh, 2 nodes x 4 fake GPUs, CPU
# only), the slurm backend and the real hpctrain (tiny model on byte-level text, Gloo, 6 steps).
# SLURM_CONF points at the cluster (CTest's ENVIRONMENT). Every job of a test carries the sweep
# directory's unique name, so the test counts and cancels exactly its own jobs.
#   grid          presets 1n1g,1n2g,2n2g x STRATEGIES (e.g. ddp,fsdp): every point COMPLETED, a
#                 CSV row per point with tokens/s > 0, valid PNG and SVG, gnuplot exit 0; a
#                 second run submits nothing (the cluster's job count is unchanged and the output
#                 says so); then unreadable metrics (garbage, empty): exit 1, one line per point
#                 naming the file, still nothing submitted, the other rows' numbers kept
#   never_starts  node02 held by another job: 2n2g stays PENDING (reason Resources) and is
#                 cancelled after --start-timeout; 1n1g's row is kept; exit 1. Once node02 is
#                 free, the same command submits only 2n2g and the sweep completes (exit 0)
#   bad_input     unknown preset, empty preset list, empty strategy list against the cluster:
#                 exit 2, one line, nothing submitted, nothing written
# KEEP=1 keeps the work directory (/tmp/hpcsweep-*) for a look after a failure.
set -euo pipefail
case_name=$1 hpclaunch=$2 hpctrain=$3 strategies=${4:-ddp,fsdp}
[[ -n ${SLURM_CONF:-} && -r $SLURM_CONF ]] || { echo "FAIL: SLURM_CONF is not set to the test cluster's slurm.conf" >&2; exit 1; }
work=$(mktemp -d /tmp/hpcsweep-XXXXXX)
name=sw$(basename "$work" | cut -d- -f2 | tr -cd 'a-zA-Z0-9')   # the sweep's name: in every job name
out=$work/$name
blocker=""

cleanup() {
  # This test's jobs only: the sweep's (named NAME-PRESET-STRATEGY) and the blocker.
  local ids
  ids=$(squeue --noheader --format='%i %j' 2>/dev/null | awk -v n="$name-" 'index($2, n) == 1 { print $1 }')
  [[ -z $blocker ]] || ids+=" $blocker"
  # shellcheck disable=SC2086  # a list of job ids
  [[ -z ${ids// /} ]] || scancel $ids 2>/dev/null || true
  [[ -n ${KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
export XDG_CONFIG_HOME="$work/config" HPCLAUNCH_PATH=""

fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in xmllint:libxml2-utils gnuplot:gnuplot-nox; do
  command -v "${tool%%:*}" >/dev/null ||
    fail "${tool%%:*} not found: install ${tool#*:} (scripts/install-deps.sh installs it)"
done

# MASTER_PORT comes from the sweep tests' part of the build's block of ports, base+10..+39 (the
# map: tests/cluster/CMakeLists.txt; CMake derives the base from the build directory): the
# default rule, 20000 + job id, would give job N of this cluster the port of job N of another
# build's cluster running tests at the same time on this machine. The accounting cluster's sshd
# on base+49, inside the range this had before, made job 39 fail to bind (exit 2).
port_base=$(sed -n 's/^SlurmctldPort=\([0-9]*\)$/\1/p' "$SLURM_CONF")
[[ -n $port_base ]] || fail "no SlurmctldPort in $SLURM_CONF"

# hpclaunch sweep on the slurm backend with the test's common arguments, then "$@".
# shape.cpus_per_gpu=1: the presets ask 8 CPUs per GPU; 1 thread per rank is what 2 cores bear.
# A strong-scaling batch of 4 x 64 x 4 ranks = 1024 tokens per step, 6 steps, 3 of them warm-up.
sweep() {
  "$hpclaunch" sweep --backend slurm --steps 6 --warmup-steps 3 --poll 0.5 --out "$out" --no-project \
    --set "trainer.program=$hpctrain" --set shape.cpus_per_gpu=1 --set shape.time=00:10:00 \
    --set "profile.port_range.min=$((port_base + 10))" --set "profile.port_range.max=$((port_base + 39))" "$@" -- \
    --data /usr/share/common-licenses/GPL-3 --data-format text --model tiny --seq-len 64 \
    --micro-batch 4 --eval-every 0 --threads 1 --dist-timeout 60
}

# Jobs the controller knows by this sweep's name (finished ones too: MinJobAge is an hour).
job_count() {
  scontrol show job --oneliner 2>/dev/null | grep -c -- " JobName=$name-" || true
}
job_state() { scontrol show job --oneliner "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

# Column NAME of results.csv row N (1-based, after the header); the fields hold no commas.
csv_field() {
  awk -F, -v row="$2" -v name="$1" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    NR == row + 1 { print $(col[name]) }' "$out/results.csv"
}
# The results.csv row number of PRESET/STRATEGY.
row_of() {
  awk -F, -v p="$1" -v s="$2" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $(col["preset"]) == p && $(col["strategy"]) == s { print NR - 1 }' "$out/results.csv"
}
positive() { awk -v v="$1" 'BEGIN { exit !(v > 0) }'; }
# Row N says COMPLETED and has tokens/s > 0.
measured() { [[ "$(csv_field state "$1")" == COMPLETED ]] && positive "$(csv_field tokens_per_s_mean "$1")"; }

check_plots() {
  local p png svg
  for p in speedup efficiency; do
    png="$out/plots/$p.png" svg="$out/plots/$p.svg"
    [[ -s "$out/plots/$p.gp" ]] || fail "$p.gp missing"
    [[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] || fail "$png is not a PNG"
    xmllint --noout "$svg" || fail "$svg does not parse"
    grep -q '<svg' "$svg" || fail "$svg has no <svg> element"
  done
  (cd "$out/plots" && gnuplot speedup.gp && gnuplot efficiency.gp) || fail "gnuplot exited with $?"
}

# Runs the sweep, expecting exit status $1; its stderr is in $work/err.
expect_sweep() {
  local want=$1 status
  shift
  set +e
  sweep "$@" 2>"$work/err"
  status=$?
  set -e
  if [[ $status -ne $want ]]; then
    cat "$work/err" >&2
    # The logs of the points that did not complete, to see why.
    if [[ -r "$out/results.csv" ]]; then
      awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $(col["state"]) != "COMPLETED" && $(col["log"]) != "" { print $(col["log"]) }' "$out/results.csv" |
        while read -r log; do echo "--- $log" >&2; tail -n 25 "$log" >&2 || true; done
    fi
    fail "sweep $*: exit $status, expected $want"
  fi
}

case "$case_name" in
  grid)
    IFS=, read -r -a strats <<<"$strategies"
    presets=(1n1g 1n2g 2n2g)
    points=$((${#presets[@]} * ${#strats[@]}))
    expect_sweep 0 --presets 1n1g,1n2g,2n2g --strategy "$strategies" --max-concurrent 2
    grep -q "$points points (strong scaling) via slurm; 0 finished before, 0 still running, $points to submit" "$work/err" ||
      { cat "$work/err" >&2; fail "no opening line for $points points on the slurm backend"; }
    [[ $(job_count) -eq $points ]] || fail "expected $points jobs on the cluster, found $(job_count)"
    [[ $(wc -l <"$out/results.csv") -eq $((points + 1)) ]] || fail "results.csv: not a header and $points rows"
    for s in "${strats[@]}"; do
      for p in "${presets[@]}"; do
        row=$(row_of "$p" "$s")
        [[ -n $row ]] || fail "no row for $p/$s"
        [[ "$(csv_field state "$row")" == COMPLETED ]] || fail "$p/$s: state $(csv_field state "$row") ($(csv_field message "$row"))"
        positive "$(csv_field tokens_per_s_mean "$row")" || fail "$p/$s: tokens/s '$(csv_field tokens_per_s_mean "$row")' is not > 0"
        [[ "$(job_state "$(csv_field job_id "$row")")" == COMPLETED ]] || fail "$p/$s: Slurm does not say COMPLETED"
        [[ -f "$(csv_field run_dir "$row")/run.json" && -s "$(csv_field log "$row")" ]] || fail "$p/$s: no run record or log"
      done
      # The multi-node point ran as one job of 2 nodes and 4 ranks of the strategy.
      row=$(row_of 2n2g "$s")
      [[ "$(csv_field gpus "$row"),$(csv_field nodes "$row")" == 4,2 ]] || fail "2n2g/$s: gpus,nodes"
      scontrol show job --oneliner "$(csv_field job_id "$row")" | grep -q ' NumNodes=2 ' || fail "2n2g/$s: not on 2 nodes"
      grep -q "world 4 ($s)" "$(csv_field log "$row")" || fail "2n2g/$s: the log has no 'world 4 ($s)'"
      [[ "$(csv_field speedup "$(row_of 1n1g "$s")")" == 1.0000 ]] || fail "1n1g/$s: speedup is not 1"
      [[ -s "$out/plots/scaling-$s.dat" ]] || fail "no plot data for $s"
    done
    [[ -s "$out/summary.md" && -s "$out/sweep.json" ]] || fail "summary.md or sweep.json missing"
    check_plots

    # The same command again: nothing submitted, the CSV unchanged.
    cp "$out/results.csv" "$work/results.first"
    before=$(job_count)
    expect_sweep 0 --presets 1n1g,1n2g,2n2g --strategy "$strategies" --max-concurrent 2
    grep -q "$points finished before, 0 still running, 0 to submit" "$work/err" ||
      { cat "$work/err" >&2; fail "the second run does not say it submits nothing"; }
    # The live table: every point COMPLETED from the start, none went through PENDING/RUNNING.
    grep -qE ": (PENDING|RUNNING)" "$work/err" && { cat "$work/err" >&2; fail "the second run started a point"; }
    [[ $(grep -c ": COMPLETED, job " "$work/err") -eq $points ]] || { cat "$work/err" >&2; fail "the second run's table"; }
    [[ $(job_count) -eq $before ]] || fail "the second run submitted jobs: $before -> $(job_count)"
    cmp "$out/results.csv" "$work/results.first" || fail "the resumed results.csv differs"

    # Unreadable metrics of two points: one line each naming the file, their rows kept without
    # numbers, the other rows' numbers kept, nothing resubmitted, exit 1.
    bad1=$(row_of 2n2g "${strats[0]}") bad2=$(row_of 1n2g "${strats[-1]}")
    printf 'not json\n{"step": 1, "tokens_per_s": 5}\n' >"$(csv_field run_dir "$bad1")/metrics.jsonl"
    : >"$(csv_field run_dir "$bad2")/metrics.jsonl"
    expect_sweep 1 --presets 1n1g,1n2g,2n2g --strategy "$strategies" --max-concurrent 2
    grep -q "sweep point 2n2g/${strats[0]}: COMPLETED - metrics unreadable: .*/metrics.jsonl: line 1 is not a JSON object" "$work/err" ||
      { cat "$work/err" >&2; fail "no one-line message for garbage metrics"; }
    grep -q "sweep point 1n2g/${strats[-1]}: COMPLETED - no training steps in .*/metrics.jsonl" "$work/err" ||
      { cat "$work/err" >&2; fail "no one-line message for empty metrics"; }
    [[ $(job_count) -eq $before ]] || fail "unreadable metrics made the sweep resubmit"
    [[ $(wc -l <"$out/results.csv") -eq $((points + 1)) ]] || fail "results.csv lost rows"
    for row in $(seq 1 "$points"); do
      if [[ $row == "$bad1" || $row == "$bad2" ]]; then
        [[ -z "$(csv_field tokens_per_s_mean "$row")" && -n "$(csv_field message "$row")" ]] || fail "row $row: numbers without metrics"
      else
        positive "$(csv_field tokens_per_s_mean "$row")" || fail "row $row: partial results not kept"
      fi
    done
    check_plots
    ;;

  never_starts)
    # node02 taken whole by a job of our own (it ends by itself after 2 minutes, should this
    # test be killed before its trap runs): a 2-node point cannot start, 1-node points can.
    # An earlier test's jobs may still be COMPLETING (their tasks stopping) and hold node01: the
    # 1-node point could then not start within its 6 s either. Wait them out first.
    for _ in $(seq 600); do [[ -z "$(squeue --noheader --states=CG --format=%i 2>/dev/null)" ]] && break; sleep 0.1; done
    blocker=$(sbatch --parsable --job-name="$name-blocker" --nodelist=node02 --exclusive --time=2 \
      --output=/dev/null --wrap 'sleep 120')
    for _ in $(seq 100); do [[ $(job_state "$blocker") == RUNNING ]] && break; sleep 0.1; done
    [[ $(job_state "$blocker") == RUNNING ]] || fail "the blocker job $blocker does not run"
    t0=$SECONDS
    expect_sweep 1 --presets 1n1g,2n2g --strategy ddp --max-concurrent 2 --start-timeout 6
    ((SECONDS - t0 < 60)) || fail "the bounded wait took $((SECONDS - t0)) s"
    [[ $(wc -l <"$out/results.csv") -eq 3 ]] || fail "results.csv: not a header and 2 rows"
    row=$(row_of 2n2g ddp)
    [[ "$(csv_field state "$row")" == START_TIMEOUT ]] || fail "2n2g: state $(csv_field state "$row")"
    grep -q "sweep point 2n2g/ddp: START_TIMEOUT - did not start within 6 s (last state PENDING, reason Resources); cancelled it" "$work/err" ||
      { cat "$work/err" >&2; fail "no one-line message for the point that never started"; }
    pending_job=$(csv_field job_id "$row")
    [[ -n $pending_job && "$(job_state "$pending_job")" == CANCELLED ]] || fail "job $pending_job was not cancelled"
    row=$(row_of 1n1g ddp)
    measured "$row" || { squeue --all --format='%i %j %T %R %N' >&2 || true; cat "$work/err" >&2
      fail "1n1g: state $(csv_field state "$row") ($(csv_field message "$row")), tokens/s '$(csv_field tokens_per_s_mean "$row")': expected COMPLETED with its numbers"; }
    grep -q '2n2g' "$out/summary.md" || fail "summary.md does not mention the point that never started"
    check_plots
    [[ $(job_count) -eq 3 ]] || fail "expected 3 jobs (2 points + the blocker), found $(job_count)"

    # node02 free again: the same command submits only the point that never started.
    scancel "$blocker"
    for _ in $(seq 100); do [[ $(job_state "$blocker") == CANCELLED ]] && break; sleep 0.1; done
    expect_sweep 0 --presets 1n1g,2n2g --strategy ddp --max-concurrent 2 --start-timeout 60
    grep -q "1 finished before, 0 still running, 1 to submit" "$work/err" ||
      { cat "$work/err" >&2; fail "the second run does not resubmit just the point that never started"; }
    [[ $(job_count) -eq 4 ]] || fail "expected 4 jobs after the second run, found $(job_count)"
    row=$(row_of 2n2g ddp)
    measured "$row" || fail "2n2g: not completed on the second run"
    [[ "$(csv_field job_id "$row")" != "$pending_job" ]] || fail "2n2g kept the cancelled job's id"
    ;;

  bad_input)
    expect_usage() {  # expect_usage PATTERN ARGS...: exit 2, one line matching PATTERN, nothing written or submitted
      local pattern=$1 status
      shift
      set +e
      "$hpclaunch" sweep --backend slurm --out "$out" --no-project "$@" >"$work/out" 2>"$work/err"
      status=$?
      set -e
      [[ $status -eq 2 ]] || { cat "$work/err" >&2; fail "$*: exit $status, expected 2"; }
      [[ $(wc -l <"$work/err") -eq 1 ]] || { cat "$work/err" >&2; fail "$*: not one line"; }
      grep -q -- "$pattern" "$work/err" || { cat "$work/err" >&2; fail "$*: no '$pattern'"; }
      [[ ! -e "$out" && ! -e "$work/runs" ]] || fail "$*: wrote files"
      [[ $(job_count) -eq 0 ]] || fail "$*: submitted a job"
    }
    expect_usage 'unknown preset "2n3g"; did you mean' --presets 1n1g,2n3g --strategy ddp
    expect_usage '--presets: an empty value' --presets '' --strategy ddp
    expect_usage '--strategy: an empty value' --presets 1n1g --strategy ''
    expect_usage '"1n1g" is listed twice' --presets 1n1g,1n1g --strategy ddp
    # A shape the cluster profile cannot hold is caught while resolving, before any submission.
    expect_usage 'max_gpus_per_node' --presets 1n1g,2n8g --strategy ddp --set profile.max_gpus_per_node=4
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "sweep:slurm_$case_name passed"
