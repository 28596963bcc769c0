#!/usr/bin/env bash
# jump_test.sh CASE DIR HPCLAUNCH PTY_ANSWER: hpclaunch's ssh backend through jump hosts, against
# the InfiniBand-names test cluster (fixture ib_cluster, tests/ib/): that cluster, its slurmctld
# and its sshd "login node" (127.0.0.1:SSH_PORT) run in a network namespace of their own, so from
# here the login node cannot be reached directly. This test adds jump hosts, real sshd's:
#   jumpB    in the cluster's namespace, on 10.X.Y.2:22, the namespace's end of a veth pair whose
#            other end (10.X.Y.1) is here: the only way in
#   jumpA    here, on 10.X.Y.1:22 (a first hop in front of jumpB)
#   kbdjump  here, on 10.X.Y.1:2222: key, then a one-time code (AuthenticationMethods
#            publickey,keyboard-interactive; UsePAM with a PAM service of its own: sshd names its
#            PAM service after its program name, so a link DIR-jumps/hpcjump-kbd-PORT -> sshd uses
#            /etc/pam.d/hpcjump-kbd-PORT, pam_exec of a script that compares the code)
# X.Y come from the cluster's port base (unique per build). Cases:
#   up         the veth pair, the keys, the three sshd's, the PAM service (FIXTURES_SETUP)
#   down       all of it gone again, also when tests failed (FIXTURES_CLEANUP)
#   run        a direct connection fails (exit 69, nothing submitted); run, status, logs through
#              --jump jumpA,jumpB (2 hops); submit + logs -f through an alias whose ssh config
#              says ProxyJump; run --sync through --jump jumpB; each command logs in once
#   host_keys  a wrong key for the second hop, an unknown first hop, a hop that is no host name:
#              exit 2, one line, nothing submitted
#   kbdint     the one-time code asked once on a terminal (pty), echo off; a wrong code refused
#              (exit 2); no terminal: one line, exit 2, nothing submitted, no code sent
#   sweep      a 10-point sweep through kbdjump,jumpB on a terminal: one prompt, and one login on
#              each of kbdjump, jumpB and the login node ("Accepted" lines in their logs)
#   reconnect  jumpB drops the connection while run follows a job: the whole chain is built
#              again (one more login on each hop), the follow ends with the job, exit 0
# Missing tools (ip, nsenter, sshd, python3): skipped (77), FAIL under CI=true.
set -euo pipefail
case_name=$1 dir=$2 hpclaunch=$3 pty_answer=$4
J=$dir-jumps
incluster=$dir/bin/in-cluster

missing() {
  if [[ ${CI:-} == true ]]; then
    echo "FAIL (CI=true): $*" >&2
    exit 1
  fi
  echo "WARN: skipped: $*" >&2
  exit 77
}
for t in ip nsenter sshd ssh-keygen python3 setsid; do
  command -v "$t" >/dev/null || [[ -x /usr/sbin/$t ]] ||
    missing "'$t' not found; run scripts/install-deps.sh"
done
[[ -r $dir/cluster.env ]] || missing "no $dir/cluster.env: ib:up did not bring the cluster up"
ssh_port="" port_base="" client_user="" ib_netns=""  # from cluster.env:
# shellcheck source=/dev/null
source "$dir/cluster.env" # nodes ssh_port port_base client_user ib_netns
net="10.$(((port_base >> 8) & 255)).$((port_base & 255))"
here=$net.1 there=$net.2
veth=hj${port_base}
pam_name=hpcjump-kbd-$port_base
code_file=$J/code

fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "${work:-/nonexistent}"/*.err "${work:-/nonexistent}"/*.out; do
    [[ -f $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
  done
  exit 1
}
expect() { grep -Eq -- "$2" "$1" || fail "$3 (no line matching '$2' in ${1##*/})"; }
accepted() { grep -c 'Accepted ' "$1" 2>/dev/null || true; } # logins in an sshd log

