#!/usr/bin/env bash
# The launcher's cluster tests on more than one Slurm (issue 29): for each Debian release named,
# builds a root with debootstrap (as scripts/fresh-root-test.sh does), installs that release's
# Slurm and the launcher's build dependencies from it, copies in a clean clone of this checkout's
# HEAD, builds the launcher there without the trainer (-DHPC_BUILD_TRAINER=OFF: the cluster tests
# use a probe program, not hpctrain), runs the cluster-backed test groups there with ctest (their
# fixtures bring scripts/testcluster.sh's cluster up inside the root), records what Slurm's
# commands print (WORK/logs/SUITE-slurm-output.txt), and prints a table Slurm version x group.
# Needs root on the host.
#
#   scripts/slurm-matrix.sh [--suites LIST] [--groups REGEX] [--exclude REGEX] [--work DIR]
#                           [--keep] [--mirror URL]
#
#   --suites  comma-separated Debian releases (default trixie,bookworm):
#             trixie = Slurm 24.11.5, bookworm = Slurm 22.05.8 (the host's version)
#   --groups  ctest -R regex of the groups to run (default
#             '^(cluster|slurm|ssh|preflight|ib|programs):', the groups that need a cluster and
#             no hpctrain)
#   --exclude ctest -E regex of tests to leave out (default: none)
#   --work    roots, caches, logs (default /var/tmp/hpclaunch-slurm-matrix; ~6 GB per release
#             for its Python environment, ~1 GB for the rest)
#   --keep    leave the roots in place afterwards (to look inside); the default removes them
#   --mirror  the Debian mirror (default http://deb.debian.org/debian)
#
# Kept between runs (none of it is the project's state): each release's minbase as a tarball
# (WORK/cache/SUITE-minbase.tar), the root with its packages installed
# (WORK/cache/SUITE-packages-HASH.tar, HASH of the package list), apt's .deb files, a ccache
# directory and the tests' Python environment per release (WORK/cache/python-SUITE). Each root
# runs in UTS and network namespaces of its own (loopback and a veth pair that leaves nothing),
# so its test clusters never meet the host's. Whatever the script mounts or starts is stopped on
# exit, also on failure or Ctrl-C (EXIT trap).
# Environment: JOBS (build parallelism, default nproc), NICE (niceness of builds/tests, default 0).
set -euo pipefail

suites=trixie,bookworm
groups='^(cluster|slurm|ssh|preflight|ib|programs):'
exclude=''
work=/var/tmp/hpclaunch-slurm-matrix
keep=0
mirror=http://deb.debian.org/debian
jobs=${JOBS:-$(nproc)}
niceness=${NICE:-0}
while (($#)); do
  case $1 in
    --suites) suites=${2:?--suites needs a list}; shift 2 ;;
    --groups) groups=${2:?--groups needs a regex}; shift 2 ;;
    --exclude) exclude=${2:?--exclude needs a regex}; shift 2 ;;
    --work) work=${2:?--work needs a directory}; shift 2 ;;
    --keep) keep=1; shift ;;
    --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "slurm-matrix: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
IFS=, read -r -a suite_list <<<"$suites"
for s in "${suite_list[@]}"; do
  case $s in
    trixie|bookworm) ;;
    *) echo "slurm-matrix: unknown suite '$s' (trixie or bookworm)" >&2; exit 2 ;;
  esac
done
[[ $jobs =~ ^[0-9]+$ && $niceness =~ ^-?[0-9]+$ ]] || { echo "slurm-matrix: JOBS/NICE must be numbers" >&2; exit 2; }

