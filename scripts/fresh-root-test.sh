#!/usr/bin/env bash
# The README's two commands on a truly fresh Debian 12: builds a minimal root with debootstrap,
# gives it what a real machine has (proc, sys with the cgroup hierarchy, dev, /etc/hosts), copies
# in a clean clone of this checkout's HEAD, and runs inside it
#   scripts/quickstart.sh   (the main job: install, build, a small GPT-2 training)
#   scripts/test.sh         (the whole suite, CI=true, in a network namespace of its own)
# as each of
#   root   root, with the checkout in /root (mode 0700)
#   user   an ordinary user `dev` with a 0700 home and passwordless sudo (for the install step
#          and the test cluster's daemons)
# and prints how long each command took and the test counts. Needs root on the host.
#
#   scripts/fresh-root-test.sh [--as root|user|both] [--work DIR] [--keep] [--mirror URL]
#
#   --as      which ways to run (default both, one after the other, each in a new root)
#   --work    where the roots, logs and caches go (default /var/tmp/hpclaunch-fresh-root)
#   --keep    leave the roots in place afterwards (to look inside); the default removes them
#   --mirror  the Debian mirror (default http://deb.debian.org/debian)
#
# Nothing installed on the host is used inside: the root starts as debootstrap's minbase. Two
# things are kept between runs to save downloads, and neither is installed state: the minbase
# itself as a tarball (WORK/cache/minbase.tar, made once) and apt's downloaded .deb files
# (WORK/cache/apt, bind-mounted as the root's /var/cache/apt/archives).
set -euo pipefail

ways=both
work=/var/tmp/hpclaunch-fresh-root
keep=0
mirror=http://deb.debian.org/debian
while (($#)); do
  case $1 in
    --as) ways=${2:?--as needs root, user or both}; shift 2 ;;
    --work) work=${2:?--work needs a directory}; shift 2 ;;
    --keep) keep=1; shift ;;
    --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh-root-test: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $ways in
  root) way_list=(root) ;;
  user) way_list=(user) ;;
  both) way_list=(root user) ;;
  *) echo "fresh-root-test: --as must be root, user or both, not '$ways'" >&2; exit 2 ;;
esac

