#!/usr/bin/env bash
# restart_test.sh HPCLAUNCH TESTCLUSTER_SH: `hpclaunch run` follows a job through a restart of
# slurmctld (issue 29). A program counts 1..80, one line each 0.5 s; while it runs, the test
# cluster's slurmctld is stopped for 30 s and started again on its saved state
# (testcluster.sh restart-ctld). 30 s: Slurm's commands retry a lost controller for some 18 s
# before they fail, so a shorter outage is never seen by hpclaunch at all. hpclaunch must wait
# the restart out: every line arrives once and in order, the job ends COMPLETED under the same
# id, and hpclaunch exits 0 having said that the controller was unreachable and then reachable
# again. Needs no hpctrain (a bash program under --launch srun), so it runs in the trainer-less
# builds of scripts/slurm-matrix.sh too.
set -euo pipefail
hpclaunch=$1 testcluster=$2
: "${SLURM_CONF:?run me through ctest (the slurm_cluster fixture sets SLURM_CONF)}"
cluster_dir=$(dirname "$(dirname "$SLURM_CONF")")

# shellcheck source-path=SCRIPTDIR source=job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
case_name=slurm
begin_job_test restart
chmod 755 "$work"
follower=""
# The controller must be up again for whatever runs next, even if this test failed half-way.
cleanup_extra() {
  scontrol ping >/dev/null 2>&1 || "$testcluster" restart-ctld --dir "$cluster_dir" >/dev/null 2>&1
}
fail() { fail_showing 60 "$*" run.out run.err; }

cat >count.sh <<'SH'
#!/bin/bash
for i in $(seq 1 80); do echo "line $i"; sleep 0.5; done
echo "count done"
SH
chmod 755 count.sh

timeout 300 "$hpclaunch" run --no-project --preset 1n1g --launch srun --set shape.cpus_per_gpu=1 \
  --set "job.name=$name" --runs-dir "$work/runs" -- "$work/count.sh" >run.out 2>run.err &
follower=$!

# Running, and a few lines out: now the restart.
for _ in $(seq 600); do
  grep -q "line 4$" run.out 2>/dev/null && break
  kill -0 "$follower" 2>/dev/null || fail "hpclaunch run ended before the restart"
  sleep 0.1
done
grep -q "line 4$" run.out || fail "the job printed no 'line 4' within 60 s"
job=$(jobs_of_test)
[[ $job =~ ^[0-9]+$ ]] || fail "no job named $name in squeue"
"$testcluster" restart-ctld --dir "$cluster_dir" --down 30 >restart.log 2>&1 ||
  { cat restart.log >&2; fail "testcluster.sh restart-ctld failed"; }
rc=0
wait "$follower" || rc=$?
follower=""
[[ $rc -eq 0 ]] || fail "hpclaunch run exited $rc after the controller restart"

# Every line once, in order, then the last one.
seq_ok=$(sed -n 's/^\(0: \)\{0,1\}line \([0-9]*\)$/\2/p' run.out | awk '$1 != NR { bad = 1 } END { print (NR == 80 && !bad) ? "yes" : "no " NR }')
[[ $seq_ok == yes ]] || fail "the lines 1..80 did not all arrive once and in order ($seq_ok)"
grep -Eq "^(0: )?count done$" run.out || fail "the program's last line is missing"
grep -q "cannot reach slurmctld" run.err || fail "hpclaunch never saw the controller down (restart too quick?)"
grep -q "reached the scheduler again; following job $job" run.err || fail "no 'reached the scheduler again' line"
grep -q "job $job COMPLETED" run.err || fail "hpclaunch did not report COMPLETED"
state=$(job_field "$job" JobState)
[[ $state == COMPLETED ]] || fail "Slurm says job $job is ${state:-unknown}, not COMPLETED"
grep -E "cannot reach|reached the scheduler|COMPLETED" run.err
echo "restart: job $job followed through a 30 s controller outage; 80 lines in order; COMPLETED"
