#!/usr/bin/env bash
# `hpclaunch run --local` stopped without its job (SIGTERM as `timeout` sends it, SIGHUP as a
# closed terminal sends it): one line says the job goes on and how to cancel it; `list` shows
# the job RUNNING (from its supervisor's files), then the state it ended in, kept in the run
# directory (final_state) once `status` or a follow saw it.
# Usage: detach_test.sh HPCLAUNCH SOURCE_DIR
set -euo pipefail
HPCLAUNCH=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/detach-test.XXXXXX")
cleanup() {
  pkill -f "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
export XDG_CONFIG_HOME=$work/xdg HPCLAUNCH_DATA_DIR=$2 HOME=$work/home
fail() { echo "FAIL: $*"; echo "--- stderr of run:"; cat "$work/err" 2>/dev/null; exit 1; }
h() { "$HPCLAUNCH" "$@"; }
row() { h list | awk -v id="$1" '$1 == id'; }

start() { # SECONDS: a run of a program sleeping that long, in the background; sets pid and id
  # The last run's err goes first: the new run's redirection may truncate it only after the
  # loop below has read the old job id from it.
  rm -f out err
  id=""
  "$HPCLAUNCH" run --no-project --preset 1n1g --local --launch srun -- sleep "$1" >out 2>err &
  pid=$!
  for _ in $(seq 100); do
    id=$(sed -n 's/^hpclaunch: submitted job \([0-9]*\) .*/\1/p' err)
    [[ -n $id ]] && break
    sleep 0.1
  done
  [[ -n $id ]] || fail "no 'submitted job' line within 10 s"
  sleep 1 # following
}

# SIGTERM: exit 143, the line, the job still running, then cancelled and remembered.
start 60
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
((rc == 143)) || fail "run exited with $rc after SIGTERM, expected 143"
grep -qx "hpclaunch: stopped by SIGTERM; job $id goes on. Reattach: hpclaunch logs -f $id   cancel: hpclaunch cancel $id" err ||
  fail "no 'goes on ... hpclaunch cancel $id' line"
[[ $(row "$id") == *" RUNNING "* ]] || fail "list: $(row "$id") (expected RUNNING)"
h cancel "$id" 2>/dev/null
for _ in $(seq 100); do [[ $(h status "$id" | sed -n 's/^state *//p') == CANCELLED ]] && break; sleep 0.1; done
run_dir=$(h status "$id" | sed -n 's/^run dir *//p')
[[ $(cat "$run_dir/final_state") == CANCELLED ]] || fail "final_state: $(cat "$run_dir/final_state" 2>&1)"
[[ $(row "$id") == *" CANCELLED "* ]] || fail "list: $(row "$id") (expected CANCELLED)"
echo "ok SIGTERM: exit 143, job $id went on (RUNNING), then CANCELLED, kept in final_state"

# SIGHUP: exit 129, the job ends on its own; list shows COMPLETED (asked once, then kept).
start 3
kill -HUP "$pid"
rc=0
wait "$pid" || rc=$?
((rc == 129)) || fail "run exited with $rc after SIGHUP, expected 129"
grep -q "stopped by SIGHUP; job $id goes on" err || fail "no 'stopped by SIGHUP' line"
for _ in $(seq 100); do [[ $(row "$id") == *" COMPLETED "* ]] && break; sleep 0.1; done
[[ $(row "$id") == *" COMPLETED "* ]] || fail "list: $(row "$id") (expected COMPLETED)"
run_dir=$(h status "$id" | sed -n 's/^run dir *//p')
[[ $(cat "$run_dir/final_state") == COMPLETED ]] || fail "final_state after list: not COMPLETED"
# What a damaged or hostile file says never reaches the table.
printf '\033]0;pwn\007\n' >"$run_dir/final_state"
[[ $(row "$id") == *" COMPLETED "* ]] || fail "list with a damaged final_state: $(row "$id" | od -c | head -3)"
echo "ok SIGHUP: exit 129, job $id went on and COMPLETED; list shows it"
