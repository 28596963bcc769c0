# shellcheck shell=bash
# Shared by the shell tests that run jobs on the test cluster (tests/slurm/preempt_test.sh,
# tests/programs/programs_test.sh): reading a job's fields and waiting for its states. Sourced;
# needs scontrol on PATH and SLURM_CONF set (the CTest fixture slurm_cluster).

job_field() {  # JOB KEY: a field of `scontrol show job -o`
  scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"
}
wait_state() {  # JOB SECONDS STATE...: waits until JobState is one of them; prints it
  local job=$1 until=$((SECONDS + $2)) s want
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
