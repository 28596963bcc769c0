#!/usr/bin/env bash
# ib_test.sh CASE TESTCLUSTER_SH DIR PORT_BASE SSH_PORT RDZV_PORT HPCLAUNCH HPCTRAIN VENV PROGRAMS:
# a test cluster whose InfiniBand names are other addresses than its host names, as on JSC's
# JUWELS (jwb0001 / jwb0001i; issue 28): `scripts/testcluster.sh up --ib-netns` runs it in a
# network namespace of its own, where node01 is 192.0.2.1 and node01i 192.0.2.101 (DIR/etc/hosts
# over /etc/hosts). Slurm's commands and hpclaunch run in there through DIR/bin/in-cluster, and
# hpclaunch's jobs have profile.ib_suffix=i: MASTER_ADDR must be node01i's address, 192.0.2.101,
# which is not the address of any node's host name.
#   up                  brings the cluster up (the fixture ib_cluster); in there node01 and node01i
#                       resolve to their own addresses, Slurm reaches node01 at 192.0.2.1
#   down                takes it down: no process left in the namespace, the namespace gone
#   allreduce_torchrun  examples/programs/allreduce.py under --launch torchrun on 2n2g (the venv's
#                       torchrun, c10d rendezvous at 192.0.2.101): 4 ranks, sum 6, both nodes; the
#                       rendered script and the log say MASTER_ADDR=192.0.2.101 (node01i); node 0's
#                       agent was told is_host 1, node 1's 0; the MASTER_ADDR torchrun gives its
#                       workers (its agents' INFO log, LOGLEVEL=INFO) is printed
#   allreduce_srun      the same program under --launch srun: 4 ranks, sum 6, both nodes,
#                       MASTER_ADDR 192.0.2.101
#   hpctrain            hpctrain 2n2g ddp (tiny model, text data, 5 steps): COMPLETED, 4 ranks,
#                       every step logged, MASTER_ADDR 192.0.2.101
#   rendezvous_control  what the template's is_host guards, by hand: one torchrun per node
#                       (srun -N2), c10d rendezvous at 192.0.2.101:RDZV_PORT, read_timeout=10.
#                       Without is_host no agent hosts the store and both time out ("The client
#                       socket has timed out ... (192.0.2.101, PORT)"); with is_host=1 on node 0
#                       and 0 on node 1 the 2 workers meet, all-reduce, and print the MASTER_ADDR
#                       torchrun gave them
# A missing tool (ip, nsenter, unshare, mount, setpriv) or Python environment: skipped (77), and
# FAIL under CI=true.
set -euo pipefail
case_name=$1 testcluster=$2 dir=$3 port_base=$4 ssh_port=$5 rdzv_port=$6 hpclaunch=$7 hpctrain=$8
venv=$9 programs=${10}
incluster=$dir/bin/in-cluster
readonly ib_addr=192.0.2.101 node_addr=192.0.2.1

