#!/usr/bin/env bash
# The project's own Slurm test cluster, on this one machine (Debian 12, Slurm 22.05, root):
# munged with its own key, slurmctld, N slurmd nodes node01..nodeNN on 127.0.0.1 (each in its
# own UTS namespace, so `hostname` in a task prints the node name) with 4 fake GPUs each, an
# sshd "login node" on 127.0.0.1:2222, and /etc/hosts entries for the nodes and their
# InfiniBand aliases (node01i, as on JSC clusters).
#
#   scripts/testcluster.sh up     [--dir D] [--nodes N] [--ssh-port P] [--port-base B] [--timeout S]
#                                 [--accounting] [--ib-netns] [--conf-extra LINE]...
#   scripts/testcluster.sh down   [--dir D]
#   scripts/testcluster.sh status [--dir D]      exit 0 when up, 3 when down
#   scripts/testcluster.sh restart-ctld [--dir D] [--down S]
#                                 stops slurmctld (it saves its state), waits S seconds (default
#                                 0), starts it again on that state: jobs and their ids live on
#   eval "$(scripts/testcluster.sh env [--dir D])"
#
# --conf-extra LINE (repeatable) appends LINE (Key=Value ...) to slurm.conf, after everything
# above: a test that needs a site's setting (JobRequeue=0) brings up a cluster of its own with it,
# in its own --dir and ports, and leaves the shared one alone.
#
# Everything lives under D (default /tmp/hpclaunch-testcluster): etc/ (slurm.conf, gres.conf),
# munge/, ssh/ (keys, known_hosts, `ssh -F D/ssh/config testlogin`), dev/ (fake GPUs), log/,
# run/ (pid files), state/, spool/, and jobs/ and ssh-tests/ for the tests' own files. `up` is
# idempotent; `down` cancels all jobs, then stops only the processes `up` started (found by their
# pid files, checked against their command line). Slurm port B (default 17000) is slurmctld, B+i
# is node i's slurmd.
#
# --accounting adds what a site with accounting runs, for the preflight tests: MariaDB (its own
# data directory D/mysql, TCP 127.0.0.1:B+40) and slurmdbd (B+41) with a cluster, an account
# `hpcproj` and a QoS `quick` (MaxWall 00:10:00) for root and the login user, enforced
# (AccountingStorageEnforce=associations,limits,qos), and a second partition `short`
# (MaxTime=00:30:00, MaxNodes=1). Without it (the other tests' cluster) nothing of that starts.
# ~5 s more on the first `up` (mariadb-install-db), ~1 s later on.
#
# --ib-netns makes a cluster whose InfiniBand names are other addresses than its host names, as
# on JSC's JUWELS (jwb0001 and jwb0001i resolve to different addresses): all of it (munged,
# slurmctld, the slurmd's, sshd) runs in a network namespace of its own, hpclaunch-ib-B (made
# with `ip netns add`, entered with `nsenter --net=/run/netns/NAME`: `ip netns exec` mounts a
# /sys without the cgroup hierarchy, which slurmd refuses), whose loopback carries one TEST-NET-1
# address per name: nodeNN is 192.0.2.N (its NodeAddr), nodeNNi 192.0.2.(100+N). The namespace
# has a hosts file of its own, D/etc/hosts (localhost, this host's name, the nodes, the i
# names), bound over /etc/hosts in a private mount namespace; the machine's /etc/hosts is not
# touched. `up` writes D/bin/in-cluster: `D/bin/in-cluster CMD [ARGS...]` runs CMD in there with
# SLURM_CONF set (sbatch, squeue, srun, hpclaunch; an ordinary user through `sudo -n`, CMD then
# as that user). down, status and env find the mode in D/cluster.env; `down` also stops every
# process left in the namespace and removes it.
#
# D must be a directory that only root can write, with every directory above it searchable by
# all (munged refuses a socket below a 0700 home): keep it out of the checkout, e.g. under /tmp.
# The daemons run as root. Run by an ordinary user, up and down run themselves again through
# `sudo -n` (passwordless sudo); that user then owns the client's files (ssh key and config,
# jobs/, ssh-tests/) and is the login node's user, and the tests' jobs run as that user.
set -euo pipefail

readonly SLURM_SBIN=/usr/sbin
readonly HOSTS_FILE=/etc/hosts
readonly HOSTS_LOCK=/tmp/.hpclaunch-testcluster-hosts.lock

die() {
  echo "testcluster: $*" >&2
  exit 1
}
log() { echo "testcluster: $*" >&2; }

usage() {
  sed -n '8,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---------------------------------------------------------------- options
verb=${1:-}
[[ -n $verb ]] || usage
shift
all_args=("$@")
dir=${HPC_TESTCLUSTER_DIR:-/tmp/hpclaunch-testcluster}
nodes=2
ssh_port=2222
port_base=17000
timeout_s=60
accounting=0
ib=0
ib_netns=""
down_s=0
conf_extra=()
while (($#)); do
  case $1 in
    --dir) dir=${2:?--dir needs a value}; shift 2 ;;
    --nodes) nodes=${2:?--nodes needs a value}; shift 2 ;;
    --ssh-port) ssh_port=${2:?--ssh-port needs a value}; shift 2 ;;
    --port-base) port_base=${2:?--port-base needs a value}; shift 2 ;;
    --timeout) timeout_s=${2:?--timeout needs a value}; shift 2 ;;
    --accounting) accounting=1; shift ;;
    --ib-netns) ib=1; shift ;;
    --down) down_s=${2:?--down needs seconds}; shift 2 ;;
    --conf-extra) conf_extra+=("${2:?--conf-extra needs a value}"); shift 2 ;;
    -h|--help) usage ;;
    *) echo "testcluster: unknown argument '$1'" >&2; usage ;;
  esac
