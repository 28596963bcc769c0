#!/usr/bin/env bash
# cancel_test.sh HPCLAUNCH: `hpclaunch cancel` ends a job that would requeue itself on TERM.
# scancel sends TERM, which a job of hpclaunch's takes for a preemption: its program writes the
# requeue marker and the script runs `scontrol requeue`; Slurm 22.05 granted that, and the
# "cancelled" job came back PENDING with Restarts=1. hpclaunch cancel clears the job's Requeue
# flag first. Here a bash program that writes the marker on TERM (as hpctrain and the
# checkpointing examples do) runs under --launch srun; after `hpclaunch cancel` the job must be
# CANCELLED with Restarts=0, and stay so.
set -euo pipefail
hpclaunch=$1
: "${SLURM_CONF:?run me through ctest (the slurm_cluster fixture sets SLURM_CONF)}"
# shellcheck source-path=SCRIPTDIR source=job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
case_name=slurm
begin_job_test cancel
chmod 755 "$work"
# Before end_job_test's scancel: a leftover job must not requeue itself either.
cleanup_extra() {
  local id
  for id in $(jobs_of_test); do scontrol update "JobId=$id" Requeue=0 2>/dev/null || true; done
}
fail() { fail_showing 30 "$*" submit.err cancel.err "$work"/runs/*/*.out; }

cat >prog.sh <<'SH'
#!/bin/bash
# Takes TERM for a preemption: the marker says "requeue me", then the exit.
on_term() {
  echo "restart=${SLURM_RESTART_COUNT:-0}" >"$HPCLAUNCH_REQUEUE_MARKER.tmp"
  mv "$HPCLAUNCH_REQUEUE_MARKER.tmp" "$HPCLAUNCH_REQUEUE_MARKER"
  echo "TERM: marker written"
  exit 75
}
trap on_term TERM
echo "started restart=${SLURM_RESTART_COUNT:-0}"
while :; do sleep 0.2; done
SH
chmod 755 prog.sh

"$hpclaunch" submit --no-project --preset 1n1g --launch srun --set shape.cpus_per_gpu=1 \
  --set "job.name=$name" --runs-dir "$work/runs" -- "$work/prog.sh" >submit.out 2>submit.err ||
  fail "hpclaunch submit exited $?"
job=$(tail -n 1 submit.out)
[[ $job =~ ^[0-9]+$ ]] || fail "submit printed no job id"
[[ $(job_field "$job" Requeue) == 1 ]] || fail "the job is not requeueable (Requeue=$(job_field "$job" Requeue)): nothing to test"
for _ in $(seq 300); do
  grep -qs "started restart=0" "$work"/runs/*/*.out && break
  sleep 0.1
done
grep -qs "started restart=0" "$work"/runs/*/*.out || fail "the program did not start within 30 s"

"$hpclaunch" cancel "$job" >cancel.out 2>cancel.err || fail "hpclaunch cancel exited $?"
for _ in $(seq 300); do
  case $(job_field "$job" JobState) in CANCELLED | COMPLETED | FAILED) break ;; esac
  sleep 0.1
done
sleep 5 # a requeue would show by now (PENDING again, Restarts=1)
state=$(job_field "$job" JobState) restarts=$(job_field "$job" Restarts)
[[ $state == CANCELLED && $restarts == 0 ]] ||
  fail "after hpclaunch cancel, job $job is $state with Restarts=$restarts (not CANCELLED, 0)"
grep -qs "TERM: marker written" "$work"/runs/*/*.out || echo "note: the program saw no TERM (killed first)"
echo "cancel: job $job CANCELLED, Restarts=0, though its program asked for a requeue on TERM"
