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
work=$(mktemp -d "${TMPDIR:-/tmp}/cancel-test.XXXXXX")
chmod 755 "$work"
name="cancel-$$"
cleanup() {
  local ids
  ids=$(squeue --noheader --name "$name" --format %i 2>/dev/null || true)
  # shellcheck disable=SC2086  # one id per word
  [[ -z $ids ]] || { scontrol update "JobId=${ids%%$'\n'*}" Requeue=0 2>/dev/null; scancel $ids; } || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
export XDG_CONFIG_HOME="$work/xdg" HPCLAUNCH_PATH=""
fail() {
  echo "FAIL: $*" >&2
  for f in submit.err cancel.err "$work"/runs/*/*.out; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}
field() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

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
[[ $(field "$job" Requeue) == 1 ]] || fail "the job is not requeueable (Requeue=$(field "$job" Requeue)): nothing to test"
for _ in $(seq 300); do
  grep -qs "started restart=0" "$work"/runs/*/*.out && break
  sleep 0.1
done
grep -qs "started restart=0" "$work"/runs/*/*.out || fail "the program did not start within 30 s"

"$hpclaunch" cancel "$job" >cancel.out 2>cancel.err || fail "hpclaunch cancel exited $?"
for _ in $(seq 300); do
  case $(field "$job" JobState) in CANCELLED | COMPLETED | FAILED) break ;; esac
  sleep 0.1
done
sleep 5 # a requeue would show by now (PENDING again, Restarts=1)
state=$(field "$job" JobState) restarts=$(field "$job" Restarts)
[[ $state == CANCELLED && $restarts == 0 ]] ||
  fail "after hpclaunch cancel, job $job is $state with Restarts=$restarts (not CANCELLED, 0)"
grep -qs "TERM: marker written" "$work"/runs/*/*.out || echo "note: the program saw no TERM (killed first)"
echo "cancel: job $job CANCELLED, Restarts=0, though its program asked for a requeue on TERM"
