#!/usr/bin/env bash
# doctor_test.sh CASE HPCLAUNCH: one integration case of `hpclaunch doctor` on this machine.
# Tools that are not installed here are hidden anyway when this machine has them (a PATH without
# nvidia-smi and ibv_devinfo), so the "missing" lines are checked wherever the test runs.
set -euo pipefail
case_name=$1
hpclaunch=$2

fail() { echo "FAIL: $*" >&2; exit 1; }

# A PATH with the basic tools but none of nvidia-smi, ibv_devinfo, sinfo, scontrol.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for tool in bash sh env cat; do
  if p=$(command -v "$tool"); then ln -s "$p" "$bin/$tool"; fi
done
doctor() { env -u SLURM_JOB_NODELIST PATH="$bin" HPCLAUNCH_PATH= "$hpclaunch" doctor "$@"; }

case $case_name in
  text)
    out=$(doctor) || fail "exit $? (expected 0)"
    echo "$out"
    grep -q '^MISSING  gpu-topology: nvidia-smi: not found on PATH' <<<"$out" || fail "no missing nvidia-smi line"
    if [[ ! -d /sys/class/infiniband ]] || [[ -z "$(ls -A /sys/class/infiniband 2>/dev/null)" ]]; then
      grep -q '^MISSING  infiniband: no InfiniBand devices' <<<"$out" || fail "no 'no InfiniBand' line"
    fi
    grep -q '^MISSING  slurm: ' <<<"$out" || fail "no missing slurm line"
    grep -q '^MISSING  gpu-request: ' <<<"$out" || fail "no missing gpu-request line"
    grep -q 'interfaces: ' <<<"$out" || fail "no interfaces line"
    grep -q 'master-addr: ' <<<"$out" || fail "no master-addr line"
    lines=$(wc -l <<<"$out")
    [[ $lines -eq 7 ]] || fail "expected 7 lines (one per check), got $lines"
    ;;
  json)
    out=$(doctor --json --cluster jsc) || fail "exit $? (expected 0)"
    echo "$out"
    /usr/bin/python3 -c 'import json,sys; json.load(sys.stdin)' <<<"$out" || fail "--json does not parse"
    /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["cluster"] == "jsc", d["cluster"]
by = {c["check"]: c for c in d["checks"]}
assert by["gpu-topology"]["status"] == "MISSING", by["gpu-topology"]
assert "ib_suffix '"'"'i'"'"'" in by["profile"]["detail"], by["profile"]
assert by["profile"]["status"] == "OK", by["profile"]  # jsc requires an account; not here
for c in d["checks"]:
    assert set(c) == {"check", "status", "detail", "suggestion"}, c
' <<<"$out" || fail "--json content"
    ;;
  master_addr)
    out=$(SLURM_JOB_NODELIST=localhost PATH="$bin" HPCLAUNCH_PATH= "$hpclaunch" doctor) || fail "exit $?"
    echo "$out"
    grep -q '^OK       master-addr: localhost -> 127.0.0.1 (first host of SLURM_JOB_NODELIST)' <<<"$out" \
      || fail "MASTER_ADDR did not resolve localhost to 127.0.0.1"
    # With the JSC suffix: "localhosti" does not resolve, and the warning names the suffix.
    out=$(SLURM_JOB_NODELIST=localhost PATH="$bin" HPCLAUNCH_PATH= "$hpclaunch" doctor --cluster jsc) || fail "exit $?"
    echo "$out"
    grep -q "^WARN     master-addr: localhosti does not resolve.*profile.ib_suffix ('i' from cluster jsc)" <<<"$out" \
      || fail "no warning naming the suffix"
    ;;
  bad_cluster)
    set +e
    out=$(doctor --cluster jscc 2>&1); rc=$?
    set -e
    echo "$out"
    [[ $rc -eq 2 ]] || fail "exit $rc for an unknown cluster (expected 2)"
    grep -q 'jsc' <<<"$out" || fail "no did-you-mean"
    set +e
    doctor --bogus >/dev/null 2>&1; rc=$?
    set -e
    [[ $rc -eq 2 ]] || fail "exit $rc for an unknown flag (expected 2)"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS doctor:$case_name"
