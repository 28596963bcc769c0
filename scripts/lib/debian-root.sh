# shellcheck shell=bash
# Sourced by scripts/fresh-root-test.sh and scripts/slurm-matrix.sh: what both need to make a
# debootstrapped root and take it down again. The caller defines say and die, and the globals
# mirror (the Debian mirror), root (the root in use) and keep (1: leave it in place at exit).

# Every process whose root directory is $1 (left over by a failed run: daemons of the test
# cluster, a job) is killed; then the mounts under $1 go.
teardown_root() {
  local r=$1 pid link
  [[ -n $r && -d $r ]] || return 0
  for _ in 1 2 3; do
    local pids=()
    for link in /proc/[0-9]*/root; do
      pid=${link#/proc/}
      pid=${pid%/root}
      [[ $(readlink "$link" 2>/dev/null) == "$r" ]] && pids+=("$pid")
    done
    ((${#pids[@]})) || break
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 1
  done
  # Deepest mounts first.
  findmnt -rn -o TARGET | { grep -F "$r/" || true; } | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  # The root itself, where it was bound onto itself (slurm-matrix.sh: / is a mount point there).
  while findmnt -rn -o TARGET | grep -qxF "$r"; do umount -l "$r" 2>/dev/null || break; done
}

# make_minbase SUITE TARBALL LOG: debootstrap's minbase of SUITE, kept as TARBALL (made once).
# shellcheck disable=SC2154  # mirror is the caller's
make_minbase() {
  local suite=$1 tarball=$2 log=$3 tmp=$2.dir
  [[ -s $tarball ]] && return 0
  say "debootstrap --variant=minbase $suite (once; kept as $tarball)"
  rm -rf --one-file-system "$tmp"
  debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$log" 2>&1 ||
    die "debootstrap failed; see $log"
  rm -rf "$tmp"/var/cache/apt/archives/*.deb
  tar -C "$tmp" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf --one-file-system "$tmp"
}

# The EXIT trap: the root in use goes down, and away unless kept.
# shellcheck disable=SC2317,SC2154  # invoked by the EXIT trap; keep and root are the caller's
on_exit() {
  local rc=$?
  teardown_root "$root"
  if ((keep == 0)) && [[ -n $root ]]; then rm -rf --one-file-system "$root"; fi
  exit "$rc"
}
