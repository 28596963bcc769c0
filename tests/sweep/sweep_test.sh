#!/usr/bin/env bash
# sweep_test.sh CASE HPCLAUNCH HPCTRAIN: one integration test of hpclaunch sweep (local backend,
# real hpctrain, tiny model on byte-level text: presets 1n1g and 1n2g, strategy ddp).
#   local      the sweep finishes; results.csv has a row per point with tokens/s > 0; the PNG and
#              SVG plots are valid; gnuplot re-renders them with exit 0; `report` works
#   resume     a second run submits nothing; unreadable metrics give a one-line message and the
#              other point's numbers are kept
#   bad_input  unknown preset, empty list, bad sweep file: exit 2, one line, nothing written
set -euo pipefail
case_name=$1 hpclaunch=$2 hpctrain=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export XDG_CONFIG_HOME="$work/config" HPCLAUNCH_PATH=""

fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in xmllint:libxml2-utils gnuplot:gnuplot-nox; do
  command -v "${tool%%:*}" >/dev/null ||
    fail "${tool%%:*} not found: install ${tool#*:} (scripts/install-deps.sh installs it)"
done

sweep() {
  "$hpclaunch" sweep --presets 1n1g,1n2g --strategy ddp --local --max-concurrent 2 --steps 8 \
    --out "$work/sweep" --no-project --set "trainer.program=$hpctrain" "$@" -- \
    --data /usr/share/common-licenses/GPL-3 --data-format text --model tiny --seq-len 64 \
    --micro-batch 4 --eval-every 0 --threads 1
}

# Column NAME of results.csv row N (1-based, after the header); fields here hold no commas.
csv_field() {
  awk -F, -v row="$2" -v name="$1" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    NR == row + 1 { print $(col[name]) }' "$work/sweep/results.csv"
}

check_plots() {
  for p in speedup efficiency; do
    local png="$work/sweep/plots/$p.png" svg="$work/sweep/plots/$p.svg"
    [[ -s "$work/sweep/plots/$p.gp" ]] || fail "$p.gp missing"
    [[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] || fail "$png is not a PNG"
    xmllint --noout "$svg" || fail "$svg does not parse"
    grep -q '<svg' "$svg" || fail "$svg has no <svg> element"
  done
  [[ -s "$work/sweep/plots/scaling-ddp.dat" ]] || fail "no plot data beside the scripts"
}

run_count() { find "$work/runs" -mindepth 1 -maxdepth 1 -type d | wc -l; }

first_sweep() {
  sweep 2>"$work/first.err" || { cat "$work/first.err" >&2; fail "the sweep exited with $?"; }
  [[ $(wc -l <"$work/sweep/results.csv") -eq 3 ]] || fail "results.csv should have a header and 2 rows"
  for row in 1 2; do
    [[ "$(csv_field state $row)" == COMPLETED ]] || fail "row $row: state $(csv_field state $row)"
    awk -v v="$(csv_field tokens_per_s_mean $row)" 'BEGIN { exit !(v > 0) }' ||
      fail "row $row: tokens/s '$(csv_field tokens_per_s_mean $row)' is not > 0"
    [[ -f "$(csv_field run_dir $row)/run.json" ]] || fail "row $row: no run record in its run directory"
    [[ -f "$(csv_field log $row)" ]] || fail "row $row: no log"
  done
  [[ "$(csv_field gpus 1)" == 1 && "$(csv_field gpus 2)" == 2 ]] || fail "gpus column"
  [[ "$(csv_field speedup 1)" == 1.0000 ]] || fail "the smallest point's speedup is not 1"
  [[ -s "$work/sweep/summary.md" && -s "$work/sweep/sweep.json" ]] || fail "summary.md or sweep.json missing"
  check_plots
}

case "$case_name" in
  local)
    first_sweep
    (cd "$work/sweep/plots" && gnuplot speedup.gp && gnuplot efficiency.gp) || fail "gnuplot failed"
    rm -f "$work/sweep/plots/"*.png "$work/sweep/plots/"*.svg "$work/sweep/summary.md"
    "$hpclaunch" report "$work/sweep" || fail "report exited with $?"
    check_plots
    grep -q '| 1n2g-ddp | ddp | 1 | 2 | 1/1 |' "$work/sweep/summary.md" || fail "summary.md has no 1n2g row"
    ;;
  resume)
    first_sweep
    before=$(run_count)
    cp "$work/sweep/results.csv" "$work/results.first"
    sweep 2>"$work/second.err" || { cat "$work/second.err" >&2; fail "the second sweep exited with $?"; }
    grep -q '2 finished before, 0 still running, 0 to submit' "$work/second.err" || { cat "$work/second.err" >&2; fail "the second run did not resume"; }
    [[ $(run_count) -eq $before ]] || fail "the second run submitted jobs"
    cmp "$work/sweep/results.csv" "$work/results.first" || fail "resumed results differ"
    # Unreadable metrics: a message naming the file, the row kept, the other point's numbers kept.
    printf 'not json\n{"step": 1, "tokens_per_s": 5}\n' >"$(csv_field run_dir 2)/metrics.jsonl"
    set +e
    sweep 2>"$work/third.err"
    status=$?
    set -e
    [[ $status -eq 1 ]] || { cat "$work/third.err" >&2; fail "unreadable metrics: exit $status, expected 1"; }
    grep -q 'sweep point 1n2g/ddp: COMPLETED - metrics unreadable: .*metrics.jsonl: line 1 is not a JSON object' "$work/third.err" ||
      { cat "$work/third.err" >&2; fail "no one-line message for unreadable metrics"; }
    [[ $(run_count) -eq $before ]] || fail "unreadable metrics made the sweep resubmit"
    [[ -z "$(csv_field tokens_per_s_mean 2)" && -n "$(csv_field tokens_per_s_mean 1)" ]] || fail "partial results not kept"
    ;;
  bad_input)
    expect_usage() {  # expect_usage PATTERN ARGS...: exit 2, one line matching PATTERN, nothing written
      local pattern=$1; shift
      set +e
      "$hpclaunch" "$@" >"$work/out" 2>"$work/err"
      local status=$?
      set -e
      [[ $status -eq 2 ]] || { cat "$work/err" >&2; fail "$*: exit $status, expected 2"; }
      [[ $(wc -l <"$work/err") -eq 1 ]] || { cat "$work/err" >&2; fail "$*: not one line"; }
      grep -q -- "$pattern" "$work/err" || { cat "$work/err" >&2; fail "$*: no '$pattern'"; }
      [[ ! -e "$work/out-dir" && ! -e "$work/runs" ]] || fail "$*: wrote files"
    }
    expect_usage 'unknown preset "1n3g"; did you mean' sweep --presets 1n1g,1n3g --strategy ddp --local --out "$work/out-dir"
    expect_usage '--presets: an empty value' sweep --presets '' --strategy ddp --local --out "$work/out-dir"
    expect_usage 'unknown strategy "dpp"; did you mean "ddp"' sweep --presets 1n1g --strategy dpp --local --out "$work/out-dir"
    printf '// a typo\n{"presets": ["1n1g"], "stratgies": ["ddp"]}\n' >"$work/typo.json"
    expect_usage 'typo.json: stratgies: unknown key; did you mean "strategies"' sweep -f "$work/typo.json" --local --out "$work/out-dir"
    printf '{"presets": ["1n1g",]}\n' >"$work/comma.json"
    expect_usage 'comma.json:1:' sweep -f "$work/comma.json" --local --out "$work/out-dir"
    expect_usage 'no such sweep directory' report "$work/out-dir"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "sweep:$case_name passed"