sshd_config() { # NAME LISTEN [EXTRA LINES...]
  local name=$1 listen=$2
  shift 2
  printf '%s\n' "# jump_test.sh: $name" "ListenAddress $listen" \
    "HostKey $J/$name.key" "PidFile $J/$name.pid" "AuthorizedKeysFile $dir/ssh/authorized_keys" \
    "PasswordAuthentication no" "StrictModes no" "AllowTcpForwarding yes" "LogLevel INFO" "$@"
  # OpenSSH 9.8+ (Debian 13) would refuse a source for a while after connections without a
  # login (the refused direct connection, the bad-key hops): as scripts/testcluster.sh does.
  if sshd_knows PerSourcePenalties=no; then echo "PerSourcePenalties no"; fi
}
sshd_knows() { /usr/sbin/sshd -G -f /dev/null -o "$1" >/dev/null 2>&1; } # OPTION=VALUE

down() {
  local name pid
  for name in jumpA jumpB kbdjump; do
    if [[ -s $J/$name.pid ]] && pid=$(<"$J/$name.pid") && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
    rm -f "$J/$name.pid"
  done
  if ip link show "${veth}r" >/dev/null 2>&1; then ip link del "${veth}r"; fi
  rm -f "/etc/pam.d/$pam_name"
}

up() {
  [[ -x $incluster ]] || fail "no $incluster: ib:up did not bring the cluster up"
  down
  mkdir -p "$J"
  local name
  for name in jumpA jumpB kbdjump; do
    [[ -s $J/$name.key ]] || ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$J/$name.key"
  done
  ip link add "${veth}r" type veth peer name "${veth}n"
  ip link set "${veth}n" netns "$ib_netns"
  ip addr add "$here/30" dev "${veth}r"
  ip link set "${veth}r" up
  ip -n "$ib_netns" addr add "$there/30" dev "${veth}n"
  ip -n "$ib_netns" link set "${veth}n" up
  # The one-time code: the PAM service runs check_code.sh, which compares what was typed.
  echo 314159 >"$code_file"
  printf '%s\n' '#!/bin/sh' "# jump_test.sh: keyboard-interactive answer = the code in $code_file" \
    'IFS= read -r code || true' "[ \"\$code\" = \"\$(cat '$code_file')\" ]" >"$J/check_code.sh"
  chmod 755 "$J/check_code.sh"
  printf '%s\n' "# jump_test.sh ($J): a one-time code by pam_exec" \
    "auth required pam_exec.so expose_authtok quiet $J/check_code.sh" \
    'auth optional pam_permit.so' \
    'account required pam_permit.so' 'session required pam_permit.so' >"/etc/pam.d/$pam_name"
  sshd_config jumpA "$here:22" "PermitRootLogin prohibit-password" "UsePAM no" \
    "KbdInteractiveAuthentication no" >"$J/jumpA.conf"
  sshd_config jumpB "$there:22" "PermitRootLogin prohibit-password" "UsePAM no" \
    "KbdInteractiveAuthentication no" >"$J/jumpB.conf"
  # The PAM service is sshd's program name (9.2, Debian 12: the link below), or PAMServiceName
  # where sshd has it (9.8+: the login runs in sshd-session/sshd-auth, whose names are fixed).
  local pam_service=()
  if sshd_knows "PAMServiceName=$pam_name"; then pam_service=("PAMServiceName $pam_name"); fi
  sshd_config kbdjump "$here:2222" "PermitRootLogin yes" "UsePAM yes" \
    "KbdInteractiveAuthentication yes" "${pam_service[@]}" \
    "AuthenticationMethods publickey,keyboard-interactive" >"$J/kbdjump.conf"
  ln -sf /usr/sbin/sshd "$J/$pam_name"
  mkdir -p /run/sshd
  : >"$J/jumpA.log" && : >"$J/jumpB.log" && : >"$J/kbdjump.log"
  /usr/sbin/sshd -f "$J/jumpA.conf" -E "$J/jumpA.log"
  "$incluster" /usr/sbin/sshd -f "$J/jumpB.conf" -E "$J/jumpB.log"
  "$J/$pam_name" -f "$J/kbdjump.conf" -E "$J/kbdjump.log"
  # The client's side: its config and known_hosts (every hop's key, and the login node's).
  local key=$dir/ssh/id_ed25519 login_key
  login_key=$(cut -d' ' -f1,2 "$dir/ssh/ssh_host_ed25519_key.pub")
  {
    echo "[127.0.0.1]:$ssh_port $login_key"
    echo "$here $(cut -d' ' -f1,2 "$J/jumpA.key.pub")"
    echo "$there $(cut -d' ' -f1,2 "$J/jumpB.key.pub")"
    echo "[$here]:2222 $(cut -d' ' -f1,2 "$J/kbdjump.key.pub")"
  } >"$J/known_hosts"
  # The second hop's entry with another key: someone in between.
  sed "s|^$there .*|$there $(cut -d' ' -f1,2 "$J/jumpA.key.pub")|" "$J/known_hosts" \
    >"$J/known_hosts_wrong_b"
  grep -v "^$here " "$J/known_hosts" >"$J/known_hosts_no_a"
  host_block() { # ALIAS HOSTNAME PORT [MORE LINES]
    printf '%s\n' "Host $1" "  HostName $2" "  Port $3" "  User $client_user" \
      "  IdentityFile $key" "  IdentitiesOnly yes" "  UserKnownHostsFile $J/known_hosts" \
      "  GlobalKnownHostsFile /dev/null" "${@:4}"
  }
  {
    host_block jumpA "$here" 22
    host_block jumpB "$there" 22
    host_block kbdjump "$here" 2222
    host_block login 127.0.0.1 "$ssh_port"
    host_block login-via 127.0.0.1 "$ssh_port" "  ProxyJump jumpA,jumpB"
  } >"$J/config"
  local _
  for _ in $(seq 50); do
    if (: <"/dev/tcp/$here/22") 2>/dev/null && (: <"/dev/tcp/$there/22") 2>/dev/null &&
      (: <"/dev/tcp/$here/2222") 2>/dev/null; then
      echo "jump hosts up: jumpA $here:22, jumpB $there:22 (in $ib_netns), kbdjump $here:2222"
      return 0
    fi
    sleep 0.1
  done
  fail "the jump sshd's did not start (logs in $J)"
}

