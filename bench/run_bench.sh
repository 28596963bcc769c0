#!/usr/bin/env bash
# hpclaunch's slurm backend on a real test cluster (scripts/testcluster.sh), two figures:
#   1. latency: from the start of `hpclaunch run` to the first line of the job's log on its
#      stdout, vs a bare `sbatch --parsable` of the same rendered script + a poll loop
#      (`scontrol show job` every 0.25 s until StdOut exists, then `tail -F`), median of N each,
#      alternating (ABAB) so that load from other processes hits both alike; target <= 1.2x.
#   2. follow-mode CPU while waiting: `hpclaunch logs -f` and `hpclaunch run` on a job that
#      sleeps 30 s printing nothing; utime+stime of hpclaunch and of the children it reaped
#      (scontrol), from /proc/PID/stat, as % of one core over the wall time; target < 1%.
# Prints figures; not a test (the machine is shared and noisy).
#
# Usage: bench/run_bench.sh [--hpclaunch PATH] [--dir D] [--port-base B] [--ssh-port P]
#                           [--runs N] [--sleep S]
# Brings up its own cluster in D (default /tmp/bench-cluster, ports 23000.. and 2622) and takes
# it down again at the end, also on failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
hpclaunch=""
cluster_dir=/tmp/bench-cluster
port_base=23000
ssh_port=2622
runs=10
wait_seconds=30
while (($#)); do
  case $1 in
    --hpclaunch) hpclaunch=${2:?}; shift 2 ;;
    --dir) cluster_dir=${2:?}; shift 2 ;;
    --port-base) port_base=${2:?}; shift 2 ;;
    --ssh-port) ssh_port=${2:?}; shift 2 ;;
    --runs) runs=${2:?}; shift 2 ;;
    --sleep) wait_seconds=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ -z $hpclaunch ]]; then
  for candidate in "$repo"/build/launcher/hpclaunch "$repo"/build-*/launcher/hpclaunch; do
    if [[ -x $candidate ]]; then hpclaunch=$candidate; break; fi
  done
fi
[[ -x $hpclaunch ]] || { echo "run_bench: no hpclaunch binary; pass --hpclaunch PATH" >&2; exit 2; }
hpclaunch=$(realpath "$hpclaunch")