say() { echo "slurm-matrix: $*" >&2; }
die() { say "$*"; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root on the host (debootstrap, chroot, mounts, namespaces)"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
git -C "$repo" rev-parse --verify HEAD >/dev/null 2>&1 || die "$repo is not a git checkout"
for tool in debootstrap unshare ip git findmnt tar; do
  command -v "$tool" >/dev/null || die "'$tool' not found; run scripts/install-deps.sh --fresh-root"
done

mkdir -p "$work/cache" "$work/logs"
work=$(cd "$work" && pwd)
root=""  # the root in use; the EXIT trap tears it down
# Where install-deps.sh --python keeps the tests' Python environment in a root (its
# XDG_CACHE_HOME), bound to WORK/cache/python-SUITE.
python_cache=/var/cache/hpclaunch-python

# What each root installs: that release's Slurm (as scripts/install-deps.sh's cluster packages,
# with slurmdbd and MariaDB for the preflight tests' accounting cluster, Charliecloud and the
# static busybox for the container tests) and the launcher's build dependencies. The tests are written for Catch2 2; trixie ships Catch2 3 (3.7.1), so the trixie
# root takes bookworm's catch2 2.13.10 (headers and CMake files only, Architecture: all).
slurm_pkgs=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server
  openssh-server openssh-client iproute2 util-linux procps charliecloud-runtime busybox-static)
build_pkgs=(build-essential cmake ccache pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev
  libkainjow-mustache-dev libssh-dev libssl-dev libre2-dev python3 git libxml2-utils gnuplot-nox)
# The cases that run a PyTorch program (programs:*, ib:allreduce_*, ib:rendezvous_control) use
# the project's own Python environment, made in the root by `scripts/install-deps.sh --python`
# from the release's python3 (3.13 on trixie, 3.11 on bookworm) with the same pins as on the
# host (scripts/python-requirements.txt; torch 2.x from PyPI). Not Debian 13's python3-torch
# 2.6: it is built without libuv, which torchrun's c10d store asks for ("use_libuv was
# requested but PyTorch was build without libuv support"), and a 2-node allreduce.py under srun
# hung at exit with it in 1 of 2 runs.
python_pkgs=(python3-venv)
catch2_pkg() { if [[ $1 == trixie ]]; then echo catch2/bookworm; else echo catch2; fi; }
# Debian 13's slurmdbd 24.11.5 with its libmariadb3 (Connector/C 3.4, from MariaDB 11.8.9) stops
# at its first query ("mysql_query failed: 5027 Number of columns in result (=1) set execeeds
# maxmimum allowed number of columns (=0)", `select @var := concat('')`); with bookworm's
# libmariadb3 10.11 it runs against the same MariaDB 11.8.9 server (checked here). So trixie's
# root takes that one library from bookworm, for the accounting tests.
extra_step() {
  if [[ $1 == trixie ]]; then
    echo "apt-get install -y -qq --allow-downgrades --no-install-recommends libmariadb3/bookworm"
  else
    echo true
  fi
}

# ---------------------------------------------------------------- roots

# shellcheck source-path=SCRIPTDIR source=lib/debian-root.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-root.sh" # teardown_root, make_minbase, on_exit

trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The root bound onto itself (so that / is a mount point in it, as on a booted system:
# testcluster.sh --ib-netns runs `mount --make-rslave /`), then proc, sys (with the cgroup
# hierarchy), dev, apt's and ccache's caches, the tests' Python environment.
mount_root() {
  local suite=$1
  mkdir -p "$work/cache/apt-$suite/partial" "$work/cache/ccache-$suite" "$root/var/cache/ccache" \
    "$work/cache/python-$suite" "$root$python_cache"
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --make-rslave "$root/sys"
  mount --rbind /dev "$root/dev"
  mount --make-rslave "$root/dev"
  mount --bind "$work/cache/apt-$suite" "$root/var/cache/apt/archives"
  mount --bind "$work/cache/ccache-$suite" "$root/var/cache/ccache"
  mount --bind "$work/cache/python-$suite" "$root$python_cache"
}

# Runs bash command $1 as root in the root with a clean environment, in UTS and network namespaces
# of its own: hostname matrix-SUITE, the loopback and one veth address (slurmctld asks getaddrinfo
# with AI_ADDRCONFIG, which ignores the loopback; the veth's peer stays inside). 192.0.2.0/24 is
# TEST-NET-1. $2 = online keeps the host's network (apt).
# The root is entered with pivot_root in a mount namespace of its own, not chroot: the kernel
# refuses a user namespace to a chrooted process (EPERM), and Charliecloud's ch-run (the
# container tests) needs one.
in_root() {
  local cmd=$1 net=${2:-}
  # shellcheck disable=SC2016  # $1 and $@ expand in the inner shell
  local inner=(unshare --mount --propagation private -- /bin/sh -c 'cd "$1" && shift &&
    mkdir -p .pivot-old && pivot_root . .pivot-old && umount -l /.pivot-old &&
    rmdir /.pivot-old && exec "$@"' sh "$root"
    /usr/bin/env -i HOME=/root USER=root LOGNAME=root TERM=dumb
    LANG=C.UTF-8 CI=true CCACHE_DIR=/var/cache/ccache DEBIAN_FRONTEND=noninteractive
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    nice -n "$niceness" /bin/bash -c "$cmd")
  if [[ $net == online ]]; then
    "${inner[@]}"
  else
    # shellcheck disable=SC2016  # $1 and $@ expand in the inner shell
    unshare --uts --net -- /bin/sh -c 'hostname "$1" && shift && ip link set lo up &&
      ip link add eth0 type veth peer name eth0-peer && ip addr add 192.0.2.10/24 dev eth0 &&
      ip link set eth0-peer up && ip link set eth0 up && exec "$@"' sh "matrix-$suite" "${inner[@]}"
  fi
}

# pip in a root trusts what the host trusts: the host's CA bundle (PIP_CERT, else Debian's
# /etc/ssl/certs/ca-certificates.crt, which has a site's or a proxy's own CA once
# update-ca-certificates ran) is copied in, and the host's index and proxy settings are passed
# on. Prints the assignments for in_root's command line.
pip_env() {
  local bundle=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt} v out=""
  if [[ -s $bundle ]]; then
    mkdir -p "$root/etc/ssl/certs"
    cp "$bundle" "$root/etc/ssl/certs/host-ca-bundle.crt"
    out="PIP_CERT=/etc/ssl/certs/host-ca-bundle.crt"
  fi
  for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_DEFAULT_TIMEOUT http_proxy https_proxy no_proxy \
    HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    if [[ -n ${!v:-} ]]; then out+=" $v=$(printf %q "${!v}")"; fi
  done
  echo "$out"
}

# The root of release $1 with its packages: from the cache, else minbase + apt (then cached).
new_root() {
  local suite=$1 hash tarball
  hash=$(printf '%s\n' "${slurm_pkgs[@]}" "${build_pkgs[@]}" "${python_pkgs[@]}" \
    "$(catch2_pkg "$suite")" "$(extra_step "$suite")" | sha256sum | cut -c1-12)
  tarball=$work/cache/$suite-packages-$hash.tar
  root=$work/root-$suite
  teardown_root "$root"
  rm -rf --one-file-system "$root"
  mkdir -p "$root"
  if [[ -s $tarball ]]; then
    tar -C "$root" -xf "$tarball"
    mount_root "$suite"
  else
    make_minbase "$suite" "$work/cache/$suite-minbase.tar" "$work/logs/$suite-debootstrap.log"
    tar -C "$root" -xf "$work/cache/$suite-minbase.tar"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    {
      echo "deb $mirror $suite main"
      echo "deb $mirror $suite-updates main"
      echo "deb http://deb.debian.org/debian-security $suite-security main"
    } >"$root/etc/apt/sources.list"
    if [[ $suite == trixie ]]; then
      # Only for catch2 (asked for as catch2/bookworm); nothing else comes from there.
      echo "deb $mirror bookworm main" >>"$root/etc/apt/sources.list"
      printf 'Package: *\nPin: release n=bookworm\nPin-Priority: 100\n' >"$root/etc/apt/preferences.d/bookworm"
    fi
    mount_root "$suite"
    say "[$suite] apt-get install Slurm and the build dependencies (once; kept as $tarball)"
    in_root "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${slurm_pkgs[*]} \
      ${build_pkgs[*]} ${python_pkgs[*]} $(catch2_pkg "$suite") && $(extra_step "$suite")" \
      online >"$work/logs/$suite-apt.log" 2>&1 || die "apt-get failed; see $work/logs/$suite-apt.log"
    teardown_root "$root"
    tar -C "$root" --one-file-system -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    # An earlier package list's root is not used again.
    find "$work/cache" -maxdepth 1 -name "$suite-packages-*.tar" ! -name "${tarball##*/}" -delete
    mount_root "$suite"
  fi
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
  echo "matrix-$suite" >"$root/etc/hostname"
}

