# shellcheck shell=bash
# Shared by the shell tests that run jobs on the test cluster (tests/slurm/*_test.sh,
# tests/programs/programs_test.sh): reading a job's fields and waiting for its states. Sourced;
# needs scontrol on PATH and SLURM_CONF set (the CTest fixture slurm_cluster).

# A bound against a hang, in seconds, times HPC_TEST_SLOWDOWN (a number >= 1; unset: 1) for a
# machine slower than the slowest one the bounds were chosen for (docs/hacking.md#time-bounds).
bound() {  # SECONDS -> SECONDS x HPC_TEST_SLOWDOWN, a whole number
  awk -v s="$1" -v f="${HPC_TEST_SLOWDOWN:-1}" 'BEGIN { if (!(f >= 1)) f = 1; if (f > 100) f = 100; printf "%d", s * f + 0.5 }'
}

job_field() {  # JOB KEY: a field of `scontrol show job -o`
  scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"
}
wait_state() {  # JOB SECONDS STATE...: waits until JobState is one of them; prints it
  local job=$1 until=$((SECONDS + $(bound "$2"))) s want
  shift 2
  while ((SECONDS < until)); do
    s=$(job_field "$job" JobState)
    for want in "$@"; do [[ $s == "$want" ]] && { echo "$s"; return 0; }; done
    sleep 0.2
  done
  echo "${s:-?}"
  return 1
}
# The job id from hpclaunch's "submitted job N" line in ERRFILE.
submitted_id() { sed -n 's/.*submitted job \([0-9]*\).*/\1/p' "$1" | head -n 1; }
wait_submitted() {  # ERRFILE -> job id, within 60 s
  local id _
  for _ in $(seq 600); do
    id=$(submitted_id "$1")
    [[ -n $id ]] && { echo "$id"; return 0; }
    sleep 0.1
  done
  return 1
}

# begin_job_test PREFIX: this test's folder $work (removed on exit) and its job name $name
# (PREFIX-CASE-PID, CASE from $case_name). On exit, cleanup_extra runs first when the test
# defines it, then the test's jobs still known to Slurm are cancelled and $follower (a
# background hpclaunch, when set) is killed. Every case runs in its own config folder, with
# Gloo on loopback and one thread.
begin_job_test() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/$1-test.XXXXXX")
  name="$1-${case_name:?the test sets case_name first}-$$"
  trap end_job_test EXIT
  cd "$work" || exit 1
  export XDG_CONFIG_HOME="$work/xdg" HPCLAUNCH_PATH="" GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1
}
jobs_of_test() { squeue --noheader --name "$name" --format %i 2>/dev/null || true; }
end_job_test() {
  local ids
  if declare -F cleanup_extra >/dev/null; then cleanup_extra || true; fi
  if [[ -n "${SLURM_CONF:-}" ]]; then
    mapfile -t ids < <(jobs_of_test)
    ((${#ids[@]} == 0)) || scancel "${ids[@]}" 2>/dev/null || true
  fi
  [[ -z "${follower:-}" ]] || kill "$follower" 2>/dev/null || true
  rm -rf "$work"
}
# fail_showing LINES MESSAGE FILE...: MESSAGE and the last LINES lines of each FILE that exists,
# on stderr; exits 1.
fail_showing() {
  local lines=$1 message=$2 f
  shift 2
  echo "FAIL: ${message}" >&2
  for f in "$@"; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n "$lines" "$f" >&2; }; done
  exit 1
}