missing() {
  if [[ ${CI:-} == true ]]; then
    echo "FAIL (CI=true): $*" >&2
    exit 1
  fi
  echo "WARN: skipped: $*" >&2
  exit 77
}
need_tools() {
  local t
  for t in ip nsenter unshare mount setpriv; do
    command -v "$t" >/dev/null || [[ -x /usr/sbin/$t || -x /sbin/$t ]] ||
      missing "'$t' not found (iproute2, util-linux, mount); run scripts/install-deps.sh"
  done
}
need_venv() {
  [[ -n $venv && -e $venv/.hpclaunch-complete ]] ||
    missing "the tests' Python environment ${venv:-(none: no Debian python3?)} is not" \
      "installed; run scripts/install-deps.sh --python"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/ib-test.XXXXXX")
chmod 755 "$work"
name="ib-$case_name-$$"
in_cluster() { "$incluster" "$@"; }
cleanup() {
  local ids
  if [[ -x $incluster ]]; then
    mapfile -t ids < <(in_cluster squeue --noheader --name "$name" --format %i 2>/dev/null || true)
    ((${#ids[@]} == 0)) || in_cluster scancel "${ids[@]}" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$work"/*.err "$work"/*.out; do
    [[ -f $f ]] && { echo "--- $f" >&2; grep -v 'frame #' "$f" | tail -n 40 >&2; }
  done
  exit 1
}
expect() { # FILE REGEX WHAT: FILE has a line matching the extended REGEX
  grep -Eq -- "$2" "$1" || fail "$3 (no line matching '$2' in ${1##*/})"
}
cd "$work"

# NAME's first IPv4 address in the cluster.
addr_of() { in_cluster getent ahostsv4 "$1" | awk 'NR == 1 { print $1 }'; }
# The cluster of the fixture must be up: in-cluster reaches its controller.
need_cluster() {
  [[ -x $incluster ]] || fail "no $incluster: ib:up did not bring the cluster up"
  in_cluster scontrol ping | grep -q 'is UP' ||
    fail "the cluster's slurmctld does not answer (in-cluster scontrol ping)"
}

# hpclaunch run on 2 nodes x 2 GPUs, one CPU per rank, node01i's address as MASTER_ADDR.
launch_run() { # OUT MODE [SPEC ARGS...] -- PROGRAM [ARGS...]
  local out=$1 mode=$2
  shift 2
  XDG_CONFIG_HOME="$work/xdg" HPCLAUNCH_PATH="" in_cluster timeout 300 "$hpclaunch" run --no-project \
    --preset 2n2g --launch "$mode" --set profile.ib_suffix=i --set shape.cpus_per_gpu=1 \
    --set "job.name=$name" "$@" >"$out.out" 2>"$out.err"
}
# The batch script hpclaunch rendered (runs/NAME-JOB/script.sbatch) asks for the suffix, and the
# job's log says it resolved node01i to 192.0.2.101.
check_master_addr() { # OUT
  local script
  script=$(find "$work/runs" -name script.sbatch -path "*/$name-*" | head -n 1)
  [[ -n $script ]] || fail "no runs/$name-*/script.sbatch"
  expect "$script" "^  hpc_rendezvous i " "the rendered script does not add the suffix i"
  expect "$1.out" "MASTER_ADDR=$ib_addr \(node01i\) MASTER_PORT=[0-9]+$" \
    "MASTER_ADDR is not node01i's address $ib_addr"
  grep -E "MASTER_ADDR=" "$1.out"
}
check_allreduce() { # OUT LABEL
  local out=$1.out label=$2 r
  grep -E "rank [0-9]/4|sum of ranks|hosts:" "$out"
  for r in 0 1 2 3; do expect "$out" "rank $r/4 local [01] on node0[12]$" "rank $r did not report"; done
  expect "$out" "^$label: sum of ranks: 6 \(expected 6\)$" "rank 0 did not print the all-reduced sum 6"
  expect "$out" "^$label: hosts: node01,node02$" "the ranks did not run on node01 and node02"
}

# One torchrun per node by hand (srun -N2): c10d rendezvous at node01i's address, the store's
# connect timeout (read_timeout) 10 s. IS_HOST yes: is_host=1 on node 0 and 0 on node 1, as the
# template passes it; no: torchrun decides itself, as without it. Each worker all-reduces its rank
# + 1 and prints the MASTER_ADDR torchrun gave it.
worker_py=$(
  cat <<'PY'
import os, socket, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1])
dist.all_reduce(t)
print(f"worker rank {dist.get_rank()}/{dist.get_world_size()} on {socket.gethostname()}: "
      f"MASTER_ADDR={os.environ['MASTER_ADDR']} MASTER_PORT={os.environ['MASTER_PORT']} "
      f"sum {t.item()}", flush=True)
dist.destroy_process_group()
PY
)
rendezvous() { # OUT IS_HOST PORT
  local out=$1 is_host=$2 port=$3 t0=$SECONDS rc=0
  # shellcheck disable=SC2016 # expanded by each task's bash
  in_cluster timeout 150 srun --job-name="$name" --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 \
    --time=3 --label --kill-on-bad-exit=0 bash -c '
      conf=read_timeout=10
      if [[ $6 == yes ]]; then conf="is_host=$((SLURM_NODEID == 0 ? 1 : 0)),$conf"; fi
      exec "$1" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint="$2" \
        --rdzv_id="$3" --rdzv_conf="$conf" --no_python "$4" -c "$5"' \
    rdzv "$venv/bin/torchrun" "$ib_addr:$port" "$name-$is_host" "$venv/bin/python" "$worker_py" \
    "$is_host" >"$out.out" 2>&1 || rc=$?
  echo "rendezvous at $ib_addr:$port, is_host $is_host: exit $rc after $((SECONDS - t0)) s"
  return "$rc"
}

case $case_name in
  up)
    need_tools
    "$testcluster" up --ib-netns --dir "$dir" --port-base "$port_base" --ssh-port "$ssh_port" ||
      fail "testcluster.sh up --ib-netns exited $?"
    need_cluster
    in_cluster getent ahostsv4 node01 node01i node02 node02i | awk '$2 == "STREAM"' | tee hosts.out
    expect hosts.out "^$node_addr +STREAM node01$" "node01 does not resolve to $node_addr in the cluster"
    expect hosts.out "^$ib_addr +STREAM node01i$" "node01i does not resolve to $ib_addr in the cluster"
    in_cluster scontrol show node node01 | grep -o "NodeAddr=[^ ]*" | tee node.out
    expect node.out "^NodeAddr=$node_addr$" "Slurm does not reach node01 at $node_addr"
    in_cluster srun --nodes=2 --label hostname | sort | tee hostname.out
    expect hostname.out "^1: node02$" "a task on node02 does not see the host name node02"
    ;;
  down)
    "$testcluster" down --ib-netns --dir "$dir" --port-base "$port_base" ||
      fail "testcluster.sh down exited $?"
    # shellcheck source=/dev/null
    netns=$(source "$dir/cluster.env" 2>/dev/null && echo "${ib_netns:-}") || netns=
    [[ -z $netns || ! -e /run/netns/$netns ]] || fail "network namespace $netns is still there"
    if pgrep -f -- "$dir/" >left.out; then fail "processes of $dir are left: $(tr '\n' ' ' <left.out)"; fi
    echo "down: no network namespace ${netns:-(none)}, no process of $dir left"
    ;;
  allreduce_torchrun)
    need_tools
    need_venv
    need_cluster
    launch_run run torchrun --set "torchrun.command=[\"$venv/bin/torchrun\"]" \
      --set profile.env.LOGLEVEL.value=INFO -- "$programs/allreduce.py" ||
      fail "hpclaunch run exited $?"
    check_master_addr run
    check_allreduce run "[01]"
    grep -E "rdzv_endpoint|rdzv_configs" run.out | sed 's/^\([01]\): .*\]  */\1: /'
    expect run.out "^0: .*rdzv_configs *: \{'is_host': '1'" "node 0's torchrun was not told is_host 1"
    expect run.out "^1: .*rdzv_configs *: \{'is_host': '0'" "node 1's torchrun was not told is_host 0"
    expect run.out "rdzv_endpoint *: $ib_addr:[0-9]+$" "torchrun's rendezvous endpoint is not $ib_addr"
    # torchrun gives its workers a MASTER_ADDR of its own (its agents log it at INFO).
    workers_addr=$(sed -n 's/.*api.py:[0-9]*\]  *master_addr=\([^ ]*\)$/\1/p' run.out | sort -u | paste -sd' ')
    [[ -n $workers_addr ]] || fail "no master_addr= line in torchrun's log (LOGLEVEL=INFO)"
    echo "torchrun's workers get MASTER_ADDR=$workers_addr ($(addr_of "${workers_addr%% *}"));" \
      "the rendezvous endpoint was $ib_addr (node01i)"
    ;;
  allreduce_srun)
    need_tools
    need_venv
    need_cluster
    launch_run run srun -- "$venv/bin/python" "$programs/allreduce.py" || fail "hpclaunch run exited $?"
    check_master_addr run
    check_allreduce run 0
    expect run.out "^2: rank 2/4 local 0 on node02$" "rank 2 is not node02's first task"
    ;;
  hpctrain)
    need_tools
    need_cluster
    [[ -x $hpctrain ]] || fail "no hpctrain at $hpctrain"
    for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog."; done >corpus.txt
    OMP_NUM_THREADS=1 launch_run run hpctrain --strategy ddp --set "trainer.program=$hpctrain" -- \
      --data corpus.txt --data-format text --model tiny --micro-batch 4 --seq-len 64 \
      --total-batch-tokens 1024 --max-steps 5 --eval-every 0 --threads 1 --log-every 1 ||
      fail "hpclaunch run exited $?"
    check_master_addr run
    expect run.err "COMPLETED with exit code 0" "the job did not complete"
    expect run.out "^0: hpctrain: model .* world 4 \(ddp\)" "hpctrain did not start 4 ranks (ddp)"
    for s in 0 1 2 3 4; do expect run.out "^0: step +$s \| loss [0-9.]+ " "no step $s"; done
    grep -E "^0: (hpctrain:|step )" run.out
    ;;
  rendezvous_control)
    need_tools
    need_venv
    need_cluster
    [[ $(addr_of node01i) == "$ib_addr" ]] ||
      fail "node01i does not resolve to $ib_addr in the cluster"
    if rendezvous no_is_host no "$rdzv_port"; then fail "the rendezvous without is_host did not fail"; fi
    timed_out="The client socket has timed out after [0-9]+ms while trying to connect to"
    for n in 0 1; do
      expect no_is_host.out "^$n: .*$timed_out \($ib_addr, $rdzv_port\)" \
        "node $n's torchrun did not time out connecting to $ib_addr:$rdzv_port"
    done
    grep -m 2 -E "torch.distributed.DistNetworkError: The client socket has timed out" no_is_host.out || true
    rendezvous is_host yes "$((rdzv_port + 1))" || fail "the rendezvous with is_host failed"
    grep "worker rank" is_host.out
    for r in 0 1; do
      expect is_host.out "^[01]: worker rank $r/2 on node0[12]: MASTER_ADDR=[^ ]+ MASTER_PORT=[0-9]+ sum 3$" \
        "worker $r did not all-reduce"
    done
    workers_addr=$(sed -n 's/.*worker rank .*MASTER_ADDR=\([^ ]*\) .*/\1/p' is_host.out | sort -u | paste -sd' ')
    echo "torchrun's workers got MASTER_ADDR=$workers_addr ($(addr_of "${workers_addr%% *}"));" \
      "the rendezvous endpoint was $ib_addr (node01i)"
    ;;
  *)
    echo "unknown case $case_name" >&2
    exit 2
    ;;
esac
echo "ib:$case_name passed"