done
for n in "$nodes" "$ssh_port" "$port_base" "$timeout_s" "$down_s"; do
  [[ $n =~ ^[0-9]+$ ]] || die "'$n' is not a number"
done
for line in "${conf_extra[@]}"; do
  [[ $line =~ ^[A-Za-z]+=[^[:cntrl:]]*$ ]] || die "--conf-extra '$line' is not one line Key=Value"
done
((nodes >= 1 && nodes <= 99)) || die "--nodes must be 1..99 (node names are node01..node99)"

D=$(realpath -m -- "$dir")
# Who uses the cluster: the ssh login user, owner of the client's files.
client_user=root
if [[ $(id -u) -eq 0 && -n ${SUDO_USER:-} ]]; then client_user=$SUDO_USER; fi
# Unix socket paths (munge socket, slurmstepd sockets under spool/) must fit in 108 bytes.
((${#D} <= 64)) || die "--dir '$D' is longer than 64 characters; Unix socket paths under it would not fit"
conf=$D/etc/slurm.conf
munge_sock=$D/munge/munge.socket
export SLURM_CONF=$conf

# Settings of a cluster that is (or was) up win over the defaults for down/status/env.
if [[ $verb != up && -r $D/cluster.env ]]; then
  # shellcheck source=/dev/null
  source "$D/cluster.env"
fi
# --ib-netns: the namespace's name comes from the port base (two such clusters never share one).
if [[ -n $ib_netns ]]; then ib=1; fi
if ((ib)) && [[ -z $ib_netns ]]; then ib_netns=hpclaunch-ib-$port_base; fi
netns_file=/run/netns/$ib_netns
in_cluster=$D/bin/in-cluster
ns_hosts=$D/etc/hosts

node_name() { printf 'node%02d' "$1"; }
# Node i's address (its NodeAddr) and, with --ib-netns, the address of its InfiniBand name.
node_addr() { if ((ib)); then echo "192.0.2.$1"; else echo 127.0.0.1; fi; }
ib_addr() { echo "192.0.2.$((100 + $1))"; }

# ---------------------------------------------------------------- processes we own
# Prints the pid in pidfile $1 when that process runs and its command line contains $2 (a path
# under D): a stale pid file whose pid was reused by some other process is never ours.
owned_pid() {
  local pidfile=$1 marker=$2 pid cmd
  [[ -r $pidfile ]] || return 1
  read -r pid <"$pidfile" 2>/dev/null || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ " $cmd " == *" $marker "* ]] || return 1
  echo "$pid"
}
munged_pid() { owned_pid "$D/run/munged.pid" "--socket=$munge_sock"; }
slurmctld_pid() { owned_pid "$D/run/slurmctld.pid" "$conf"; }
slurmd_pid() { owned_pid "$D/run/slurmd-$1.pid" "$conf"; }
sshd_pid() { owned_pid "$D/run/sshd.pid" "$D/ssh/sshd_config"; }
mariadbd_pid() { owned_pid "$D/run/mariadbd.pid" "--datadir=$D/mysql"; }
# slurmdbd has no config flag: it reads slurmdbd.conf beside $SLURM_CONF, which marks it ours.
slurmdbd_pid() {
  local pid
  [[ -r $D/run/slurmdbd.pid ]] || return 1
  read -r pid <"$D/run/slurmdbd.pid" 2>/dev/null || return 1
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/environ ]] || return 1
  tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$conf" || return 1
  echo "$pid"
}

