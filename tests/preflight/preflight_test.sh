#!/usr/bin/env bash
# hpclaunch validate --live against the --accounting test cluster (scripts/testcluster.sh: two
# partitions, debug and short (MaxTime 00:30:00, MaxNodes 1), slurmdbd with account hpcproj and
# QoS quick (MaxWall 00:10:00), enforced), here and over SSH through the cluster's sshd:
#   - a profile that disagrees with it in every way: each mismatch one line, exit 2;
#   - a job that fits: "ok", exit 0;
#   - submit: the quick preflight refuses a partition that does not exist (exit 2, one line,
#     nothing submitted), --no-preflight hands it to sbatch, which refuses it itself;
#   - a controller that cannot be reached: exit 69.
#   preflight_test.sh HPCLAUNCH CLUSTER_DIR
set -euo pipefail
hpclaunch=$1
cluster=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

export HPCLAUNCH_DATA_DIR
HPCLAUNCH_DATA_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export XDG_CONFIG_HOME=$work/xdg HPCLAUNCH_PATH="" SLURM_CONF=$cluster/etc/slurm.conf
mkdir -p "$XDG_CONFIG_HOME/hpclaunch/clusters"
cat >"$XDG_CONFIG_HOME/hpclaunch/clusters/wrong.json" <<'JSON'
// Disagrees with the --accounting test cluster on every count.
{
  "description": "disagrees with the test cluster",
  "partition": "short",
  "gpu_type": "a100",
  "account": "nope",
  "qos": "quick"
}
JSON
cd "$work"
ssh_flags=(--host testlogin --ssh-config "$cluster/ssh/config" --known-hosts "$cluster/ssh/known_hosts")

# $1: what, then hpclaunch's arguments. Sets out, err, status.
run() {
  local what=$1
  shift
  status=0
  "$hpclaunch" "$@" >"$work/out" 2>"$work/err" || status=$?
  out=$(<"$work/out")
  err=$(<"$work/err")
  printf '== %s: exit %s\n%s\n%s\n' "$what" "$status" "$out" "$err"
}
expect_line() { # $1: what, $2: regex one line of $out must match
  grep -qE "$2" <<<"$out" || fail "$1: no line matching /$2/"
}

for via in here ssh; do
  extra=()
  [[ $via == ssh ]] && extra=("${ssh_flags[@]}")
  run "disagreeing profile ($via)" validate --no-project -p 2n4g -c wrong -s ddp \
    --set shape.time=01:00:00 --live "${extra[@]}"
  [[ $status == 2 ]] || fail "disagreeing ($via): exit $status, want 2"
  expect_line "time" '^mismatch \(time\): shape.time 01:00:00 is over partition short.s MaxTime 00:30:00; '
  expect_line "nodes" '^mismatch \(nodes\): 2 nodes requested, partition short allows 1 per job'
  expect_line "gres" '^mismatch \(gres\): GPU type a100 is not on partition short \(GRES types: tesla\)'
  expect_line "account" '^mismatch \(account\): account nope is not associated with user '
  expect_line "qos-time" "^mismatch \(qos-time\): shape.time 01:00:00 is over QoS quick.s MaxWall 00:10:00"
  expect_line "test-only" '^mismatch \(test-only\): sbatch --test-only refuses the job: '
  kinds=$(grep -c '^mismatch (' <<<"$out" || true)
  ((kinds >= 6)) || fail "disagreeing ($via): $kinds mismatch lines, want at least 6"
  [[ $(grep -c . <<<"$err") == 1 ]] || fail "disagreeing ($via): stderr is not one line"

  run "unknown partition and QoS ($via)" validate --no-project -p 1n4g -c wrong -s ddp \
    --set profile.partition=gpu --set profile.qos=nosuch --set profile.gpu_type=null \
    --set profile.account=hpcproj --live "${extra[@]}"
  [[ $status == 2 ]] || fail "unknown ($via): exit $status, want 2"
  expect_line "partition" '^mismatch \(partition\): partition gpu does not exist on this cluster; set profile.partition to one of: debug, urgent, short'
  expect_line "qos" '^mismatch \(qos\): QoS nosuch does not exist on this cluster; set profile.qos to one of: normal, quick'

  run "a job that fits ($via)" validate --no-project -p 1n4g -c generic -s ddp \
    --set shape.time=00:05:00 --set profile.account=hpcproj --live "${extra[@]}"
  [[ $status == 0 ]] || fail "fits ($via): exit $status, want 0"
  expect_line "ok" '^ok: the cluster would accept this job$'
  grep -q '^mismatch' <<<"$out" && fail "fits ($via): a mismatch was reported"
done

run "submit to a partition that does not exist" submit --no-project -p 1n1g \
  --set profile.partition=gpu --set shape.time=00:05:00 --runs-dir "$work/runs"
[[ $status == 2 ]] || fail "submit: exit $status, want 2"
[[ $err == "hpclaunch: error: preflight on localhost: partition gpu does not exist"* ]] ||
  fail "submit: not the preflight's line"
[[ ! -e $work/runs ]] || fail "submit: a run directory was written"
run "the same with --no-preflight" submit --no-project -p 1n1g --no-preflight \
  --set profile.partition=gpu --set shape.time=00:05:00 --runs-dir "$work/runs"
[[ $status == 2 && $err == *"invalid partition"* ]] || fail "--no-preflight: sbatch's refusal expected"

# A controller that cannot be reached (a slurm.conf naming a port nothing listens on): 69.
mkdir -p "$work/dead"
sed 's/^SlurmctldPort=.*/SlurmctldPort=1/; s/^MessageTimeout=.*//' "$SLURM_CONF" >"$work/dead/slurm.conf"
echo "MessageTimeout=2" >>"$work/dead/slurm.conf"
cp "$cluster/etc/gres.conf" "$work/dead/"
SLURM_CONF=$work/dead/slurm.conf run "controller unreachable" validate --no-project -p 1n1g --live
[[ $status == 69 ]] || fail "unreachable: exit $status, want 69"
[[ $err == *"could not reach slurmctld"* ]] || fail "unreachable: not said"

if ((fails)); then
  echo "$fails check(s) failed" >&2
  exit 1
fi
echo "preflight: all checks passed"
