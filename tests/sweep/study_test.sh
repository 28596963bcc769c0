#!/usr/bin/env bash
# study_test.sh CASE HPCLAUNCH: sweeps over any parameter, repeats and comparisons on the local
# backend, with a program of one's own (tests/sweep/tps_program.sh prints its tokens/s), so no
# LibTorch is needed (docs/sweeps.md#axes, #repeats, #comparing-two-sweeps).
#   axes_dry_run  a sweep file with three axes over 2 presets: --dry-run writes 24 scripts, named
#                 by their values, each with its own values (a hostile NCCL value stays text:
#                 bash -n and shellcheck clean, nothing runs); presets x strategies still work as
#                 two axes; nothing is submitted
#   repeats       --repeats 3 over 1n1g and 1n2g: 6 rows, round-robin job order, the mean, the
#                 stated 95% interval, the point whose repeats disagree flagged; plots valid
#   compare       two such sweeps, the second 1.2x faster: report --compare prints the table
#                 with ratio 1.200 per point, writes compare.md, compare.csv and a valid plot
#   bad_input     bad axes: exit 2, one line with file:line:column, nothing written
set -euo pipefail
case_name=$1 hpclaunch=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export XDG_CONFIG_HOME="$work/config" HPCLAUNCH_PATH=""

fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in xmllint:libxml2-utils gnuplot:gnuplot-nox shellcheck:shellcheck; do
  command -v "${tool%%:*}" >/dev/null ||
    fail "${tool%%:*} not found: install ${tool#*:} (scripts/install-deps.sh installs it)"
done
cp "$here/tps_program.sh" "$work/prog.sh"

valid_png() { [[ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] || fail "$1 is not a PNG"; }
valid_svg() { xmllint --noout "$1" || fail "$1 does not parse"; }

# sweep OUT SCALE [flags]: the program's sweep over 1n1g and 1n2g; SCALE multiplies its figure.
sweep() {
  local out=$1 scale=$2
  shift 2
  mkdir -p "$work/counters-$out"
  "$hpclaunch" sweep --presets 1n1g,1n2g --launch srun --metric-regex 'tps ([0-9.]+)' --local \
    --no-project --out "$work/$out" --runs-dir "$work/runs" "$@" -- \
    ./prog.sh "$work/counters-$out" "$scale"
}

csv_column() {  # csv_column FILE NAME: the column's values, one a line
  awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next } { print $(col[name]) }' "$1"
}