case $case_name in
  up) up; exit 0 ;;
  down)
    down
    ! ip link show "${veth}r" >/dev/null 2>&1 || fail "${veth}r is still there"
    echo "jump hosts down"
    exit 0
    ;;
esac

[[ -s $J/config ]] || fail "no $J/config: ssh:jump_up did not run"
work=$(mktemp -d /tmp/hpcjump-XXXXXX)
chmod 755 "$work"
name=jt$$
cleanup() {
  local ids
  mapfile -t ids < <("$incluster" squeue --noheader --format '%i %j' 2>/dev/null |
    awk -v n="$name" 'index($2, n) == 1 { print $1 }')
  ((${#ids[@]} == 0)) || "$incluster" scancel "${ids[@]}" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
export XDG_CONFIG_HOME=$work/xdg HPCLAUNCH_PATH=""
# shellcheck disable=SC2016  # expanded by the job
printf '%s\n' '#!/bin/bash' 'echo "probe rank=$SLURM_PROCID host=$(hostname)"' >probe.sh
chmod 755 probe.sh
login_log=$dir/log/sshd.log

# hpclaunch VERB [ARGS...] with the jump tests' config; its output in OUT.out and OUT.err.
hl() { # OUT VERB [ARGS...]
  local out=$1
  shift
  timeout 300 "$hpclaunch" "$@" --ssh-config "$J/config" >"$out.out" 2>"$out.err"
}
job_args=(--no-project --preset 1n1g --set "trainer.program=$work/probe.sh"
  --set shape.cpus_per_gpu=1 --set "job.name=$name" --remote-runs-dir "$work/remote-runs")
runs() { find "$work/runs" -name run.json 2>/dev/null | wc -l; }
job_of() { sed -n 's/.*submitted job \([0-9]*\) .*/\1/p' "$1.err" | head -n 1; }

case $case_name in
  run)
    before=$(accepted "$login_log")
    rc=0
    hl direct run "${job_args[@]}" --host login || rc=$?
    ((rc == 69)) || fail "direct: exit $rc, not 69"
    expect direct.err "cannot connect to login" "direct: no 'cannot connect' line"
    (($(runs) == 0)) || fail "direct: a run was recorded"

    hl run run "${job_args[@]}" --host login --jump jumpA,jumpB || fail "run via 2 hops: exit $?"
    expect run.out "probe rank=0 host=node0" "run: no probe line"
    expect run.err "COMPLETED with exit code 0" "run: not COMPLETED"
    expect run.err "via ssh on $client_user@127.0.0.1:$ssh_port" "run: not via the login node"
    job=$(job_of run)
    grep -q '"ssh_jump": "jumpA,jumpB"' "$work"/runs/*/run.json || fail "run.json has no ssh_jump"
    hl status status "$job" || fail "status: exit $?"
    expect status.out "COMPLETED" "status (jumps from run.json): not COMPLETED"
    hl logs logs "$job" || fail "logs: exit $?"
    expect logs.out "probe rank=0" "logs: no probe line"

    hl submit submit "${job_args[@]}" --host login-via || fail "submit via ProxyJump: exit $?"
    job2=$(cat submit.out)
    hl follow logs -f "$job2" || fail "logs -f via ProxyJump: exit $?"
    expect follow.out "probe rank=0" "logs -f: no probe line"

    git init -q src && cp probe.sh src/ && git -C src add probe.sh
    (cd src && timeout 300 "$hpclaunch" run "${job_args[@]}" --set trainer.program=./probe.sh \
      --host login --jump jumpB --sync --ssh-config "$J/config" >"$work/sync.out" \
      2>"$work/sync.err") || fail "run --sync via jumpB: exit $?"
    expect sync.err "sync: tree [0-9a-f]+ \(1 files\)" "sync: no upload line"
    expect sync.out "probe rank=0" "sync: the job did not run the synced probe"
    logins=$(($(accepted "$login_log") - before))
    # run, status, logs, submit, logs -f, run --sync: one login each, through the jumps.
    ((logins == 6)) || fail "$logins logins on the login node for 6 commands"
    echo "run, status, logs, submit, logs -f, run --sync through jump hosts: 6 commands, $logins logins"
    ;;
  host_keys)
    rc=0
    hl wrong run "${job_args[@]}" --host login --jump jumpA,jumpB \
      --known-hosts "$J/known_hosts_wrong_b" || rc=$?
    ((rc == 2)) || fail "wrong key on hop 2: exit $rc"
    expect wrong.err "refusing jump host jumpB .*differs from the one recorded" "wrong key"
    (($(wc -l <wrong.err) == 1)) || fail "wrong key: not one line"
    rc=0
    hl unknown run "${job_args[@]}" --host login --jump jumpA,jumpB \
      --known-hosts "$J/known_hosts_no_a" || rc=$?
    ((rc == 2)) || fail "unknown hop 1: exit $rc"
    expect unknown.err "refusing jump host jumpA .*is not in" "unknown first hop"
    rc=0
    hl bad run "${job_args[@]}" --host login --jump "jumpA,-oProxyCommand=touch $work/pwned" ||
      rc=$?
    ((rc == 2)) || fail "a hop that is no host: exit $rc"
    expect bad.err "is not a jump host" "bad hop"
    [[ ! -e $work/pwned ]] || fail "a hop ran a command"
    (($(runs) == 0)) || fail "a run was recorded"
    echo "wrong key on hop 2, unknown hop 1, bad hop: refused, exit 2, nothing submitted"
    ;;
  kbdint)
    kbd_before=$(accepted "$J/kbdjump.log")
    rc=0
    python3 "$pty_answer" "$(<"$code_file")" tty.txt -- "$hpclaunch" submit "${job_args[@]}" \
      --host login --jump kbdjump,jumpB --ssh-config "$J/config" || rc=$?
    ((rc == 0)) || { cat tty.txt >&2; fail "submit with the code on a terminal: exit $rc"; }
    expect tty.txt "^prompts 1$" "the code was not asked exactly once"
    expect tty.txt "jump host kbdjump .* asks:" "no prompt naming the jump host"
    ! grep -q "$(<"$code_file")" <(grep -v '^prompts' tty.txt) || fail "the code was echoed"
    (($(accepted "$J/kbdjump.log") == kbd_before + 1)) || fail "not one login on kbdjump"
    expect "$J/kbdjump.log" "Accepted keyboard-interactive/pam for $client_user" "no PAM login"
    rc=0
    python3 "$pty_answer" 000000 wrong.txt -- "$hpclaunch" submit "${job_args[@]}" \
      --host login --jump kbdjump,jumpB --ssh-config "$J/config" || rc=$?
    ((rc == 2)) || { cat wrong.txt >&2; fail "a wrong code: exit $rc"; }
    expect wrong.txt "kbdjump .*refused the login" "a wrong code: no refusal"
    before=$(runs)
    tries=$(grep -c 'keyboard-interactive' "$J/kbdjump.log" || true)
    rc=0
    setsid timeout 60 "$hpclaunch" submit "${job_args[@]}" --host login --jump kbdjump,jumpB \
      --ssh-config "$J/config" </dev/null >notty.out 2>notty.err || rc=$?
    ((rc == 2)) || fail "no terminal: exit $rc"
    expect notty.err "asks for a one-time code .* no terminal to ask on" "no terminal: no line"
    (($(wc -l <notty.err) == 1)) || fail "no terminal: not one line"
    (($(runs) == before)) || fail "no terminal: a run was recorded"
    # Nothing was answered: no keyboard-interactive attempt failed or succeeded in sshd's log.
    (($(grep -c 'Accepted keyboard-interactive\|Failed keyboard-interactive' "$J/kbdjump.log" ||
      true) <= tries)) || fail "no terminal: an answer was sent"
    echo "one-time code: asked once on a terminal; wrong code refused; no terminal: exit 2"
    ;;
  sweep)
    # shellcheck disable=SC2016  # expanded by the job
    printf '%s\n' '#!/bin/bash' '[[ ${RANK:-0} == 0 ]] && echo "tps 100"' >prog.sh
    chmod 755 prog.sh
    k0=$(accepted "$J/kbdjump.log") b0=$(accepted "$J/jumpB.log") l0=$(accepted "$login_log")
    rc=0
    python3 "$pty_answer" "$(<"$code_file")" tty.txt -- "$hpclaunch" sweep --presets 1n1g \
      --repeats 10 --launch srun --metric-regex 'tps ([0-9.]+)' --no-project --poll 0.5 \
      --set shape.cpus_per_gpu=1 --set "job.name=$name" --out "$work/$name" \
      --remote-runs-dir "$work/remote-runs" --host login --jump kbdjump,jumpB \
      --ssh-config "$J/config" -- "$work/prog.sh" || rc=$?
    ((rc == 0)) || { tail -n 40 tty.txt >&2; fail "sweep: exit $rc"; }
    rows=$(($(wc -l <"$work/$name/results.csv") - 1))
    ((rows == 10)) || fail "sweep: $rows rows, not 10"
    expect tty.txt "^prompts 1$" "sweep: the code was not asked exactly once"
    k=$(($(accepted "$J/kbdjump.log") - k0)) b=$(($(accepted "$J/jumpB.log") - b0))
    l=$(($(accepted "$login_log") - l0))
    echo "10-point sweep through kbdjump,jumpB: logins kbdjump $k, jumpB $b, login node $l; 1 prompt"
    ((k == 1 && b == 1 && l == 1)) || fail "logins: kbdjump $k, jumpB $b, login node $l (not 1)"
    ;;
  reconnect)
    # shellcheck disable=SC2016  # expanded by the job
    printf '%s\n' '#!/bin/bash' 'sleep 8' 'echo "probe rank=$SLURM_PROCID done"' >slow.sh
    chmod 755 slow.sh
    a0=$(accepted "$J/jumpA.log") b0=$(accepted "$J/jumpB.log") l0=$(accepted "$login_log")
    timeout 300 "$hpclaunch" run "${job_args[@]}" --set "trainer.program=$work/slow.sh" \
      --host login --jump jumpA,jumpB --ssh-config "$J/config" >follow.out 2>follow.err &
    follower=$!
    for _ in $(seq 100); do
      grep -q "submitted job" follow.err 2>/dev/null && break
      sleep 0.1
    done
    sleep 2
    # jumpB's connection processes (children of the sshd this test started) end: the hop drops.
    mapfile -t conns < <(pgrep -P "$(<"$J/jumpB.pid")")
    ((${#conns[@]} > 0)) || fail "no connection on jumpB to drop"
    kill "${conns[@]}"
    rc=0
    wait "$follower" || rc=$?
    ((rc == 0)) || fail "run whose jump host dropped: exit $rc"
    expect follow.out "probe rank=0 done" "run: no probe line after the drop"
    expect follow.err "COMPLETED with exit code 0" "run: not COMPLETED after the drop"
    a=$(($(accepted "$J/jumpA.log") - a0)) b=$(($(accepted "$J/jumpB.log") - b0))
    l=$(($(accepted "$login_log") - l0))
    echo "a jump host dropped under run's follow: logins jumpA $a, jumpB $b, login node $l"
    ((a == 2 && b == 2 && l == 2)) || fail "not one new login on each hop after the drop"
    ;;
  *) fail "unknown case $case_name" ;;
esac