# ---------------------------------------------------------------- what Slurm prints
# Brings a cluster of its own up in the root, runs each command hpclaunch reads the output of
# (with the options hpclaunch passes) and keeps what they print, then stops it again.
capture_script() {
  cat <<'SCRIPT'
set -u
d=/tmp/matrix-capture
cd /src/hpclaunch
scripts/testcluster.sh up --dir "$d" --port-base 16000 --ssh-port 16099 >/dev/null 2>&1 || { echo "up failed"; exit 1; }
trap 'scripts/testcluster.sh down --dir "$d" >/dev/null 2>&1' EXIT
eval "$(scripts/testcluster.sh env --dir "$d")"
show() { echo "### \$ $*"; "$@" 2>&1; echo "### exit $?"; }
job=$d/jobs/probe.sh
printf '#!/bin/bash\nsleep 30\n' >"$job"
show sinfo --version
show scontrol --version
echo '### $ scontrol show config | grep -E "^(Configuration|SelectType|GresTypes|MULTIPLE_SLURMD|SLURM_VERSION) "'
scontrol show config 2>&1 | grep -E '^(Configuration|SelectType|GresTypes|MULTIPLE_SLURMD|SLURM_VERSION) '
show sbatch --test-only -N1 -t 5 "$job"
show sbatch --test-only -N9 -t 5 "$job"
out=$(sbatch --parsable --hold --comment=hpclaunch:matrix -N1 -t 5 "$job" 2>&1)
echo "### \$ sbatch --parsable --hold --comment=hpclaunch:matrix -N1 -t 5 JOB"; echo "$out"
id=${out%%;*}
show squeue --noheader --all "--format=%i %k"
show scontrol show job --oneliner "$id"
show scontrol release "$id"
sleep 2
show scontrol show job --oneliner "$id"
show scancel "$id"
sleep 6
show scontrol show job --oneliner "$id"
show scontrol show job --oneliner 999999
show squeue --noheader --all "--format=%i %k" --job 999999
show scontrol show partition --oneliner
show sinfo --noheader --Node --partition=debug "--format=%N|%G|%c|%m|%T"
show scontrol show node --oneliner node01
show sacct --noheader --parsable2 --allocations --jobs "$id" --format=JobID,State,ExitCode,NodeList,ElapsedRaw,Restarts,End
show squeue --json --job "$id"
SCRIPT
}

# ---------------------------------------------------------------- results
# "PASSED/TOTAL" per group (the test name up to its first ':') from a ctest log, as "group cell"
# lines; failed tests are listed in the log's "The following tests FAILED" part.
group_counts() {
  awk '
    /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / {
      name = $0; sub(/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: /, "", name)
      g = name; sub(/:.*/, "", g)
      total[g]++
      if ($0 ~ / Passed +[0-9.]+ sec$/) pass[g]++
      else if ($0 ~ /Skipped/) skip[g]++
    }
    END {
      for (g in total) {
        cell = (pass[g] + 0) "/" total[g]
        if (skip[g]) cell = cell " (" skip[g] " skipped)"
        print g, cell
      }
    }' "$1" | sort
}

declare -A cell=()
declare -A version=()
all_groups=()
add_group() {
  local g
  for g in "${all_groups[@]}"; do [[ $g == "$1" ]] && return 0; done
  all_groups+=("$1")
}