work=$(mktemp -d /tmp/run-bench.XXXXXX)
cluster_started=0
cleanup() {
  local status=$?
  # Our jobs first (all carry the name run-bench), then the cluster we brought up.
  if ((cluster_started)); then
    scancel --name=run-bench 2>/dev/null || true
    "$repo/scripts/testcluster.sh" down --dir "$cluster_dir" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export SLURM_CONF=$cluster_dir/etc/slurm.conf  # also for the cleanup's scancel
echo "run_bench: bringing up the test cluster in $cluster_dir (ports $port_base.., ssh $ssh_port)" >&2
cluster_started=1
"$repo/scripts/testcluster.sh" up --dir "$cluster_dir" --port-base "$port_base" --ssh-port "$ssh_port" >&2
eval "$("$repo/scripts/testcluster.sh" env --dir "$cluster_dir")"

# The trainer stand-in: one line, then an optional silent sleep.
cat >"$work/probe.sh" <<'EOF'
#!/bin/bash
echo "probe rank=${SLURM_PROCID:-?} host=$(hostname)"
sleep "${PROBE_SLEEP:-0}"
EOF
chmod 0755 "$work/probe.sh"
mkdir -p "$work/xdg" "$work/path" "$work/hpc" "$work/bare"
export XDG_CONFIG_HOME=$work/xdg HPCLAUNCH_PATH=$work/path
job_args=(--no-project --preset 1n1g --set "trainer.program=$work/probe.sh"
  --set shape.cpus_per_gpu=1 --set job.name=run-bench)

# Seconds between two $EPOCHREALTIME values.
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
wait_gone() {  # JOB: until the controller no longer lists it as pending/running/completing
  while [[ -n $(squeue --noheader --jobs="$1" 2>/dev/null) ]]; do sleep 0.1; done
}

# ------------------------------------------------------------------ 1. time to the first line
"$hpclaunch" render "${job_args[@]}" -o "$work/bare/job.sbatch" 2>/dev/null

hpclaunch_first_line() {
  local t0 t1=""
  t0=$EPOCHREALTIME
  {
    while IFS= read -r _; do
      t1=$EPOCHREALTIME
      break
    done
    cat >/dev/null  # let it follow the job to its end
  } < <(cd "$work/hpc" && "$hpclaunch" run "${job_args[@]}" 2>/dev/null)
  wait $! 2>/dev/null || true
  [[ -n $t1 ]] || { echo "run_bench: hpclaunch run printed no log line" >&2; exit 1; }
  elapsed "$t0" "$t1"
}

bare_first_line() {
  local t0 t1 id stdout_path="" fd tail_pid
  t0=$EPOCHREALTIME
  id=$(cd "$work/bare" && sbatch --parsable job.sbatch)
  id=${id%%;*}
  while :; do
    stdout_path=$(scontrol show job --oneliner "$id" | grep -o 'StdOut=[^ ]*' || true)
    stdout_path=${stdout_path#StdOut=}
    [[ -n $stdout_path && -e $stdout_path ]] && break
    sleep 0.25
  done
  exec {fd}< <(exec tail -n +1 -F -s 0.05 "$stdout_path" 2>/dev/null)
  tail_pid=$!
  IFS= read -r -u "$fd" _
  t1=$EPOCHREALTIME
  kill "$tail_pid" 2>/dev/null || true
  exec {fd}<&-
  wait_gone "$id"
  elapsed "$t0" "$t1"
}

# slurmctld starts jobs on its own ~1 s tick, so a job's start depends on where in that second
# it was submitted. Each pair of runs starts at the same random fraction of a wall-clock second
# (the tick is tied to the clock), so both methods see the same spread of phases; back to back,
# one method would always land just after the other's job ended, at a phase of its own.
sleep_to_phase() {  # PHASE in [0,1): sleep until the wall clock's fraction of a second is PHASE
  sleep "$(awk -v p="$1" -v now="$EPOCHREALTIME" 'BEGIN { f = now - int(now); d = p - f; if (d < 0.05) d += 1; printf "%.3f", d }')"
}
echo "run_bench: 1. first log line, $runs runs each (alternating, same phase per pair)" >&2
hpc_times=() bare_times=()
for ((i = 1; i <= runs; i++)); do
  phase=$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", r / 32768 }')
  sleep_to_phase "$phase"
  hpc_times+=("$(hpclaunch_first_line)")
  sleep_to_phase "$phase"
  bare_times+=("$(bare_first_line)")
  echo "  run $i (phase $phase): hpclaunch run ${hpc_times[-1]} s, sbatch + poll ${bare_times[-1]} s" >&2
done
hpc_median=$(printf '%s\n' "${hpc_times[@]}" | median)
bare_median=$(printf '%s\n' "${bare_times[@]}" | median)
ratio=$(awk -v a="$hpc_median" -v b="$bare_median" 'BEGIN { printf "%.2f", a / b }')

# ------------------------------------------------------------------ 2. CPU while following
clk_tck=$(getconf CLK_TCK)
# utime+stime+cutime+cstime of PID in clock ticks (fields 14-17 of /proc/PID/stat).
cpu_ticks() {
  local stat
  stat=$(<"/proc/$1/stat")
  stat=${stat##*) }
  # shellcheck disable=SC2086  # split the fields after the command name
  set -- $stat
  echo $((${12} + ${13} + ${14} + ${15}))
}
# Samples PID until it exits; prints "cpu_seconds wall_seconds" as of the last sample.
watch_cpu() {
  local pid=$1 t0=$2 ticks=0 t1=$2 now
  while [[ -r /proc/$pid/stat ]]; do
    now=$EPOCHREALTIME
    ticks=$(cpu_ticks "$pid" 2>/dev/null) || break
    t1=$now
    sleep 0.5
  done
  awk -v t="$ticks" -v hz="$clk_tck" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f %.3f\n", t / hz, b - a }'
}

echo "run_bench: 2. CPU while following a job that sleeps ${wait_seconds} s printing nothing" >&2
t_run=$EPOCHREALTIME
(cd "$work/hpc" && PROBE_SLEEP=$wait_seconds exec "$hpclaunch" run "${job_args[@]}" >"$work/run.out" 2>"$work/run.err") &
run_pid=$!
job=""
for ((i = 0; i < 100; i++)); do
  job=$(grep -o 'submitted job [0-9]*' "$work/run.err" 2>/dev/null | awk '{ print $3 }' || true)
  [[ -z $job ]] || break
  sleep 0.1
done
[[ -n $job ]] || { echo "run_bench: hpclaunch run did not submit" >&2; exit 1; }
t_logs=$EPOCHREALTIME
(cd "$work/hpc" && exec "$hpclaunch" logs -f "$job" >"$work/logs.out" 2>"$work/logs.err") &
logs_pid=$!
ctld_pid=$(<"$cluster_dir/run/slurmctld.pid")
ctld_before=$(cpu_ticks "$ctld_pid")
watch_cpu "$run_pid" "$t_run" >"$work/run.cpu" &
watch_run=$!
read -r logs_cpu logs_wall < <(watch_cpu "$logs_pid" "$t_logs")
wait "$watch_run"
read -r run_cpu run_wall <"$work/run.cpu"
wait "$run_pid" || true
wait "$logs_pid" || true
ctld_after=$(cpu_ticks "$ctld_pid")
pct() { awk -v c="$1" -v w="$2" 'BEGIN { printf "%.2f", 100 * c / w }'; }
logs_pct=$(pct "$logs_cpu" "$logs_wall")
run_pct=$(pct "$run_cpu" "$run_wall")
ctld_pct=$(awk -v t=$((ctld_after - ctld_before)) -v hz="$clk_tck" -v w="$logs_wall" 'BEGIN { printf "%.2f", 100 * t / hz / w }')

# ------------------------------------------------------------------ figures
verdict() { awk -v v="$1" -v lim="$2" 'BEGIN { print (v <= lim ? "meets" : "MISSES") }'; }
cat <<EOF

hpclaunch slurm backend bench ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))
1. Time to the first log line (1n1g probe job, median of $runs):
     hpclaunch run                         ${hpc_median} s   (runs: ${hpc_times[*]})
     sbatch --parsable + scontrol poll     ${bare_median} s   (runs: ${bare_times[*]})
     ratio                                 ${ratio}x   (target <= 1.2x: $(verdict "$ratio" 1.2))
2. CPU while following a silent ${wait_seconds} s job (hpclaunch + its scontrol children):
     hpclaunch logs -f                     ${logs_pct}% of one core (${logs_cpu} s CPU in ${logs_wall} s)   (target < 1%: $(verdict "$logs_pct" 0.99))
     hpclaunch run                         ${run_pct}% of one core (${run_cpu} s CPU in ${run_wall} s)   (target < 1%: $(verdict "$run_pct" 0.99))
     slurmctld meanwhile (both followers)  ${ctld_pct}% of one core
EOF
