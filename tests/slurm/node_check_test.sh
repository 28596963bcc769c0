#!/usr/bin/env bash
# node_check_test.sh HPCLAUNCH HPCTRAIN TESTCLUSTER_SH PORT_BASE SSH_PORT: job.preflight on a real
# Slurm cluster of three nodes (its own, brought up here beside the fixture's two-node one and
# torn down on exit, also on failure), node02 slowed by the test-only fault injection
# (HPCTRAIN_TEST_FAULTS=1 HPCTRAIN_TEST_SLOW_NODE=node02, docs/node-check.md).
#   1. `hpclaunch run` of 2 nodes x 1 rank of the real hpctrain (tiny GPT, Gloo on CPU) with
#      job.preflight.enabled lands on node[01-02]; the node check names node02 in the log with
#      its figures, the job requeues itself once (Restarts=1, ExcNodeList=node02), runs again on
#      node[01,03] with the check skipped, trains to the end, COMPLETED; hpclaunch exits 0.
#   2. The user config (XDG_CONFIG_HOME) records node02 for cluster generic with today's date,
#      the job and the figures; `hpclaunch clusters show generic` lists it.
#   3. The next submission to the cluster says it excludes node02 and its job has
#      ExcNodeList=node02; `hpclaunch clusters forget-nodes generic` forgets it.
#   4. Without a spare node (the job asks for all three): the log says it is not requeued and
#      training goes on, COMPLETED with Restarts=0.
set -euo pipefail
hpclaunch=$1 hpctrain=$2 testcluster=$3 port_base=$4 ssh_port=$5
# shellcheck source-path=SCRIPTDIR source=job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/node-check-test.XXXXXX")
cluster_dir="/tmp/hpclaunch-nodecheck-$(printf '%s' "$PWD" | md5sum | cut -c1-6)"
cleanup() {
  [[ -z "${follower:-}" ]] || kill "$follower" 2>/dev/null || true
  "$testcluster" down --dir "$cluster_dir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.err "$work"/*.out; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}

"$testcluster" up --dir "$cluster_dir" --nodes 3 --port-base "$port_base" --ssh-port "$ssh_port" \
  >"$work/cluster.log" 2>&1 || fail "the 3-node cluster did not come up: $(tail -n 5 "$work/cluster.log")"
eval "$("$testcluster" env --dir "$cluster_dir")"
cd "$work"
export XDG_CONFIG_HOME="$work/xdg" HPCLAUNCH_PATH="" GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1

for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog."; done >corpus.txt
run_job() {  # TAG NODES: hpclaunch run with the node check on and node02 slowed
  local tag=$1 nodes=$2
  "$hpclaunch" run --no-project --preset 2n2g --set "shape.nodes=$nodes" \
    --set shape.gpus_per_node=1 --set shape.cpus_per_gpu=1 --set "job.name=nc-$tag-$$" \
    --set "trainer.program=$hpctrain" --set job.preflight.enabled=true \
    --set profile.env.HPCTRAIN_TEST_FAULTS.value=1 \
    --set profile.env.HPCTRAIN_TEST_SLOW_NODE.value=node02 \
    --set profile.env.HPCTRAIN_TEST_SLOW_FACTOR.value=8 -- \
    --data corpus.txt --data-format text --model tiny --micro-batch 4 --seq-len 64 \
    --total-batch-tokens 1536 --max-steps 10 --eval-every 0 --threads 1 --log-every 5 \
    >"$tag.out" 2>"$tag.err"
}

# --- 1. slow node02: requeued once without it, then trains
run_job slow 2 &
follower=$!
job=$(wait_submitted slow.err) || fail "no job submitted"
# A requeued job waits for BeginTime (~2 min on Slurm); let it start sooner, but not in the second
# the slurmds revoked its credential (they refuse one made then or earlier): PENDING (no longer
# COMPLETING) with Restarts=1, then the next second (as preempt_test.sh does).
for _ in $(seq 600); do
  [[ $(job_field "$job" Restarts) == 1 && $(job_field "$job" JobState) == PENDING ]] && break
  sleep 0.1
done
pending_at=$(date +%s)
while (($(date +%s) <= pending_at)); do sleep 0.05; done
for _ in $(seq 20); do scontrol update "JobId=$job" StartTime=now 2>/dev/null && break; sleep 0.25; done
status=0
wait "$follower" || status=$?
follower=""
((status == 0)) || fail "hpclaunch run exited with $status"
log=$(cat slow.out slow.err)
grep -q '^hpclaunch: node check: slow node(s) node02 (node02 gemm [0-9.]* GFLOP/s is [0-9]*% below the median [0-9.]*.*): requeueing job '"$job"' once without them$' <<<"$log" ||
  fail "the log does not name node02 with its figures and the requeue"
grep -q 'hpclaunch: node check: skipped (the job was requeued for it once already)' <<<"$log" ||
  fail "the requeued run did not skip the check"
[[ $(job_field "$job" JobState) == COMPLETED ]] || fail "job $job is $(job_field "$job" JobState), not COMPLETED"
[[ $(job_field "$job" Restarts) == 1 ]] || fail "job $job restarted $(job_field "$job" Restarts) times, not once"
[[ $(job_field "$job" ExcNodeList) == node02 ]] || fail "ExcNodeList is $(job_field "$job" ExcNodeList)"
[[ $(job_field "$job" NodeList) == "node[01,03]" ]] || fail "the job ran on $(job_field "$job" NodeList)"
grep -q '0: step *9 ' <<<"$log" || fail "the requeued job did not train to its last step"
echo "ok: node02 named, job $job requeued once without it and trained on node[01,03]"

# --- 2. remembered per cluster, listed
cfg="$XDG_CONFIG_HOME/hpclaunch/excluded-nodes.json"
[[ -f $cfg ]] || fail "no $cfg"
python3 - "$cfg" "$job" "$(date -u +%Y-%m-%d)" <<'PY' || fail "$cfg: $(cat "$cfg")"
import json, sys
doc = json.load(open(sys.argv[1]))
[n] = doc["generic"]
assert n["node"] == "node02" and n["job"] == sys.argv[2] and n["date"] == sys.argv[3], n
assert "gemm" in n["figures"] and "below the median" in n["figures"], n
PY
"$hpclaunch" clusters show generic >show.out 2>&1 || fail "clusters show: $(cat show.out)"
grep -q "^#   node02  $(date -u +%Y-%m-%d)  job $job  excluded  node02 gemm" show.out ||
  fail "clusters show does not list node02: $(tail -n 3 show.out)"
echo "ok: node02 remembered for cluster generic and listed by clusters show"

# --- 3. the next submission excludes it; forget-nodes forgets it
"$hpclaunch" submit --no-project --preset 2n2g --set shape.gpus_per_node=1 \
  --set shape.cpus_per_gpu=1 --set "job.name=nc-next-$$" --set trainer.program=/bin/true \
  >next.out 2>next.err || fail "submit: $(cat next.err)"
grep -q '^hpclaunch: excluding node02 (named slow by a node check on generic, kept 14 days' next.err ||
  fail "no note of the exclusion: $(cat next.err)"
next=$(cat next.out)
[[ $(job_field "$next" ExcNodeList) == node02 ]] || fail "job $next: ExcNodeList=$(job_field "$next" ExcNodeList)"
wait_state "$next" 60 COMPLETED >/dev/null || fail "job $next did not complete"
"$hpclaunch" clusters forget-nodes generic | grep -q '^forgot 1 slow node(s) of cluster generic$' ||
  fail "forget-nodes"
"$hpclaunch" clusters show generic | grep -q node02 && fail "node02 still listed after forget-nodes"
echo "ok: the next job excluded node02; forget-nodes forgot it"

# --- 4. no spare node: said, and training goes on
run_job full 3 || fail "hpclaunch run (3 nodes) exited with $?"
full=$(submitted_id full.err)
grep -q "^hpclaunch: node check: slow node(s) node02 (.*): not requeued: without them partition debug has 2 usable node(s), the job needs 3; training goes on on these nodes$" \
  <(cat full.out full.err) || fail "no line saying the job cannot be requeued"
[[ $(job_field "$full" JobState) == COMPLETED && $(job_field "$full" Restarts) == 0 ]] ||
  fail "job $full: $(job_field "$full" JobState), Restarts=$(job_field "$full" Restarts)"
echo "ok: without a spare node the job trained on, and said why"
