#!/usr/bin/env bash
# From the job's start to the program's start (issue 34: at most 0.5 s beyond the program's own
# start-up, median of several runs). A local 1n1g `--launch srun` job of a Python program that
# prints the time its first line runs; the job's start is the local supervisor's start of the
# batch script (local-state.json's start_time, as slurmstepd's start of the batch step on a
# cluster). Python's own start-up (exec to that first line, the same program run bare) is
# measured in the same run and subtracted. Also printed: when the script's main() began
# (timeline.jsonl's start event), which splits the rest into bash's start and main()'s work.
# Prints figures; not a test (the machine is shared and noisy).
#
# Usage: bench/start_bench.sh [--hpclaunch PATH] [--runs N] [--python PYTHON]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
hpclaunch="$repo/build/launcher/hpclaunch"
runs=7
python=python3
while (($#)); do
  case $1 in
    --hpclaunch) hpclaunch=${2:?}; shift 2 ;;
    --runs) runs=${2:?}; shift 2 ;;
    --python) python=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "start_bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x $hpclaunch ]] || { echo "start_bench: no hpclaunch at $hpclaunch (build first)" >&2; exit 2; }
hpclaunch=$(realpath "$hpclaunch")
python=$(command -v "$python")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export XDG_CONFIG_HOME="$work/xdg" HPCLAUNCH_PATH=""
cat >prog.py <<'EOF'
import time
print(f"program-start {time.time():.6f}", flush=True)
EOF

minus() { awk -v a="$1" -v b="$2" -v c="${3:-0}" 'BEGIN { printf "%.6f\n", a - b - c }'; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# Python's own start-up: exec to its first line, the program run bare.
for _ in $(seq "$runs"); do
  t0=$(date +%s.%N)
  t1=$("$python" prog.py | awk '{print $2}')
  minus "$t1" "$t0"
done >python.txt
py=$(median <python.txt)

for i in $(seq "$runs"); do
  out=$("$hpclaunch" run --local --no-project --preset 1n1g --launch srun \
    --set job.name=startbench --set job.signal_seconds=0 -- "$python" prog.py 2>&1) ||
    { echo "$out" >&2; echo "start_bench: run $i failed" >&2; exit 1; }
  dir=$(ls -d runs/startbench-* | sort -t- -k2 -n | tail -n 1)
  started=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["start_time"])' \
    "$dir/local-state.json")
  main=$("$python" -c 'import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "start":
        print(e["time"]); break' "$dir/timeline.jsonl")
  program=$(grep -ho 'program-start [0-9.]*' "$dir"/*.out | awk '{print $2}' | head -n 1)
  [[ -n $program ]] || { cat "$dir"/*.out >&2; echo "start_bench: no program-start line" >&2; exit 1; }
  minus "$program" "$started" >>total.txt
  minus "$main" "$started" >>to_main.txt
  minus "$program" "$started" "$py" >>overhead.txt
  rm -rf "$dir"
done

ms() { awk '{printf "%.0f", $1 * 1000}'; }
echo "start_bench: $runs runs of a local 1n1g --launch srun job ($("$hpclaunch" --version | head -n 1))"
echo "  python's own start-up (bare, exec to first line):  median $(ms <<<"$py") ms"
echo "  job start -> main() begins (bash start, parse):    median $(median <to_main.txt | ms) ms"
echo "  job start -> the program's first line:             median $(median <total.txt | ms) ms"
echo "  overhead beyond python's start-up:                 median $(median <overhead.txt | ms) ms" \
  "(min $(sort -g overhead.txt | head -n 1 | ms), max $(sort -g overhead.txt | tail -n 1 | ms); target <= 500 ms)"