# True while pid $1 runs. A zombie counts as gone: pid 1 here may take seconds to reap it.
running() {
  local stat
  # `read`, not $(<file): a process gone in between makes $(<file) end the script under set -e.
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# TERM, wait up to $1 seconds, then KILL: the pids that follow.
stop_pids() {
  local grace=$1 pid alive i
  shift
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  for ((i = 0; i < grace * 20; i++)); do
    alive=0
    for pid in "$@"; do
      if running "$pid"; then alive=1; fi
    done
    ((alive)) || return 0
    sleep 0.05
  done
  kill -KILL "$@" 2>/dev/null || true
}

port_in_use() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# ---------------------------------------------------------------- /etc/hosts block
hosts_begin="# BEGIN hpclaunch-testcluster $D"
hosts_end="# END hpclaunch-testcluster $D"

# Rewrites /etc/hosts in place (same inode: it may be a bind mount) without our block, then
# appends $1 (may be empty). Serialised with flock against a second cluster doing the same.
rewrite_hosts() {
  local block=$1 tmp
  tmp=$(mktemp)
  (
    flock -w 10 9 || die "could not lock $HOSTS_LOCK"
    awk -v b="$hosts_begin" -v e="$hosts_end" \
      '$0 == b {skip = 1; next} skip && $0 == e {skip = 0; next} !skip' "$HOSTS_FILE" >"$tmp"
    [[ -z $block ]] || printf '%s\n' "$block" >>"$tmp"
    if ! cmp -s "$tmp" "$HOSTS_FILE"; then cat "$tmp" >"$HOSTS_FILE"; fi
  ) 9>"$HOSTS_LOCK"
  rm -f "$tmp"
}

hosts_block() {
  local i name
  echo "$hosts_begin"
  for ((i = 1; i <= nodes; i++)); do
    name=$(node_name "$i")
    echo "127.0.0.1 $name ${name}i"
  done
  echo "$hosts_end"
}

# ---------------------------------------------------------------- configuration files
slurm_conf() {
  local host i name
  host=$(hostname -s)
  cat <<EOF
# Written by scripts/testcluster.sh; rewritten on each fresh 'up'.
ClusterName=hpctest
# Must equal \`hostname -s\`, else slurmctld says "not a valid controller".
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port_base
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_sock
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Trust CPUs/RealMemory below rather than the hardware: presets ask 4 tasks x 8 CPUs per node.
SlurmdParameters=config_overrides
# Jobs that can never fit fail at submission instead of pending with Reason=PartitionConfig.
EnforcePartLimits=ALL
ReturnToService=2
# Finished jobs stay visible to scontrol for an hour (no slurmdbd, so no sacct).
MinJobAge=3600
KillWait=5
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
EOF
  if ((accounting)); then
    cat <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((port_base + 41))
# The munge socket for talking to slurmdbd (AuthInfo covers slurmctld only).
AccountingStoragePass=$munge_sock
AccountingStorageEnforce=associations,limits,qos
EOF
  else
    echo "AccountingStorageType=accounting_storage/none"
  fi
  for ((i = 1; i <= nodes; i++)); do
    name=$(node_name "$i")
    echo "NodeName=$name NodeHostname=$name NodeAddr=$(node_addr "$i") Port=$((port_base + i))" \
      "CPUs=32 RealMemory=64000 Gres=gpu:tesla:4"
  done
  # Preemption as sites configure it (slurm.conf(5), preempt.html): a job in "urgent" (higher
  # PriorityTier) preempts jobs in "debug", which get TERM and GraceTime seconds to checkpoint
  # before KILL, then requeue (PreemptMode=REQUEUE). Only tests/slurm/preempt_test.sh uses
  # "urgent"; jobs in "debug" never preempt each other.
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" \
    "PriorityTier=1 PreemptMode=REQUEUE GraceTime=60"
  echo "PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF"
  if ((accounting)); then
    echo "PartitionName=short Nodes=ALL MaxTime=00:30:00 MaxNodes=1 State=UP"
  fi
  if ((${#conf_extra[@]})); then
    echo "# --conf-extra"
    printf '%s\n' "${conf_extra[@]}"
  fi
}

slurmdbd_conf() {
  cat <<EOF
# Written by scripts/testcluster.sh --accounting.
AuthType=auth/munge
AuthInfo=socket=$munge_sock
DbdHost=$(hostname -s)
DbdAddr=127.0.0.1
DbdPort=$((port_base + 41))
SlurmUser=root
LogFile=$D/log/slurmdbd.log
PidFile=$D/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((port_base + 40))
StorageUser=root
StorageLoc=slurm_acct_db
EOF
}

db_ok() { (: <"/dev/tcp/127.0.0.1/$((port_base + 40))") 2>/dev/null; }
dbd_ok() { sacctmgr --noheader list cluster format=cluster >/dev/null 2>&1; }

# MariaDB and slurmdbd, then the cluster's accounts: before slurmctld, which registers with it.
start_accounting() {
  local tool u
  for tool in mariadbd mariadb-install-db slurmdbd sacctmgr; do
    command -v "$tool" >/dev/null || [[ -x $SLURM_SBIN/$tool ]] ||
      die "'$tool' not found; run scripts/install-deps.sh (mariadb-server, slurmdbd)"
  done
  if port_in_use $((port_base + 40)) && ! mariadbd_pid >/dev/null; then
    die "port $((port_base + 40)) (mariadb) is in use; pick other ports with --port-base"
  fi
  if ! mariadbd_pid >/dev/null; then
    if [[ ! -d $D/mysql/mysql ]]; then
      rm -rf "${D:?}/mysql" && mkdir -p "$D/mysql"
      mariadb-install-db --no-defaults --datadir="$D/mysql" --user=root \
        --auth-root-authentication-method=normal --skip-test-db >"$D/log/mariadb-install.log" 2>&1 ||
        die "mariadb-install-db failed; see $D/log/mariadb-install.log"
    fi
    setsid /usr/sbin/mariadbd --no-defaults --datadir="$D/mysql" --socket="$D/run/mysqld.sock" \
      --port=$((port_base + 40)) --bind-address=127.0.0.1 --skip-name-resolve \
      --innodb-buffer-pool-size=16M --pid-file="$D/run/mariadbd.pid" \
      --log-error="$D/log/mariadb.log" --user=root </dev/null >/dev/null 2>&1 &
  fi
  wait_for "mariadb on 127.0.0.1:$((port_base + 40))" "$D/log/mariadb.log" db_ok
  write_file "$D/etc/slurmdbd.conf" "$(slurmdbd_conf)" 0600 || true
  if ! slurmdbd_pid >/dev/null; then "$SLURM_SBIN/slurmdbd"; fi
  wait_for "slurmdbd" "$D/log/slurmdbd.log" dbd_ok
  # Idempotent: sacctmgr -i says "Nothing new added" (and exits 1) for what exists.
  local users=(root)
  [[ $client_user == root ]] || users+=("$client_user")
  {
    sacctmgr -i add cluster hpctest
    sacctmgr -i add qos quick MaxWall=00:10:00
    sacctmgr -i add account hpcproj cluster=hpctest
    for u in "${users[@]}"; do sacctmgr -i add user "$u" account=hpcproj qos=normal,quick; done
  } >>"$D/log/sacctmgr.log" 2>&1 || true
}

gres_conf() {
  cat <<EOF
# Fake GPUs: char-device clones of /dev/null (plain files are rejected; without File= the
# GPUs are dropped). Never combine with cgroup ConstrainDevices=yes: /dev/null gets blocked.
AutoDetect=off
Name=gpu Type=tesla File=$D/dev/gpu[0-3]
EOF
}

sshd_conf() {
  cat <<EOF
# Written by scripts/testcluster.sh: a throwaway login node for the SSH backend's tests.
ListenAddress 127.0.0.1:$ssh_port
HostKey $D/ssh/ssh_host_ed25519_key
PidFile $D/run/sshd.pid
AuthorizedKeysFile $D/ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The keys live under /tmp or a build directory, not in a home with strict modes.
StrictModes no
SetEnv SLURM_CONF=$conf
Subsystem sftp internal-sftp
EOF
  # OpenSSH 9.8+ (Debian 13's 10.0) penalises a source whose connections end without a login
  # (the readiness probe, the tests of dropped connections) by refusing it for a while:
  # "Connection reset by peer" for the next test. 9.2 (Debian 12) has no such option.
  if /usr/sbin/sshd -G -f /dev/null -o PerSourcePenalties=no >/dev/null 2>&1; then
    echo "PerSourcePenalties no"
  fi
}

# Host $1 logging in with key $2.
ssh_host_block() {
  cat <<EOF
Host $1
  HostName 127.0.0.1
  Port $ssh_port
  User $client_user
  IdentityFile $2
  IdentitiesOnly yes
  UserKnownHostsFile $D/ssh/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
EOF
}

ssh_client_conf() {
  echo "# ssh -F $D/ssh/config testlogin CMD; testlogin-wrongkey offers a key that is refused."
  ssh_host_block testlogin "$D/ssh/id_ed25519"
  ssh_host_block testlogin-wrongkey "$D/ssh/id_ed25519_unauthorized"
}

cluster_env() {
  printf 'nodes=%q\nssh_port=%q\nport_base=%q\nclient_user=%q\naccounting=%q\n' \
    "$nodes" "$ssh_port" "$port_base" "$client_user" "$accounting"
  if ((ib)); then printf 'ib_netns=%q\n' "$ib_netns"; fi
  if ((${#conf_extra[@]})); then printf 'conf_extra=(%s)\n' "$(printf '%q ' "${conf_extra[@]}")"; fi
}

# Writes $2 to file $1 (mode $3) when it differs; returns 1 when it differed.
write_file() {
  local file=$1 content=$2 mode=$3
  if [[ -f $file ]] && [[ $(<"$file") == "$content" ]]; then return 0; fi
  printf '%s\n' "$content" >"$file.tmp"
  chmod "$mode" "$file.tmp"
  mv -f "$file.tmp" "$file"
  return 1
}

# ---------------------------------------------------------------- waiting
deadline=0
start_clock() { deadline=$((SECONDS + timeout_s)); }

# Fails with the tail of log $2 when condition $1 (a function) is not true before the deadline.
wait_for() {
  local what=$1 logfile=$2
  shift 2
  until "$@"; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout_s}s waiting for $what"
      if [[ -r $logfile ]]; then
        log "last lines of $logfile:"
        tail -n 25 "$logfile" >&2
      fi
      die "up failed; inspect $D/log, then run: $0 down --dir $D"
    fi
    sleep 0.1
  done
}

munge_ok() { munge -S "$munge_sock" -n 2>/dev/null | unmunge -S "$munge_sock" >/dev/null 2>&1; }
ctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
# slurmctld logs its SchedulerParameters on the first scheduling pass (~3 s after start); a job
# submitted before that waits for it.
scheduler_ok() { grep -q 'SchedulerParameters=' "$D/log/slurmctld.log" 2>/dev/null; }
nodes_idle() {
  local states
  # One line per node and partition (debug, urgent, and short with --accounting): each node
  # counted once.
  states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u) || return 1
  [[ $(grep -c ' idle$' <<<"$states") -eq $nodes ]]
}
sshd_ok() { (: <"/dev/tcp/127.0.0.1/$ssh_port") 2>/dev/null; }

# ---------------------------------------------------------------- root
# Runs this script again as root through sudo when an ordinary user calls a verb that needs root.
become_root() {
  [[ $(id -u) -ne 0 ]] || return 0
  command -v sudo >/dev/null ||
    die "'$verb' needs root (slurmd runs as root, /etc/hosts is edited): run as root, or install sudo"
  sudo -n true 2>/dev/null ||
    die "'$verb' needs root (slurmd runs as root, /etc/hosts is edited): run as root, or give $(id -un) passwordless sudo"
  exec sudo -n -- "$0" "$verb" "${all_args[@]}" --dir "$D"
}

# D: created 0755 by root, or already so; every directory above it searchable by all, as munged
# requires of the directories above its socket. Anything else is refused with the fix.
make_private_dir() {
  local p
  if [[ -e $D || -L $D ]]; then
    [[ -d $D && ! -L $D ]] || die "$D exists and is not a directory; remove it or pick another --dir"
    [[ $(stat -c %u "$D") -eq 0 ]] || die "$D is not owned by root; remove it or pick another --dir"
    (($(stat -c '%#a' "$D") & 022)) && die "$D is writable by others; remove it or pick another --dir"
  else
    mkdir -p "$(dirname "$D")"
    mkdir -m 0755 "$D"
  fi
  p=$D
  while [[ $p != / ]]; do
    p=$(dirname "$p")
    (($(stat -c '%#a' "$p") & 01)) ||
      die "$p is not searchable by all (mode $(stat -c %a "$p")); munged refuses a socket below it. Pick a --dir outside it, e.g. under /tmp"
  done
}

# ---------------------------------------------------------------- --ib-netns
# The namespace's own /etc/hosts: each node's name and its InfiniBand name on other addresses.
ib_hosts() {
  local i name host
  host=$(hostname -s)
  echo "# Written by scripts/testcluster.sh up --ib-netns: /etc/hosts in network namespace $ib_netns."
  echo "127.0.0.1 localhost"
  echo "::1 localhost ip6-localhost ip6-loopback"
  # The controller (SlurmctldHost=$host(127.0.0.1)), also the login node.
  if [[ $(hostname) != "$host" ]]; then echo "127.0.0.1 $(hostname) $host"; else echo "127.0.0.1 $host"; fi
  for ((i = 1; i <= nodes; i++)); do
    name=$(node_name "$i")
    echo "$(node_addr "$i") $name"
    echo "$(ib_addr "$i") ${name}i"
  done
}

# D/bin/in-cluster CMD [ARGS...]: CMD in the namespace, with the hosts file and SLURM_CONF.
in_cluster_script() {
  echo '#!/usr/bin/env bash'
  cat <<'SCRIPT'
# Written by scripts/testcluster.sh up --ib-netns. `in-cluster CMD [ARGS...]` runs CMD inside the
# test cluster's network namespace (nsenter --net, not `ip netns exec`, whose fresh /sys lacks
# the cgroup hierarchy), in a private mount namespace with the cluster's hosts file bound over
# /etc/hosts, and with SLURM_CONF set. An ordinary user goes through `sudo -n` (nsenter and mount
# need root) and CMD runs as that user again (setpriv). Exit status: CMD's; 125 when the cluster
# is down.
set -euo pipefail
SCRIPT
  printf 'netns=%q\nhosts=%q\nexport SLURM_CONF=%q\n' "$netns_file" "$ns_hosts" "$conf"
  cat <<'SCRIPT'
if (($# == 0)); then
  echo "usage: ${0##*/} CMD [ARGS...]" >&2
  exit 2
fi
if [[ ${HPC_IN_CLUSTER_STAGE:-} == inside ]]; then
  unset HPC_IN_CLUSTER_STAGE
  # Only ever in the namespace (and the mount namespace unshare made with it), never the host's.
  if [[ $(readlink /proc/self/ns/net) != "net:[$(stat -L -c %i "$netns")]" ]]; then
    echo "in-cluster: not inside $netns" >&2
    exit 125
  fi
  mount --bind "$hosts" /etc/hosts
  if [[ -n ${HPC_IN_CLUSTER_IDS:-} ]]; then
    ids=$HPC_IN_CLUSTER_IDS
    unset HPC_IN_CLUSTER_IDS
    exec setpriv --reuid="${ids%:*}" --regid="${ids#*:}" --init-groups -- "$@"
  fi
  exec "$@"
fi
if [[ ! -e $netns ]]; then
  echo "in-cluster: $netns does not exist: the cluster is down (scripts/testcluster.sh up --ib-netns)" >&2
  exit 125
fi
if (($(id -u) != 0)); then
  exec sudo -n --preserve-env -- env -u HPC_IN_CLUSTER_STAGE "PATH=$PATH" "HOME=$HOME" \
    "HPC_IN_CLUSTER_IDS=$(id -u):$(id -g)" "$0" "$@"
fi
HPC_IN_CLUSTER_STAGE=inside exec nsenter --net="$netns" -- \
  unshare --mount --propagation private -- "$0" "$@"
SCRIPT
}

# True when this process already runs inside the cluster's namespace (up/down/status run
# themselves again through D/bin/in-cluster).
inside_netns() { [[ ${HPC_TESTCLUSTER_IN_NETNS:-} == "$ib_netns" ]]; }

# The namespace, its addresses, the hosts file and the wrapper; then `up` again inside.
ib_up() {
  local tool i
  for tool in ip nsenter unshare mount setpriv; do
    command -v "$tool" >/dev/null || die "'$tool' not found (--ib-netns); run scripts/install-deps.sh"
  done
  make_private_dir
  mkdir -p "$D/etc" "$D/bin"
  # In place, never renamed: the daemons' bind mounts hold this inode.
  if [[ ! -f $ns_hosts || $(<"$ns_hosts") != "$(ib_hosts)" ]]; then ib_hosts >"$ns_hosts"; fi
  chmod 0644 "$ns_hosts"
  write_file "$in_cluster" "$(in_cluster_script)" 0755 || true
  [[ -e $netns_file ]] || ip netns add "$ib_netns" || die "ip netns add $ib_netns failed"
  ip -n "$ib_netns" link set lo up
  for ((i = 1; i <= nodes; i++)); do
    ip -n "$ib_netns" addr replace "$(node_addr "$i")/32" dev lo
    ip -n "$ib_netns" addr replace "$(ib_addr "$i")/32" dev lo
  done
  log "network namespace $ib_netns: node01 $(node_addr 1), node01i $(ib_addr 1), ...; hosts $ns_hosts"
  export HPC_TESTCLUSTER_IN_NETNS=$ib_netns
  exec "$in_cluster" "$0" up "${all_args[@]}" --dir "$D"
}

# The pids in network namespace inode $1, except this process and its ancestors.
netns_pids() {
  local ns=$1 p link mine=" " pid=$$ stat
  while [[ $pid =~ ^[0-9]+$ && $pid -gt 1 ]]; do
    mine+="$pid "
    read -r stat 2>/dev/null <"/proc/$pid/stat" || break
    stat=${stat##*) }
    pid=$(cut -d' ' -f2 <<<"$stat")
  done
  for p in /proc/[0-9]*; do
    link=$(readlink "$p/ns/net" 2>/dev/null) || continue
    [[ $link == "net:[$ns]" && $mine != *" ${p#/proc/} "* ]] && echo "${p#/proc/}"
  done
}

# `down` inside the namespace (jobs cancelled, daemons stopped by their pid files), then every
# process still in it (jobs' leftovers, a test's commands), then the namespace itself.
ib_down() {
  local ns left=()
  if [[ -e $netns_file && -x $in_cluster ]]; then
    HPC_TESTCLUSTER_IN_NETNS=$ib_netns "$in_cluster" "$0" down "${all_args[@]}" --dir "$D" ||
      log "down inside $ib_netns failed; stopping what is left"
  fi
  stop_daemons
  if [[ -e $netns_file ]]; then
    ns=$(stat -L -c %i "$netns_file")
    mapfile -t left < <(netns_pids "$ns")
    if ((${#left[@]})); then
      log "stopping ${#left[@]} process(es) left in $ib_netns: ${left[*]}"
      stop_pids 5 "${left[@]}"
    fi
    ip netns del "$ib_netns" || die "ip netns del $ib_netns failed"
    log "network namespace $ib_netns removed"
  fi
  rm -f "$D"/run/*.pid
  log "down ($D)"
}

# ---------------------------------------------------------------- up
cmd_up() {
  local t0=$EPOCHREALTIME i name any_running=0 pid
  become_root
  if ((ib)) && ! inside_netns; then ib_up; fi
  for tool in munged mungekey slurmctld slurmd sbatch sshd ssh-keygen unshare flock ss; do
    command -v "$tool" >/dev/null || [[ -x $SLURM_SBIN/$tool ]] ||
      die "'$tool' not found; run scripts/install-deps.sh"
  done
  start_clock

  if munged_pid >/dev/null || slurmctld_pid >/dev/null || sshd_pid >/dev/null; then any_running=1; fi
  for ((i = 1; i <= 99; i++)); do
    if slurmd_pid "$(node_name "$i")" >/dev/null; then any_running=1; fi
  done
  if ((any_running)) && [[ -r $D/cluster.env ]] && [[ $(<"$D/cluster.env") != "$(cluster_env)" ]]; then
    die "a cluster with other settings runs in $D ($(paste -sd' ' "$D/cluster.env")); run: $0 down --dir $D"
  fi
  # Ports first, before anything starts: a clash then leaves nothing behind.
  if ! slurmctld_pid >/dev/null && port_in_use "$port_base"; then
    die "port $port_base (slurmctld) is in use; another cluster? pick other ports with --port-base"
  fi
  for ((i = 1; i <= nodes; i++)); do
    name=$(node_name "$i")
    if ! slurmd_pid "$name" >/dev/null && port_in_use $((port_base + i)); then
      die "port $((port_base + i)) ($name) is in use; pick other ports with --port-base"
    fi
  done
  if ! sshd_pid >/dev/null && port_in_use "$ssh_port"; then
    die "port $ssh_port (sshd) is in use; pick another with --ssh-port"
  fi

  make_private_dir
  mkdir -p "$D"/{etc,munge,ssh,dev,log,run,state,spool,jobs,ssh-tests}
  chmod 0755 "$D/munge"
  chown "$client_user" "$D/jobs" "$D/ssh-tests"
  for ((i = 1; i <= nodes; i++)); do mkdir -p "$D/spool/$(node_name "$i")"; done
  for ((i = 0; i < 4; i++)); do
    [[ -c $D/dev/gpu$i ]] || { rm -f "$D/dev/gpu$i"; mknod -m 0666 "$D/dev/gpu$i" c 1 3; }
  done
  write_file "$D/cluster.env" "$(cluster_env)" 0644 || true
  local conf_changed=0
  write_file "$conf" "$(slurm_conf)" 0644 || conf_changed=1
  write_file "$D/etc/gres.conf" "$(gres_conf)" 0644 || conf_changed=1
  if ((conf_changed)) && slurmctld_pid >/dev/null; then
    die "slurm.conf in $D changed while slurmctld runs; run: $0 down --dir $D"
  fi
  if ((!ib)); then rewrite_hosts "$(hosts_block)"; fi

  # munge: our own key and socket, never the system's /etc/munge/munge.key.
  if ! munged_pid >/dev/null; then
    [[ -s $D/munge/munge.key ]] || mungekey -c -k "$D/munge/munge.key"
    chmod 0600 "$D/munge/munge.key"
    rm -f "$munge_sock" "$munge_sock.lock"
    munged --socket="$munge_sock" --key-file="$D/munge/munge.key" --pid-file="$D/run/munged.pid" \
      --log-file="$D/log/munged.log" --seed-file="$D/munge/munged.seed"
  fi
  wait_for "munged" "$D/log/munged.log" munge_ok
  if ((accounting)); then start_accounting; fi

  # slurmctld: a fresh start forgets earlier jobs, so job ids and queues start empty.
  if ! slurmctld_pid >/dev/null; then
    rm -rf "${D:?}/state" && mkdir -p "$D/state"
    [[ ! -e $D/log/slurmctld.log ]] || mv -f "$D/log/slurmctld.log" "$D/log/slurmctld.log.prev"
    "$SLURM_SBIN/slurmctld" -f "$conf"
  fi

  # slurmd per node, each in a UTS namespace whose hostname is the node name.
  for ((i = 1; i <= nodes; i++)); do
    name=$(node_name "$i")
    slurmd_pid "$name" >/dev/null && continue
    # shellcheck disable=SC2016  # $1/$2 expand in the inner shell
    unshare --uts -- /bin/sh -c 'hostname "$1" && exec "$3/slurmd" -f "$2" -N "$1"' \
      sh "$name" "$conf" "$SLURM_SBIN"
  done

  # sshd "login node" with its own host key and a throwaway client key.
  local s=$D/ssh
  [[ -s $s/ssh_host_ed25519_key ]] || ssh-keygen -q -t ed25519 -N '' -C testcluster-host -f "$s/ssh_host_ed25519_key"
  [[ -s $s/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C testcluster-client -f "$s/id_ed25519"
  # A second key that is never authorized, for tests that a wrong key is refused.
  [[ -s $s/id_ed25519_unauthorized ]] ||
    ssh-keygen -q -t ed25519 -N '' -C testcluster-unauthorized -f "$s/id_ed25519_unauthorized"
  write_file "$s/authorized_keys" "$(<"$s/id_ed25519.pub")" 0600 || true
  write_file "$s/known_hosts" "[127.0.0.1]:$ssh_port $(cut -d' ' -f1,2 "$s/ssh_host_ed25519_key.pub")" 0644 || true
  write_file "$s/config" "$(ssh_client_conf)" 0600 || true
  # The login user reads its key, the config and, as sshd reads it with the user's rights, the
  # authorized keys.
  chown "$client_user" "$s/config" "$s/known_hosts" "$s/authorized_keys" \
    "$s"/id_ed25519{,.pub} "$s"/id_ed25519_unauthorized{,.pub}
  local sshd_changed=0
  write_file "$s/sshd_config" "$(sshd_conf)" 0600 || sshd_changed=1
  if ((sshd_changed)) && pid=$(sshd_pid); then stop_pids 5 "$pid"; fi
  if ! sshd_pid >/dev/null; then
    mkdir -p /run/sshd # privilege separation directory; nothing creates it without systemd
    # In a UTS namespace of its own, like slurmd, so that `down` finds its sessions' processes.
    unshare --uts -- /usr/sbin/sshd -f "$s/sshd_config" -E "$D/log/sshd.log"
  fi

  wait_for "slurmctld" "$D/log/slurmctld.log" ctld_ok
  wait_for "$nodes idle nodes" "$D/log/slurmctld.log" nodes_idle
  wait_for "the first scheduling pass" "$D/log/slurmctld.log" scheduler_ok
  wait_for "sshd on 127.0.0.1:$ssh_port" "$D/log/sshd.log" sshd_ok

  local ms
  ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
  if ((ib)); then
    log "up: $nodes nodes idle in network namespace $ib_netns, sshd on 127.0.0.1:$ssh_port there, in ${ms} ms ($D; run commands with $in_cluster)"
  else
    log "up: $nodes nodes idle, sshd on 127.0.0.1:$ssh_port, in ${ms} ms ($D)"
  fi
}

# ---------------------------------------------------------------- down
# The UTS namespace of pid $1 as a number (the inode `ps -o utsns` shows).
uts_of() {
  local link
  link=$(readlink "/proc/$1/ns/uts" 2>/dev/null) || return 1
  link=${link#uts:[}
  echo "${link%]}"
}

# Stops daemon $1 (grace $2 seconds), then whatever is left in its UTS namespace. Each slurmd
# and the sshd run in a namespace of their own made by `unshare --uts` in cmd_up, so all in it
# descends from what `up` started: slurmstepd, job tasks, ssh sessions, also orphaned ones.
stop_daemon_tree() {
  local pid=$1 grace=$2 ns left=()
  ns=$(uts_of "$pid") || ns=
  stop_pids "$grace" "$pid"
  # Never sweep the host's own namespace (a daemon that was not started under unshare).
  [[ -n $ns && $ns != "$(uts_of $$)" ]] || return 0
  mapfile -t left < <(ps -e -o pid=,utsns= | awk -v ns="$ns" '$2 == ns {print $1}')
  stop_pids 5 "${left[@]}"
}

cmd_down() {
  local i jobs
  become_root
  if ((ib)) && ! inside_netns; then
    ib_down
    return
  fi
  if slurmctld_pid >/dev/null; then
    # Cancel jobs first, so each slurmstepd kills its tasks and cleans up while slurmd runs.
    jobs=$(squeue -h -o '%A' 2>/dev/null || true)
    if [[ -n $jobs ]]; then
      # shellcheck disable=SC2086  # one job id per word
      scancel $jobs 2>/dev/null || true
      for ((i = 0; i < 150; i++)); do
        [[ -z $(squeue -h -o '%A' 2>/dev/null) ]] && break
        sleep 0.1
      done
    fi
  fi
  stop_daemons
  if ((!ib)); then rewrite_hosts ""; fi
  rm -f "$D"/run/*.pid
  log "down ($D)"
}

# Every daemon `up` started, found by its pid file: sshd and the slurmd's with what is left in
# their UTS namespaces.
stop_daemons() {
  local i pid
  if pid=$(sshd_pid); then stop_daemon_tree "$pid" 5; fi
  for ((i = 1; i <= 99; i++)); do
    if pid=$(slurmd_pid "$(node_name "$i")"); then stop_daemon_tree "$pid" 10; fi
  done
  if pid=$(slurmctld_pid); then stop_pids 10 "$pid"; fi
  if pid=$(slurmdbd_pid); then stop_pids 10 "$pid"; fi
  if pid=$(mariadbd_pid); then stop_pids 20 "$pid"; fi
  if pid=$(munged_pid); then stop_pids 5 "$pid"; fi
}

# ---------------------------------------------------------------- restart-ctld
# A controller restart as an admin's `systemctl restart slurmctld` makes it: SIGTERM (slurmctld
# saves its state and leaves; slurmd's and running jobs go on), a pause, and a start without -c,
# which recovers the jobs from StateSaveLocation. Clients see "Unable to contact slurm
# controller" meanwhile.
cmd_restart_ctld() {
  local pid deadline=$((SECONDS + timeout_s))
  become_root
  ((!ib)) || die "restart-ctld: not for an --ib-netns cluster"
  pid=$(slurmctld_pid) || die "restart-ctld: no slurmctld of $D runs"
  stop_pids 10 "$pid"
  log "restart-ctld: slurmctld stopped; starting it again in ${down_s} s"
  sleep "$down_s"
  cat "$D/log/slurmctld.log" >>"$D/log/slurmctld.log.prev" 2>/dev/null || true
  : >"$D/log/slurmctld.log"
  "$SLURM_SBIN/slurmctld" -f "$conf"
  wait_for "slurmctld" "$D/log/slurmctld.log" ctld_ok
  log "restart-ctld: slurmctld is up again ($D)"
}

# ---------------------------------------------------------------- status, env
cmd_status() {
  if ((ib)) && ! inside_netns; then
    if [[ ! -e $netns_file || ! -x $in_cluster ]]; then
      echo "testcluster: down ($D, no network namespace $ib_netns)"
      exit 3
    fi
    export HPC_TESTCLUSTER_IN_NETNS=$ib_netns
    exec "$in_cluster" "$0" status "${all_args[@]}" --dir "$D"
  fi
  if slurmctld_pid >/dev/null && ctld_ok; then
    sinfo
    if sshd_pid >/dev/null; then echo "sshd: 127.0.0.1:$ssh_port (ssh -F $D/ssh/config testlogin)"; fi
  else
    echo "testcluster: down ($D)"
    exit 3
  fi
}

cmd_env() {
  printf 'export SLURM_CONF=%q\n' "$conf"
  printf 'export HPC_TESTCLUSTER_DIR=%q\n' "$D"
  printf 'export HPC_TESTCLUSTER_SSH_CONFIG=%q\n' "$D/ssh/config"
  printf 'export HPC_TESTCLUSTER_SSH_PORT=%q\n' "$ssh_port"
  printf 'export HPC_TESTCLUSTER_NODES=%q\n' "$nodes"
  if ((ib)); then
    # Slurm's commands reach this cluster only from inside its namespace: run them through this.
    printf 'export HPC_TESTCLUSTER_NETNS=%q\n' "$ib_netns"
    printf 'export HPC_TESTCLUSTER_IN_CLUSTER=%q\n' "$in_cluster"
  fi
}

case $verb in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  restart-ctld) cmd_restart_ctld ;;
  env) cmd_env ;;
  -h|--help|help) usage ;;
  *) echo "testcluster: unknown verb '$verb'" >&2; usage ;;
esac