say() { echo "fresh-root-test: $*" >&2; }
die() { say "$*"; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root on the host (debootstrap, chroot, mounts)"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
git -C "$repo" rev-parse --verify HEAD >/dev/null 2>&1 || die "$repo is not a git checkout"
"$repo/scripts/install-deps.sh" --fresh-root >/dev/null

mkdir -p "$work/cache/apt/partial" "$work/logs"
work=$(cd "$work" && pwd)
root=""  # the root being used; the EXIT trap tears it down

# ---------------------------------------------------------------- the root

# shellcheck source-path=SCRIPTDIR source=lib/debian-root.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-root.sh" # teardown_root, make_minbase, on_exit

trap on_exit EXIT

new_root() {
  root=$work/root-$1
  teardown_root "$root"
  rm -rf --one-file-system "$root"
  mkdir -p "$root"
  tar -C "$root" -xf "$work/cache/minbase.tar"
  # What a real machine has: proc, sys (with the cgroup hierarchy), dev, the name service files.
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --make-rslave "$root/sys"
  mount --rbind /dev "$root/dev"
  mount --make-rslave "$root/dev"
  mount --bind "$work/cache/apt" "$root/var/cache/apt/archives"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # As a container's: localhost only. The machine's own name does not resolve, which the
  # suite must survive (a one-node job needs no name service).
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
  cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  echo fresh-debian >"$root/etc/hostname"
}

# A clean clone of HEAD at $1 (inside the root), owned by $2.
clone_into() {
  local dest=$root$1 owner=$2
  git clone -q --no-local --no-hardlinks "$repo" "$dest"
  chroot "$root" chown -R "$owner:" "$1"  # the user exists in the root, not on the host
}

# Runs bash command $2 in the root as user $1 with a clean environment, in a UTS namespace named
# fresh-debian; with $3 = isolated, also in a network namespace of its own (loopback only).
in_root() {
  local user=$1 cmd=$2 net=${3:-} home=/root
  [[ $user == root ]] || home=/home/$user
  local inner=(chroot "$root" /usr/sbin/runuser -u "$user" -- /usr/bin/env -i
    "HOME=$home" "USER=$user" "LOGNAME=$user" "TERM=dumb" "LANG=C.UTF-8" "CI=true"
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" /bin/bash -c "$cmd")
  if [[ $net == isolated ]]; then
    # A network of its own: the loopback, and one interface with an address as a real machine
    # has (slurmctld asks getaddrinfo with AI_ADDRCONFIG, which ignores the loopback). The veth's
    # peer stays in the namespace too, so nothing leaves it. 192.0.2.0/24 is TEST-NET-1.
    unshare --uts --net -- /bin/sh -c 'hostname fresh-debian && ip link set lo up &&
      ip link add eth0 type veth peer name eth0-peer && ip addr add 192.0.2.10/24 dev eth0 &&
      ip link set eth0-peer up && ip link set eth0 up && exec "$@"' sh "${inner[@]}"
  else
    unshare --uts -- /bin/sh -c 'hostname fresh-debian && exec "$@"' sh "${inner[@]}"
  fi
}

# Runs step $2 (a bash command) as user $1, logging to $3; prints and records its time.
results=()
timed() {
  local user=$1 cmd=$2 log=$3 net=${4:-} t0 rc=0 s
  t0=$SECONDS
  say "[$way] $cmd (log: $log)"
  in_root "$user" "$cmd" "$net" >"$log" 2>&1 || rc=$?
  s=$((SECONDS - t0))
  results+=("$(printf '%-5s %-48s exit %d in %dm%02ds' "$way" "$cmd" "$rc" $((s / 60)) $((s % 60)))")
  say "[$way] exit $rc after $((s / 60))m$(printf %02d $((s % 60)))s"
  return "$rc"
}

# "N tests passed, M failed out of T" from a ctest log, and the failed tests' names.
test_counts() {
  local log=$1
  grep -E '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1 || true
  sed -n '/^The following tests FAILED:/,$p' "$log" | grep -E '^\s+[0-9]+ - ' || true
}

make_minbase bookworm "$work/cache/minbase.tar" "$work/logs/debootstrap.log"
overall=0
for way in "${way_list[@]}"; do
  new_root "$way"
  case $way in
    root)
      user=root checkout=/root/hpclaunch
      chmod 0700 "$root/root"
      ;;
    user)
      user=dev checkout=/home/dev/hpclaunch
      # An ordinary user as Debian 12 makes one (home 0700), who may use sudo. '*' is no
      # password yet not a locked account (sshd refuses logins to locked ones).
      chroot "$root" /usr/sbin/useradd -m -s /bin/bash -p '*' "$user"
      chmod 0700 "$root/home/$user"
      say "[$way] apt-get install sudo (the user's machine has it; the project needs it for root steps)"
      in_root root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends sudo" \
        >"$work/logs/$way-sudo.log" 2>&1 || die "could not install sudo; see $work/logs/$way-sudo.log"
      printf '%s ALL=(ALL:ALL) NOPASSWD: ALL\n' "$user" >"$root/etc/sudoers.d/$user"
      chmod 0440 "$root/etc/sudoers.d/$user"
      ;;
  esac
  clone_into "$checkout" "$user"
  rc=0
  timed "$user" "cd $checkout && scripts/quickstart.sh" "$work/logs/$way-quickstart.log" || rc=1
  timed "$user" "cd $checkout && scripts/test.sh" "$work/logs/$way-test.log" isolated || rc=1
  counts=$(test_counts "$work/logs/$way-test.log")
  results+=("$way  tests: ${counts:-no ctest summary (see $work/logs/$way-test.log)}")
  ((rc == 0)) || overall=1
  teardown_root "$root"
  if ((keep == 0)); then rm -rf --one-file-system "$root"; fi
  root=""
done

echo "fresh-root-test: $(git -C "$repo" rev-parse --short HEAD), logs in $work/logs"
printf '  %s\n' "${results[@]}"
exit "$overall"
