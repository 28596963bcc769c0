#!/usr/bin/env bash
# A local job that fills the disk of its run directory with its log (a 512 KiB tmpfs mounted
# for the test; the program writes 1 MiB): the supervisor still records how the job ended (in
# place of its state file, when a new file no longer fits), so `status` says how it ended, not
# RUNNING or "local supervisor died", and the supervisor exits (issue 35). The log's writer (the
# srun shim, as slurmstepd) drops what does not fit; the program itself ends well, as on Slurm.
# Needs root, for the mount.
# Usage: disk_full_test.sh HPCLAUNCH SOURCE_DIR
set -euo pipefail
HPCLAUNCH=$(realpath "$1")
work=$(mktemp -d "${TMPDIR:-/tmp}/disk-full-test.XXXXXX")
small=$work/small
cleanup() {
  pkill -f "$work" 2>/dev/null || true
  umount "$small" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
export XDG_CONFIG_HOME=$work/xdg HPCLAUNCH_DATA_DIR=$2 HOME=$work/home
fail() { echo "FAIL: $*"; echo "--- run:"; cat "$work/err" 2>/dev/null; exit 1; }
mkdir -p "$small"
mount -t tmpfs -o size=512k tmpfs "$small" || fail "cannot mount a 512 KiB tmpfs (run as root)"

rc=0
"$HPCLAUNCH" run --no-project --preset 1n1g --local --launch srun --runs-dir "$small/runs" -- \
  python3 -c 'import sys
for _ in range(1024): sys.stdout.write("x" * 1023 + "\n")
sys.stdout.flush()' >/dev/null 2>err || rc=$?
id=$(sed -n 's/^hpclaunch: submitted job \([0-9]*\) .*/\1/p' err)
[[ -n $id ]] || fail "no 'submitted job' line"
[[ $(df --output=avail -k "$small" | tail -n 1) -lt 16 ]] || fail "the disk did not fill up"
state=""
for _ in $(seq 50); do
  state=$("$HPCLAUNCH" status "$id" --runs-dir "$small/runs" 2>&1) || true
  [[ $state != *RUNNING* && $state != *PENDING* ]] && break
  sleep 0.2
done
echo "$state"
[[ $state == *COMPLETED* ]] || fail "status says '$state', expected COMPLETED (run exited $rc)"
[[ $state != *"supervisor died"* ]] || fail "the supervisor died on the full disk"
supervisor=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["supervisor_pid"])' \
  "$small"/runs/*-"$id"/local-state.json)
for _ in $(seq 50); do kill -0 "$supervisor" 2>/dev/null || break; sleep 0.2; done
kill -0 "$supervisor" 2>/dev/null && fail "the supervisor of job $id (pid $supervisor) still runs"
echo "ok: the job's end on a full disk recorded by its supervisor, which then exited"
