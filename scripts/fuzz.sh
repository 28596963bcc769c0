#!/usr/bin/env bash
# Builds the fuzz targets of fuzz/ with clang (libFuzzer, AddressSanitizer, UBSan) in a build
# tree of their own, runs each for a bounded time, and prints what each did.
#
#   scripts/fuzz.sh [--seconds N] [--build-dir DIR] [--jobs N] [--build-only|--no-build] [TARGET...]
#
#   TARGET        json_file, hostlist, results_csv (fuzz/*_fuzz.cc); default: all of them
#   --seconds N   how long each target runs (default 600); the CTest tests fuzz:* use 30
#   --build-dir   where the fuzzers are built and their corpora grow (default build-fuzz/)
#   --jobs N      parallel compile jobs (default: the number of cores)
#   --build-only  configure and build, run nothing (the CTest fixture fuzz:build)
#   --no-build    run what --build-only built
#
# Each target starts from its committed seeds (fuzz/corpus/TARGET/, read only) and the inputs
# earlier runs found (DIR/corpus/TARGET/, where new ones are written), with fuzz/dict/TARGET.dict
# when there is one. A crash, a leak, a sanitizer report, a broken property (fuzz/property.h) or
# an input that runs longer than 10 s fails the target: the input is saved under
# DIR/artifacts/TARGET/ and the end of the report printed, with the command that replays it.
#
# Exit status: 0 when every target ran clean, 1 when one did not, 2 for a usage error, 77 when
# clang or libFuzzer is missing (skipped; under CI=true that fails instead, with status 1).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

seconds=600
build_dir="$repo/build-fuzz"
jobs=$(nproc)
build=1
run=1
targets=()
usage() { sed -n 's/^#   scripts\/fuzz.sh/usage: scripts\/fuzz.sh/p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --seconds) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; seconds=$2; shift 2 ;;
    --build-dir) [[ -n ${2:-} ]] || usage; build_dir=$2; shift 2 ;;
    --jobs) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; jobs=$2; shift 2 ;;
    --build-only) run=0; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; usage ;;
    *) targets+=("$1"); shift ;;
  esac
done
mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)

known=()
for f in "$repo"/fuzz/*_fuzz.cc; do
  known+=("$(basename "$f" _fuzz.cc)")
done
((${#targets[@]})) || targets=("${known[@]}")
for t in "${targets[@]}"; do
  if [[ " ${known[*]} " != *" $t "* ]]; then
    echo "fuzz.sh: no target '$t'; the targets are: ${known[*]}" >&2
    exit 2
  fi
done

# The prerequisite rule of tests/support/prerequisite.h: a missing tool skips, except under CI.
missing() {
  if [[ ${CI:-} == true ]]; then
    echo "fuzz.sh: FAIL: $1 (CI=true: CI installs everything, so this is a broken setup)" >&2
    exit 1
  fi
  echo "fuzz.sh: WARN: $1; skipped" >&2
  exit 77
}
cxx=$(command -v clang++ || true)
[[ -n $cxx ]] || missing "clang++ is not installed (scripts/install-deps.sh installs clang)"
fuzzer_lib="$(clang++ -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a"
[[ -f $fuzzer_lib ]] ||
  missing "libFuzzer ($fuzzer_lib) is not installed (scripts/install-deps.sh installs libclang-rt-dev)"

if ((build)); then
  echo "fuzz.sh: building ${targets[*]} with $cxx in $build_dir"
  cmake -S "$repo/fuzz" -B "$build_dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=None \
    >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log" >&2; exit 1; }
  cmake --build "$build_dir" -j"$jobs" --target "${targets[@]/#/fuzz_}"
fi
((run)) || exit 0

# Stack traces with UBSan's reports too (ASan prints them anyway).
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

# One target: run it, then print its runs, coverage and corpus from libFuzzer's log.
fuzz_one() {
  local t=$1 bin="$build_dir/fuzz_$1" corpus="$build_dir/corpus/$1"
  local artifacts="$build_dir/artifacts/$1/" log="$build_dir/logs/$1.log"
  [[ -x $bin ]] || { echo "fuzz.sh: $t: $bin is not built (run without --no-build)" >&2; return 1; }
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$artifacts")
  [[ -f $repo/fuzz/dict/$t.dict ]] && args+=(-dict="$repo/fuzz/dict/$t.dict")
  local before status=0 started=$SECONDS
  before=$(find "$corpus" -type f | wc -l)
  touch "$artifacts.started"  # inputs saved after this are this run's findings
  echo "fuzz.sh: $t: fuzzing for $seconds s (log: $log)"
  "$bin" "${args[@]}" "$corpus" "$repo/fuzz/corpus/$t" >"$log" 2>&1 || status=$?
  # libFuzzer's last status line ("#N DONE cov: C ft: F corp: ...") and its final stats.
  local last runs rate cov ft after
  last=$(grep -E $'^#[0-9]+\t' "$log" | tail -n 1 || true)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(sed -E -n 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -E -n 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  after=$(find "$corpus" -type f | wc -l)
  echo "fuzz.sh: $t: ${runs:-?} runs in $((SECONDS - started)) s (${rate:-?}/s)," \
    "coverage ${cov:-?} edges, ${ft:-?} features, corpus $after inputs ($((after - before)) new)"
  if ((status != 0)); then
    echo "fuzz.sh: $t: FAILED (libFuzzer exit status $status); the end of its report:" >&2
    grep -v -E $'^#[0-9]+\t' "$log" | tail -n 40 >&2
    local input
    find "$artifacts" -type f -newer "$artifacts.started" | while read -r input; do
      echo "fuzz.sh: $t: replay with: $bin $input" >&2
    done
    return 1
  fi
  echo "fuzz.sh: $t: clean"
}

failed=()
for t in "${targets[@]}"; do
  fuzz_one "$t" || failed+=("$t")
done
if ((${#failed[@]})); then
  echo "fuzz.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} target(s) clean"
