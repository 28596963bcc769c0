#!/usr/bin/env bash
# requeue_test.sh CASE HPCLAUNCH [TESTCLUSTER_SH PORT_BASE SSH_PORT]: `hpclaunch doctor --requeue`
# on a real Slurm cluster (docs/doctor.md#requeue).
#   allowed      the fixture's cluster (JobRequeue=1): exit 0, every link OK: USR1 from
#                --signal=B:USR1@90 before the 3 min limit, then TERM as preemption sends it;
#                two requeues, SLURM_RESTART_COUNT 1 and 2, the counter resumed each time; the
#                job COMPLETED with Restarts=2
#   ssh          the same through the cluster's login node (--host testlogin)
#   jobrequeue0  a cluster of its own with JobRequeue=0 (scripts/testcluster.sh --conf-extra, in
#                ports of this build's slot; down on exit, also on failure): the doctor's job asks
#                for --requeue, so the cycle still works (exit 0, the table says JobRequeue=0 and
#                the job's Requeue=1); with SBATCH_NO_REQUEUE=1 in the environment (which wins
#                over #SBATCH --requeue) scontrol requeue is refused: exit 1, one FAIL line names
#                the link, JobRequeue=0 and the fix
#   bounded      the fixture's cluster: SIGINT (Ctrl-C) while the job runs: exit 130, the job
#                CANCELLED; --timeout 60: the doctor gives up before job.signal (due 85-95 s
#                after the start here), cancels the job, exits 1 and says so
#   bad_input    no cluster: options of --requeue without it, a --timeout out of range, no sbatch
# A requeued job waits for BeginTime (cred_expire, 120 s): as tests/slurm/preempt_test.sh does, the
# test starts each restart with `scontrol update StartTime=now` once slurmd allows it, so the
# table's "requeue -> restart" is seconds here, not the ~2 minutes of a real site.
set -euo pipefail
case_name=$1 hpclaunch=$2
fail() {
  echo "FAIL: $*" >&2
  for f in "${work:-/nonexistent}"/*.err "${work:-/nonexistent}"/*.out; do
    [[ -f $f ]] && { echo "--- $f" >&2; tail -n 40 "$f" >&2; }
  done
  exit 1
}

if [[ $case_name == bad_input ]]; then
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  expect_2() {  # MESSAGE-REGEX COMMAND...: exit 2 and one line matching
    local want=$1 rc=0 out
    shift
    out=$("$@" 2>&1 >/dev/null) || rc=$?
    [[ $rc -eq 2 ]] || fail "$* exited $rc, not 2: $out"
    [[ $(wc -l <<<"$out") -eq 1 ]] || fail "$*: more than one line: $out"
    grep -Eq -- "$want" <<<"$out" || fail "$*: '$out' does not match '$want'"
    echo "exit 2: $out"
  }
  expect_2 '--host.*is an option of doctor --requeue.*add --requeue' "$hpclaunch" doctor --host x
  expect_2 '--timeout.*out of range.*60 to 86400' "$hpclaunch" doctor --requeue --timeout 5
  ln -s "$(command -v bash)" "$bin/bash"
  expect_2 'no sbatch on this machine.*--host LOGIN' env PATH="$bin" "$hpclaunch" doctor --requeue
  exit 0
fi

# job_field, wait_state, wait_submitted, begin_job_test (this test's $work and job $name)
# shellcheck source-path=SCRIPTDIR source=../slurm/job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../slurm/job_lib.sh"
if [[ $case_name == jobrequeue0 ]]; then
  testcluster=$3 port_base=$4 ssh_port=$5
  cluster_dir="/tmp/hpclaunch-requeue0-$(printf '%s' "$PWD" | md5sum | cut -c1-6)"
  cleanup_extra() { "$testcluster" down --dir "$cluster_dir" >/dev/null 2>&1 || true; }
fi
begin_job_test doctor-requeue
if [[ $case_name == jobrequeue0 ]]; then
  "$testcluster" up --dir "$cluster_dir" --port-base "$port_base" --ssh-port "$ssh_port" \
    --conf-extra JobRequeue=0 >"$work/cluster.log" 2>&1 ||
    fail "the JobRequeue=0 cluster did not come up: $(tail -n 5 "$work/cluster.log")"
  eval "$("$testcluster" env --dir "$cluster_dir")"
fi
: "${SLURM_CONF:?run me through ctest (the slurm_cluster fixture sets SLURM_CONF)}"

# doctor TAG [ARGS]: the doctor in the background ($doctor), each restart started at once.
doctor() {
  local tag=$1 job poked=0 r pending_at
  shift
  "$hpclaunch" doctor --requeue --no-project --set "job.name=$name" "$@" \
    >"$work/$tag.out" 2>"$work/$tag.err" &
  doctor=$!
  follower=$doctor  # killed on exit by end_job_test
  job=$(wait_submitted "$work/$tag.err") || fail "$tag: no job submitted"
  while kill -0 "$doctor" 2>/dev/null; do
    r=$(job_field "$job" Restarts)
    if [[ $(job_field "$job" JobState) == PENDING ]] && ((${r:-0} > poked)); then
      pending_at=$(date +%s)
      while (($(date +%s) <= pending_at)); do sleep 0.05; done
      for _ in $(seq 20); do
        scontrol update "JobId=$job" StartTime=now 2>/dev/null && break
        sleep 0.25
      done
      poked=$r
    fi
    sleep 0.2
  done
  rc=0
  wait "$doctor" || rc=$?
  follower=""
  doctor_job=$job
}
# row LINK STOP TAG: the table's row of one link.
row() {
  awk -v l="$1" -v s="$2" 'index($0, l) == 1 && $0 ~ ("  " s "  ") { print; exit }' "$work/$3.out"
}
# want LINK STOP TAG REGEX: the row matches REGEX (grep -E).
want() {
  row "$1" "$2" "$3" | grep -Eq -- "$4" || fail "$3: $1 ($2) does not match '$4'"
}
whole_cycle_ok() {  # TAG: exit 0, every link OK, the job COMPLETED after two requeues
  local tag=$1 stop
  cat "$work/$tag.out"
  [[ $rc -eq 0 ]] || fail "$tag: doctor exited $rc, not 0"
  ! grep -q 'FAIL' "$work/$tag.out" || fail "$tag: a link failed"
  for stop in USR1 TERM; do
    for link in "stop reaches the program" "checkpoint + marker" "scontrol requeue" \
      "SLURM_RESTART_COUNT" "requeue -> restart" "counter resumed"; do
      want "$link" "$stop" "$tag" "  OK  "
    done
  done
  want SLURM_RESTART_COUNT USR1 "$tag" 'OK      1 in the restarted job'
  want SLURM_RESTART_COUNT TERM "$tag" 'OK      2 in the restarted job'
  want "counter resumed" USR1 "$tag" 'OK      ([0-9]+) -> \1, nothing lost'
  want "counter resumed" TERM "$tag" 'OK      ([0-9]+) -> \1, nothing lost'
  want "stop reaches the program" USR1 "$tag" \
    'after the start, [0-9]+ s before the limit \(asked 90 s\)'
  grep -q '^job ends .* OK      COMPLETED, Restarts=2$' "$work/$tag.out" ||
    fail "$tag: no job ends line"
  [[ $(job_field "$doctor_job" JobState) == COMPLETED ]] || fail "$tag: job not COMPLETED"
  [[ $(job_field "$doctor_job" Restarts) == 2 ]] || fail "$tag: job's Restarts is not 2"
}

started=$SECONDS
case $case_name in
  allowed)
    doctor allowed
    whole_cycle_ok allowed
    grep -q 'JobRequeue=1' "$work/allowed.out" || fail "the header does not say JobRequeue=1"
    ;;
  ssh)
    cluster_dir=$(dirname "$(dirname "$SLURM_CONF")")
    doctor ssh --host testlogin --ssh-config "$cluster_dir/ssh/config" \
      --remote-runs-dir "$work/remote-runs"
    whole_cycle_ok ssh
    grep -q "via .*@127.0.0.1" "$work/ssh.out" || fail "ssh: the header names no login node"
    ;;
  bounded)
    "$hpclaunch" doctor --requeue --no-project --set "job.name=$name" >"$work/int.out" \
      2>"$work/int.err" &
    follower=$!
    job=$(wait_submitted "$work/int.err") || fail "interrupt: no job submitted"
    [[ $(wait_state "$job" 60 RUNNING) == RUNNING ]] || fail "interrupt: job $job not RUNNING"
    kill -INT "$follower"
    rc=0
    wait "$follower" || rc=$?
    follower=""
    [[ $rc -eq 130 ]] || fail "interrupt: doctor exited $rc, not 130"
    grep -q "^hpclaunch doctor: cancelled job $job$" "$work/int.err" || fail "interrupt: no line"
    [[ $(wait_state "$job" 30 CANCELLED) == CANCELLED ]] || fail "interrupt: job not CANCELLED"
    echo "interrupt: exit 130, job $job CANCELLED"
    doctor timeout --timeout 60
    cat "$work/timeout.out"
    [[ $rc -eq 1 ]] || fail "timeout: doctor exited $rc, not 1"
    grep -q "^hpclaunch doctor: gave up after 60 s (--timeout), the job was RUNNING, restarts 0; \
run it again with a larger --timeout" "$work/timeout.err" || fail "timeout: no line"
    want "stop reaches the program" USR1 timeout "-       not reached: gave up after 60 s"
    [[ $(wait_state "$doctor_job" 30 CANCELLED) == CANCELLED ]] || fail "timeout: not CANCELLED"
    ;;
  jobrequeue0)
    doctor asks
    whole_cycle_ok asks
    want "scontrol requeue" USR1 asks "accepted \(JobRequeue=0, the job's Requeue=1\)"
    SBATCH_NO_REQUEUE=1 doctor refused
    cat "$work/refused.out"
    [[ $rc -eq 1 ]] || fail "refused: doctor exited $rc, not 1"
    line=$(grep '^FAIL ' "$work/refused.out") || fail "refused: no FAIL line"
    [[ $(wc -l <<<"$line") -eq 1 ]] || fail "refused: more than one FAIL line"
    grep -q '^FAIL scontrol requeue (USR1): refused: Requested operation is presently disabled' \
      <<<"$line" || fail "refused: the FAIL line does not name scontrol requeue: $line"
    grep -q "SBATCH_NO_REQUEUE=1 in the login environment wins over the script's #SBATCH \
--requeue (and JobRequeue=0" <<<"$line" || fail "refused: the FAIL line does not say why"
    grep -q -- '-> unset SBATCH_NO_REQUEUE where hpclaunch submits' <<<"$line" ||
      fail "refused: the FAIL line has no fix"
    [[ $(job_field "$doctor_job" JobState) == FAILED ]] || fail "refused: job not FAILED"
    ;;
  *)
    echo "usage: $0 allowed|ssh|jobrequeue0|bad_input HPCLAUNCH [TESTCLUSTER PORT SSH_PORT]" >&2
    exit 2
    ;;
esac
echo "$case_name: passed in $((SECONDS - started)) s"
