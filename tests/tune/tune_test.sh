#!/usr/bin/env bash
# tune_test.sh CASE HPCLAUNCH HPCTRAIN: one integration test of `hpclaunch tune` with the real
# hpctrain bench-allreduce (Gloo on CPU: the NCCL variables have no effect here, the mechanics
# are what is checked). A 2-candidate grid (NCCL_ALGO Ring / Tree), sizes 1K..1M.
#   slurm      on the test cluster (tests/cluster fixture, SLURM_CONF set by CTest), preset 2n4g:
#              two benchmark jobs ran and COMPLETED (scontrol), each run directory holds its
#              allreduce.json, the tuned profile exists with both measurements and the node list,
#              `render --cluster <tuned>` exports the winner's NCCL_ALGO with its reason and is
#              bash -n / shellcheck clean, `clusters diff` and `clusters show` describe it, a
#              second tune without --force is refused before submitting
#   ssh        the same through the test cluster's sshd login node (--host), preset 2n2g
#   local      the same on the local backend with preset 1n2g
#   failing    (local) a candidate with a missing Gloo interface FAILS: a row, the other wins;
#              when every candidate fails: exit 1, no profile
#   hang       (local) a candidate that hangs is ended by its time limit: a TIMEOUT row (~1 min)
#   bad_input  empty grid, bad JSON (line:column), a variable given as an object, too many
#              candidates, a multi-node preset with --local (tune and sweep): exit 2, one line,
#              nothing written or submitted
set -euo pipefail
case_name=$1 hpclaunch=$2 hpctrain=$3
work=$(mktemp -d)
cluster="tunetest$$"  # a profile of this test's own: its jobs are named tune-$cluster-c1, -c2
cleanup() {
  if [[ $case_name == slurm || $case_name == ssh ]]; then
    for c in c1 c2; do scancel --name="tune-$cluster-$c" 2>/dev/null || true; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
export XDG_CONFIG_HOME="$work/config" HPCLAUNCH_PATH=""
mkdir -p "$XDG_CONFIG_HOME/hpclaunch/clusters"
# MASTER_PORT above 30999: the test clusters of other build trees listen on 20000-30999, and job
# ids restart at 1 with each cluster, so the default range would dial their slurmd ports.
cat >"$XDG_CONFIG_HOME/hpclaunch/clusters/$cluster.json" <<'EOF'
// the test's own copy of generic
{ "extends": "generic", "description": "tune test", "port_range": { "min": 31000, "max": 32767 } }
EOF
tuned="$XDG_CONFIG_HOME/hpclaunch/clusters/$cluster-tuned.json"

fail() {
  echo "FAIL: $*" >&2
  for log in "$work"/runs/*/*.out "$work"/remote-runs/*/*.out; do  # the jobs' logs say why a candidate failed
    [[ -f $log ]] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
  done
  exit 1
}

cat >"$work/grid.json" <<'EOF'
// Two candidates: the same benchmark with NCCL_ALGO=Ring and with NCCL_ALGO=Tree.
{ "variables": { "NCCL_ALGO": ["Ring", "Tree"] } }
EOF

tune() {  # tune PRESET BACKEND-FLAGS...
  local preset=$1
  shift
  "$hpclaunch" tune --cluster "$cluster" --preset "$preset" --grid "$work/grid.json" --no-project \
    --set "trainer.program=$hpctrain" --set shape.cpus_per_gpu=1 \
    --min 1K --max 1M --iters 5 --timeout "${timeout:-120}" --start-timeout 120 --poll 0.3 "$@" -- --device cpu
}

check_result() {  # check_result PRESET: the tuned profile and what uses it
  local preset=$1
  [[ -f $tuned ]] || fail "no tuned profile $tuned"
  python3 - "$tuned" <<'PY' || fail "the tuned profile does not hold both measurements"
import json, re, sys
text = open(sys.argv[1]).read()
p = json.loads(re.sub(r'^\s*//.*$', '', text, flags=re.M))
t = p["tuning"]
assert p["extends"].startswith("tunetest"), p["extends"]
cands = t["candidates"]
assert len(cands) == 2, cands
assert {c["vars"]["NCCL_ALGO"] for c in cands} == {"Ring", "Tree"}, cands
for c in cands:
    assert c["state"] == "COMPLETED", c
    assert c["score_gbps"] > 0, c
    assert len(c["busbw"]) == 11 and c["busbw"][-1]["size"] == 1 << 20, c["busbw"]
    assert all(r["busbw_gbps"] > 0 for r in c["busbw"]), c
win = next(c for c in cands if c["id"] == t["winner"])
assert win["rank"] == 1 and win["score_gbps"] >= max(c["score_gbps"] for c in cands), cands
assert p["nccl"]["NCCL_ALGO"]["value"] == win["vars"]["NCCL_ALGO"], p["nccl"]
assert p["nccl"]["NCCL_ALGO"]["reason"].startswith("tune "), p["nccl"]
assert t["nodes"], t
print("winner", t["winner"], win["vars"]["NCCL_ALGO"], win["score_gbps"], "GB/s on", t["nodes"])
PY
  local winner
  winner=$(python3 -c 'import json,re,sys; print(json.loads(re.sub(r"^\s*//.*$","",open(sys.argv[1]).read(),flags=re.M))["nccl"]["NCCL_ALGO"]["value"])' "$tuned")
  "$hpclaunch" render --no-project --cluster "$cluster-tuned" --preset "$preset" -o "$work/tuned.sbatch" ||
    fail "render with the tuned profile failed"
  grep -qx "  export NCCL_ALGO=$winner" "$work/tuned.sbatch" || fail "the script does not export NCCL_ALGO=$winner"
  grep -q '^  # tune .*: busbw .* GB/s vs ' "$work/tuned.sbatch" || fail "the script has no reason beside NCCL_ALGO"
  bash -n "$work/tuned.sbatch" || fail "bash -n"
  shellcheck --exclude=SC1091 "$work/tuned.sbatch" || fail "shellcheck"
  "$hpclaunch" clusters diff "$cluster" "$cluster-tuned" >"$work/diff.out" || fail "clusters diff exited with $?"
  grep -q "nccl.NCCL_ALGO: (unset) -> \"$winner\"" "$work/diff.out" || { cat "$work/diff.out"; fail "diff has no NCCL_ALGO line"; }
  "$hpclaunch" clusters show "$cluster-tuned" >"$work/show.out" || fail "clusters show exited with $?"
  grep -q "Tuned by hpclaunch tune on" "$work/show.out" || fail "clusters show does not describe the tuning"
  [[ $(grep -c 'busbw GB/s by size' "$work/show.out") -eq 2 ]] || fail "clusters show lacks the two tables"
}

run_dirs() { find "${runs:-$work/runs}" -mindepth 1 -maxdepth 1 -type d -name "tune-$cluster-c*" | sort; }

case "$case_name" in
  slurm|ssh|local)
    runs="$work/runs"
    if [[ $case_name == slurm ]]; then
      preset=2n4g backend=(--backend slurm)
    elif [[ $case_name == ssh ]]; then
      # Through the test cluster's sshd login node: the run directories (and allreduce.json,
      # read back over SSH) are on the login node's side.
      runs="$work/remote-runs"
      preset=2n2g backend=(--host testlogin --ssh-config "$TESTCLUSTER_DIR/ssh/config" --remote-runs-dir "$runs")
    else
      preset=1n2g backend=(--local)
    fi
    tune "$preset" "${backend[@]}" >"$work/tune.out" 2>"$work/tune.err" ||
      { status=$?; cat "$work/tune.out" "$work/tune.err" >&2; fail "tune exited with $status"; }
    cat "$work/tune.out"
    mapfile -t dirs < <(run_dirs)
    [[ ${#dirs[@]} -eq 2 ]] || fail "expected 2 run directories, got ${#dirs[@]}"
    for d in "${dirs[@]}"; do
      [[ -s $d/allreduce.json ]] || fail "$d has no allreduce.json"
      grep -q 'bench-allreduce' "$d/script.sbatch" || fail "$d/script.sbatch does not run bench-allreduce"
      if [[ $case_name != local ]]; then
        id=${d##*-}
        state=$(scontrol show job -o "$id" | grep -o 'JobState=[A-Z_]*')
        [[ $state == JobState=COMPLETED ]] || fail "job $id: $state"
        [[ $(scontrol show job -o "$id" | grep -o 'NumNodes=[0-9]*') == NumNodes=2 ]] || fail "job $id did not run on 2 nodes"
      fi
    done
    check_result "$preset"
    # Again without --force: refused before anything is submitted.
    set +e
    tune "$preset" "${backend[@]}" >/dev/null 2>"$work/again.err"
    status=$?
    set -e
    [[ $status -eq 2 ]] || fail "a second tune: exit $status, expected 2"
    grep -q 'a tuned profile is already there; pass --force' "$work/again.err" || { cat "$work/again.err"; fail "no --force hint"; }
    [[ $(run_dirs | wc -l) -eq 2 ]] || fail "the refused tune submitted jobs"
    ;;
  failing)
    # A candidate that fails (Gloo cannot use a missing interface) is a row, not the end: the
    # other one wins. When every candidate fails, exit 1 and nothing is written.
    echo '{"candidates": [{"GLOO_SOCKET_IFNAME": "lo"}, {"GLOO_SOCKET_IFNAME": "nosuchif0"}]}' >"$work/grid.json"
    timeout=60
    tune 1n2g --local >"$work/tune.out" 2>"$work/tune.err" ||
      { status=$?; cat "$work/tune.out" "$work/tune.err" >&2; fail "tune exited with $status"; }
    cat "$work/tune.out"
    # exit code 1 (both ranks' own), or 143 when srun's --kill-on-bad-exit ended one rank first.
    grep -Eq '^ +2 +c2 +- +FAILED .*GLOO_SOCKET_IFNAME=nosuchif0 - job ended FAILED \(exit code (1|143)\)' "$work/tune.out" ||
      fail "no FAILED row for c2"
    python3 - "$tuned" <<'PY' || fail "the tuned profile does not record the failed candidate"
import json, re, sys
p = json.loads(re.sub(r'^\s*//.*$', '', open(sys.argv[1]).read(), flags=re.M))
assert p["env"]["GLOO_SOCKET_IFNAME"]["value"] == "lo", p["env"]
assert "GLOO_SOCKET_IFNAME=nosuchif0 (c2) gave no measurement: FAILED" in p["env"]["GLOO_SOCKET_IFNAME"]["reason"], p["env"]
c2 = next(c for c in p["tuning"]["candidates"] if c["id"] == "c2")
assert c2["state"] == "FAILED" and c2["score_gbps"] is None and c2["busbw"] == [], c2
PY
    echo '{"candidates": [{"GLOO_SOCKET_IFNAME": "nosuchif0"}]}' >"$work/grid.json"
    set +e
    tune 1n2g --local --name allfail >"$work/all.out" 2>"$work/all.err"
    status=$?
    set -e
    [[ $status -eq 1 ]] || { cat "$work/all.out" "$work/all.err" >&2; fail "all candidates failed: exit $status, expected 1"; }
    grep -q 'no candidate gave a measurement; nothing written' "$work/all.err" || fail "no 'nothing written' line"
    [[ ! -e "$XDG_CONFIG_HOME/hpclaunch/clusters/allfail.json" ]] || fail "a profile was written although every candidate failed"
    ;;
  hang)
    # A candidate that hangs (the trainer wrapper sleeps when HANG=1) ends at its time limit
    # (--timeout 30: 1 minute) and is a TIMEOUT row; the other one wins. Takes about a minute.
    # shellcheck disable=SC2016 # the wrapper's own variables expand when it runs
    printf '#!/bin/bash\nif [[ ${HANG:-0} == 1 ]]; then sleep 600; fi\nexec "%s" "$@"\n' "$hpctrain" >"$work/maybe-hang.sh"
    chmod +x "$work/maybe-hang.sh"
    hpctrain="$work/maybe-hang.sh"
    echo '{"variables": {"HANG": [0, 1]}}' >"$work/grid.json"
    timeout=30
    tune 1n2g --local >"$work/tune.out" 2>"$work/tune.err" ||
      { status=$?; cat "$work/tune.out" "$work/tune.err" >&2; fail "tune exited with $status"; }
    cat "$work/tune.out"
    grep -Eq '^ +2 +c2 +- +TIMEOUT .*HANG=1 - ended at its time limit \(00:01:00, --timeout 30 s' "$work/tune.out" ||
      fail "no TIMEOUT row for the hung candidate"
    python3 -c 'import json,re,sys; p=json.loads(re.sub(r"^\s*//.*$","",open(sys.argv[1]).read(),flags=re.M)); assert p["env"]["HANG"]["value"] == "0", p["env"]' "$tuned" ||
      fail "the tuned profile does not set HANG=0"
    grep -q 'HANG=1 (c2) gave no measurement: TIMEOUT' "$tuned" || fail "the reason does not name the hung candidate"
    ;;
  bad_input)
    expect_usage() {  # expect_usage PATTERN ARGS...: exit 2, one line matching PATTERN, nothing written
      local pattern=$1
      shift
      set +e
      "$hpclaunch" "$@" >"$work/out" 2>"$work/err"
      local status=$?
      set -e
      [[ $status -eq 2 ]] || { cat "$work/err" >&2; fail "$*: exit $status, expected 2"; }
      [[ $(wc -l <"$work/err") -eq 1 ]] || { cat "$work/err" >&2; fail "$*: not one line"; }
      grep -q -- "$pattern" "$work/err" || { cat "$work/err" >&2; fail "$*: no '$pattern'"; }
      [[ ! -e "$work/runs" && ! -e $tuned && ! -e "$work/sw" ]] || fail "$*: wrote files"
      echo "ok: $(cat "$work/err")"
    }
    base=(tune --cluster "$cluster" --preset 1n2g --no-project --local)
    echo '{}' >"$work/empty.json"
    expect_usage 'empty.json: the grid has no candidates; add "variables"' "${base[@]}" --grid "$work/empty.json"
    echo '{"variables": {"NCCL_ALGO": []}}' >"$work/empty-list.json"
    expect_usage 'variables.NCCL_ALGO: an empty list of values' "${base[@]}" --grid "$work/empty-list.json"
    printf '{\n  "variables": {"NCCL_ALGO": ["Ring",]}\n}\n' >"$work/comma.json"
    expect_usage 'comma.json:2:' "${base[@]}" --grid "$work/comma.json"
    echo '{"variables": {"NCCL_ALGO": {"Ring": 1}}}' >"$work/shape.json"
    expect_usage 'variables.NCCL_ALGO: expected a list of values, got an object' "${base[@]}" --grid "$work/shape.json"
    echo '{"variables": {"NCCL_P2P_DISABLE": [0, 7]}}' >"$work/p2p.json"
    expect_usage 'candidate c2 (NCCL_P2P_DISABLE=7).*is not 0, 1 or auto' "${base[@]}" --grid "$work/p2p.json"
    expect_usage 'no such grid file' "${base[@]}" --grid "$work/missing.json"
    expect_usage 'default grid: 8 candidates, more than 4.*--max-candidates 8' "${base[@]}" --max-candidates 4
    expect_usage 'preset 2n2g has 2 nodes, but the local backend runs one node' tune --cluster "$cluster" --preset 2n2g --no-project --local
    expect_usage 'the tuned profile cannot replace the profile it extends' "${base[@]}" --name "$cluster"
    expect_usage '--presets: preset 2n2g has 2 nodes, but the local backend runs one node' \
      sweep --presets 1n1g,2n2g --strategy ddp --local --no-project --out "$work/sw"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "tune:$case_name passed"
