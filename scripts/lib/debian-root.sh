# shellcheck shell=bash
# Sourced by scripts/fresh-root-test.sh and scripts/slurm-matrix.sh: what both need to take a
# debootstrapped root down again.

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
}