case "$case_name" in
  axes_dry_run)
    cat >sweep.json <<'JSON'
{
  "presets": ["1n1g", "1n2g"],
  "launch": "srun",
  "trainer_args": ["./prog.sh", "--micro-batch", "4"],
  "metric": {"regex": "tps ([0-9.]+)"},
  "axes": [
    {"key": "trainer.args.micro_batch", "values": [4, 8]},
    {"key": "profile.nccl.NCCL_ALGO", "values": ["Ring", "$(touch /tmp/study-pwned)"]},
    {"key": "seed", "values": [1, 2, 3]}
  ]
}
JSON
    rm -f /tmp/study-pwned
    "$hpclaunch" sweep -f sweep.json --local --no-project --dry-run --out sw >out.txt 2>err.txt ||
      { cat err.txt >&2; fail "dry run exited with $?"; }
    grep -q '^24 points rendered into sw/scripts/ (nothing submitted)$' out.txt || { cat out.txt; fail "count line"; }
    [[ $(find sw/scripts -name '*.sbatch' | wc -l) -eq 24 ]] || fail "24 scripts expected"
    [[ ! -e runs && ! -e sw/sweep.json ]] || fail "a dry run submitted or recorded something"
    s=sw/scripts/1n2g-srun-micro_batch.8-NCCL_ALGO.Ring-seed.3.sbatch
    [[ -f $s ]] || { ls sw/scripts; fail "no script named by its values"; }
    grep -qx '  hpc_program=(./prog.sh --micro-batch 8 --seed 3)' "$s" || fail "$s: program arguments"
    grep -q '^  export NCCL_ALGO=Ring$' "$s" || fail "$s: NCCL_ALGO"
    hostile=$(ls sw/scripts/1n1g-srun-micro_batch.4-NCCL_ALGO.__touch__tmp_study-pwned__*-seed.1.sbatch) ||
      fail "the hostile value's point is not named with safe characters"
    for f in "$s" "$hostile"; do
      bash -n "$f" || fail "$f: bash -n"
      shellcheck "$f" || fail "$f: shellcheck"
    done
    grep -q 'NCCL_ALGO=.*touch /tmp/study-pwned' "$hostile" || fail "hostile value missing"
    # The value is text: sourcing the line that exports it runs nothing.
    (eval "$(grep '^  export NCCL_ALGO=' "$hostile")"; [[ $NCCL_ALGO == '$(touch /tmp/study-pwned)' ]]) ||
      fail "the hostile value did not stay text"
    [[ ! -e /tmp/study-pwned ]] || fail "a hostile value ran"
    # presets x strategies: two axes, PRESET-STRATEGY names, hpctrain's batch per point.
    "$hpclaunch" sweep --presets 1n1g,1n2g --strategy ddp,fsdp --dry-run --local --no-project \
      --steps 5 --out ps -- --model tiny --micro-batch 4 --seq-len 64 >out2.txt ||
      fail "presets x strategies dry run"
    [[ "$(ls ps/scripts | tr '\n' ' ')" == "1n1g-ddp.sbatch 1n1g-fsdp.sbatch 1n2g-ddp.sbatch 1n2g-fsdp.sbatch " ]] ||
      { ls ps/scripts; fail "presets x strategies names"; }
    grep -A1 -- '--total-batch-tokens' ps/scripts/1n1g-fsdp.sbatch | grep -q '512' || fail "strong-scaling batch"
    ;;
  repeats)
    sweep sw 1 --repeats 3 2>err.txt || { cat err.txt >&2; fail "sweep exited with $?"; }
    csv=sw/results.csv
    [[ $(wc -l <"$csv") -eq 7 ]] || { cat "$csv"; fail "6 rows expected"; }
    [[ "$(csv_column "$csv" point | tr '\n' ' ')" == "1n1g-srun 1n2g-srun 1n1g-srun 1n2g-srun 1n1g-srun 1n2g-srun " ]] ||
      fail "rows are not round-robin"
    [[ "$(csv_column "$csv" repeat | tr '\n' ' ')" == "1 1 2 2 3 3 " ]] || fail "repeat column"
    # Round-robin submission: job ids rise along the rows.
    csv_column "$csv" job_id | sort -n -c || fail "jobs were not submitted round-robin"
    [[ "$(csv_column "$csv" tokens_per_s_mean | tr '\n' ' ')" == "100.00 200.00 100.00 200.00 100.00 300.00 " ]] ||
      { cat "$csv"; fail "every repeat's figure kept"; }
    md=sw/summary.md
    grep -q '95% Student-t interval' "$md" || fail "summary does not state its spread"
    grep -q '^| 1n1g-srun | srun | 1 | 1 | 3/3 | 100.0 | 0.0 | 100.0-100.0 | 100.0 | 1.00x ± 0.00 | 100% |  | [0-9 ]* |$' "$md" ||
      { cat "$md"; fail "1n1g row"; }
    # mean 233.3; t(2) 4.303 x std 57.7 / sqrt 3 = 143.4
    grep -q '^| 1n2g-srun | srun | 1 | 2 | 3/3 | 233.3 | 143.4 | 200.0-300.0 | 116.7 | 2.33x ± 1.43 | 117% | ⚠ repeats disagree | [0-9 ]* |$' "$md" ||
      { cat "$md"; fail "1n2g row: mean, interval, flag"; }
    for p in speedup efficiency per_gpu; do
      valid_png "sw/plots/$p.png"
      valid_svg "sw/plots/$p.svg"
      grep -q yerrorlines "sw/plots/$p.gp" || fail "$p.gp has no error bars"
    done
    # report re-renders the same from results.csv.
    cp "$md" summary.first
    "$hpclaunch" report sw 2>/dev/null || fail "report exited with $?"
    cmp <(tail -n +2 "$md") <(tail -n +2 summary.first) || fail "report's summary differs"
    # A resumed sweep submits nothing.
    sweep sw 1 --repeats 3 2>err2.txt || fail "resume exited with $?"
    grep -q '6 finished before, 0 still running, 0 to submit' err2.txt || { cat err2.txt; fail "resume"; }
    ;;
  compare)
    sweep a 1 --repeats 2 2>/dev/null || fail "sweep a"
    sweep b 1.2 --repeats 2 2>/dev/null || fail "sweep b"
    "$hpclaunch" report --compare a b --out cmp >table.txt 2>err.txt ||
      { cat err.txt >&2; fail "report --compare exited with $?"; }
    cat table.txt
    grep -q '^| point | GPUs | A tokens/s | ± | B tokens/s | ± | B/A | clear |$' table.txt || fail "header"
    grep -q '^| 1n1g-srun | 1 | 100.0 | 0.0 | 120.0 | 0.0 | 1.200 ± 0.000 | yes |$' table.txt || fail "1n1g ratio"
    grep -q '^| 1n2g-srun | 2 | 200.0 | 0.0 | 240.0 | 0.0 | 1.200 ± 0.000 | yes |$' table.txt || fail "1n2g ratio"
    cmp <(sed -n '3,$p' cmp/compare.md | head -4) <(head -4 table.txt) || fail "compare.md holds the table"
    [[ "$(csv_column cmp/compare.csv ratio | tr '\n' ' ')" == "1.2000 1.2000 " ]] || fail "compare.csv"
    valid_png cmp/plots/ratio.png
    valid_svg cmp/plots/ratio.svg
    # Bad input: a directory without results, DIR with --compare.
    set +e
    "$hpclaunch" report --compare a nowhere >o.txt 2>e.txt; rc=$?
    set -e
    [[ $rc -eq 2 && $(wc -l <e.txt) -eq 1 ]] || { cat e.txt; fail "missing sweep: exit $rc"; }
    grep -q 'nowhere: no such sweep directory' e.txt || fail "missing sweep message"
    ;;
  bad_input)
    mkdir before && cp -r before after
    printf '{\n  "presets": ["1n1g"], "launch": "srun",\n  "axes": [\n    {"key": "shape.gpus_per_nod", "values": [1, 2]}\n  ]\n}\n' >bad1.json
    printf '{"presets": ["1n1g"], "launch": "srun", "combine": "zip",\n "axes": [{"key": "seed", "values": [1, 2]},\n  {"key": "trainer.args.lr", "values": [1]}]}\n' >bad2.json
    printf '{"presets": ["1n1g"], "repeats": 0}\n' >bad3.json
    for f in bad1.json:'bad1.json:4:6: axes[0].key' bad2.json:'bad2.json:3:30: axes[1].values' bad3.json:'bad3.json: repeats'; do
      file=${f%%:*} want=${f#*:}
      set +e
      "$hpclaunch" sweep -f "$file" --local --no-project --dry-run --out out -- ./prog.sh >o.txt 2>e.txt
      rc=$?
      set -e
      [[ $rc -eq 2 ]] || { cat e.txt; fail "$file: exit $rc, not 2"; }
      [[ $(wc -l <e.txt) -eq 1 ]] || { cat e.txt; fail "$file: not one line"; }
      grep -qF "$want" e.txt || { cat e.txt; fail "$file: expected '$want'"; }
      [[ ! -e out ]] || fail "$file: something was written"
    done
    set +e
    "$hpclaunch" sweep --presets 1n1g --launch srun --local --no-project --repeats 0 -- ./prog.sh 2>e.txt
    rc=$?
    set -e
    [[ $rc -eq 2 ]] && grep -q -- '--repeats: must be at least 1' e.txt || fail "--repeats 0"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
