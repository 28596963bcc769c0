#!/usr/bin/env bash
# hpctrain bench-allreduce on Gloo, two processes on this machine:
#  1. --min 1K --max 1M: exit 0, one table row per size (11), the JSON parses, has the same rows,
#     world 2, backend gloo, two hostnames, and busbw == algbw * 2(n-1)/n (== algbw at n = 2);
#  2. bad sizes (min > max, unparsable) exit 2 with one line, before meeting any peer.
source "$(dirname "$0")/lib.sh"
next_port
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$HPCTRAIN" bench-allreduce --min 1K --max 1M --iters 5 --warmup 2 --device cpu \
    --dist-timeout 30 --json "$WORK/ar.json" >"$WORK/r$r.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "bench-allreduce failed: $(cat "$WORK"/r*.log)"; done
cat "$WORK/r0.log"
[[ ! -s "$WORK/r1.log" ]] || fail "rank 1 printed: $(cat "$WORK/r1.log")"
grep -q "world 2 (gloo)" "$WORK/r0.log" || fail "no 'world 2 (gloo)' in the header"
rows=$(grep -cv '^#' "$WORK/r0.log")
[[ $rows -eq 11 ]] || fail "expected 11 table rows (1K..1M by 2), got $rows"
# Table rows: size count type redop time algbw busbw #wrong.
grep -v '^#' "$WORK/r0.log" | awk '
  { if ($3 != "float32" || $4 != "sum" || $8 != 0 || $2 * 4 != $1) exit 1
    if (NR == 1 && $1 != 1024) exit 1
    if (NR > 1 && $1 != 2 * prev) exit 1
    prev = $1 }
  END { if (prev != 1048576) exit 1 }' || fail "table rows are not 1K..1M float32 with 0 wrong"

"$PY" - "$WORK/ar.json" <<'PY' || fail "the JSON does not hold the expected rows"
import json, sys
j = json.load(open(sys.argv[1]))
n = j["world_size"]
assert n == 2, n
assert j["backend"] == "gloo", j["backend"]
assert len(j["hostnames"]) == 2 and all(j["hostnames"]), j["hostnames"]
rows = j["rows"]
assert [r["size"] for r in rows] == [1024 << i for i in range(11)], rows
for r in rows:
    assert r["count"] * 4 == r["size"] and r["wrong"] == 0, r
    assert r["time_us"] > 0, r
    algbw = r["size"] / (r["time_us"] * 1e-6) / 1e9
    assert abs(algbw - r["algbw_gbps"]) <= 1e-9 * max(1.0, algbw), (algbw, r)
    want = r["algbw_gbps"] * 2 * (n - 1) / n
    assert abs(r["busbw_gbps"] - want) <= 1e-12 * max(1.0, want), r
    assert abs(r["busbw_gbps"] - r["algbw_gbps"]) <= 1e-12 * max(1.0, want), r  # n == 2
print(f"json: {len(rows)} rows, busbw == algbw * 2(n-1)/n at n = {n}")
PY

# Bad sizes: one line, exit 2, no rendezvous needed (RANK etc. unset).
bad() {  # WHAT ARGS...
  local what=$1 rc=0
  shift
  env -u RANK -u WORLD_SIZE -u SLURM_PROCID -u SLURM_NTASKS \
    "$HPCTRAIN" bench-allreduce "$@" >"$WORK/bad.out" 2>"$WORK/bad.err" || rc=$?
  [[ $rc -eq 2 ]] || fail "$what: exit status $rc, not 2: $(cat "$WORK/bad.err")"
  [[ $(wc -l <"$WORK/bad.err") -eq 1 ]] || fail "$what: not one line: $(cat "$WORK/bad.err")"
  echo "$what: $(cat "$WORK/bad.err")"
}
bad "min > max" --min 1M --max 1K
bad "unparsable size" --min 1X
bad "unparsable max" --max lots
bad "factor 1" --factor 1
bad "unknown dtype" --dtype float8
echo "allreduce: ok"