# ---------------------------------------------------------------- per release
overall=0
rev=$(git -C "$repo" rev-parse --short HEAD)
for suite in "${suite_list[@]}"; do
  t0=$SECONDS
  new_root "$suite"
  # From the package: `sinfo --version` needs a slurm.conf (without one 24.11 tries a DNS SRV
  # lookup for a configless controller and stops).
  # shellcheck disable=SC2016  # dpkg-query's format, not a shell expansion
  version[$suite]=$(chroot "$root" dpkg-query -W -f '${Version}' slurm-client 2>/dev/null || true)
  say "[$suite] ${version[$suite]:-no Slurm?}; cloning $rev into /src/hpclaunch"
  mkdir -p "$root/src"
  git clone -q --no-local --no-hardlinks "$repo" "$root/src/hpclaunch"
  blog=$work/logs/$suite-build.log
  tlog=$work/logs/$suite-ctest.log
  plog=$work/logs/$suite-python.log
  say "[$suite] the tests' Python environment (once per release; log: $plog)"
  rc=0
  in_root "cd /src/hpclaunch && XDG_CACHE_HOME=$python_cache $(pip_env) \
    scripts/install-deps.sh --python" online >"$plog" 2>&1 || rc=$?
  venv=$(in_root "cd /src/hpclaunch && XDG_CACHE_HOME=$python_cache \
    scripts/install-deps.sh --python-venv-path" online)
  if ((rc != 0)); then
    blog=$plog
  else
    say "[$suite] building the launcher and the cluster tests (log: $blog)"
    in_root "cd /src/hpclaunch && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
      -DHPC_BUILD_TRAINER=OFF -DHPC_PYTHON_VENV='$venv' && cmake --build build -j$jobs \
      --target hpclaunch cluster_tests slurm_tests ssh_tests" >"$blog" 2>&1 || rc=$?
  fi
  if ((rc != 0)); then
    say "[$suite] build failed (exit $rc); see $blog"
    overall=1
    cell[$suite,build]=FAILED
    add_group build
  else
    filter="-R '$groups'"
    if [[ -n $exclude ]]; then filter+=" -E '$exclude'"; fi
    say "[$suite] ctest $filter (log: $tlog)"
    in_root "cd /src/hpclaunch/build && ctest --output-on-failure -j1 $filter" >"$tlog" 2>&1 ||
      overall=1
    while read -r g c; do
      cell[$suite,$g]=$c
      add_group "$g"
    done < <(group_counts "$tlog")
    say "[$suite] $(grep -E '^[0-9]+% tests passed' "$tlog" | tail -1 || echo 'no ctest summary')"
    olog=$work/logs/$suite-slurm-output.txt
    in_root "$(capture_script)" >"$olog" 2>&1 || say "[$suite] capturing Slurm's output failed; see $olog"
  fi
  teardown_root "$root"
  if ((keep == 0)); then rm -rf --one-file-system "$root"; fi
  root=""
  say "[$suite] done in $(((SECONDS - t0) / 60))m$(printf %02d $(((SECONDS - t0) % 60)))s"
done

echo "slurm-matrix: $rev, logs in $work/logs"
{
  printf 'Slurm'
  for g in "${all_groups[@]}"; do printf '\t%s' "$g"; done
  printf '\n'
  for suite in "${suite_list[@]}"; do
    printf '%s (%s)' "${version[$suite]:-?}" "$suite"
    for g in "${all_groups[@]}"; do printf '\t%s' "${cell[$suite,$g]:--}"; done
    printf '\n'
  done
} | column -t -s $'\t'
for suite in "${suite_list[@]}"; do
  sed -n '/^The following tests FAILED:/,$p' "$work/logs/$suite-ctest.log" 2>/dev/null |
    grep -E '^\s+[0-9]+ - ' | sed "s/^/  $suite: /" || true
done
exit "$overall"
