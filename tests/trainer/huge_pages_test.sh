#!/usr/bin/env bash
# `hpctrain train` asks glibc's malloc for transparent huge pages by starting itself again with
# GLIBC_TUNABLES=glibc.malloc.hugetlb=1 when THP is in "madvise" mode (trainer/main.cc):
#   - a run of the benchmark's shape (hundreds of MB of tensors) is the same process (the pid
#     the shell started), has the tunable in its environment, and holds huge pages
#     (AnonHugePages in /proc/PID/smaps_rollup);
#   - HPCTRAIN_HUGE_PAGES=0: no tunable, no huge pages; a user's own GLIBC_TUNABLES is kept and
#     extended, and glibc.malloc.hugetlb=0 in it obeyed;
#   - both runs give the same losses (the pages change nothing computed).
# Where THP is not "madvise" there is nothing to ask for: exit 77 (skipped, with the reason; a
# failure under CI=true).
source "$(dirname "$0")/lib.sh"
mode=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "no THP")
if [[ $mode != *"[madvise]"* ]]; then
  echo "SKIP: transparent huge pages are '$mode' here, not [madvise]: hpctrain leaves them be"
  [[ ${CI:-} == true ]] && fail "CI machines have THP in madvise mode (Debian's default)"
  exit 77
fi
make_corpus "$WORK/data"
# The [V, C] embedding alone is 4 MiB here, its AdamW moments and gradient as much again.
common=(--data "$WORK/data/corpus_train.txt" --n-layer 1 --n-head 2 --n-embd 64 --block-size 64
        --vocab-size 16384 --micro-batch 2 --seq-len 64 --total-batch-tokens 256 --eval-every 0
        --seed 3 --threads 1 --max-steps 60 --warmup-steps 2 --log-every 1)

# run TAG [env...]: starts hpctrain under env, samples its environment and huge pages once step 3
# is logged, lets it finish; sets $environ and $huge (kB).
run() {
  local tag=$1 pid i
  shift
  env "$@" "$HPCTRAIN" train "${common[@]}" --metrics "$WORK/$tag.jsonl" >"$WORK/$tag.log" 2>&1 &
  pid=$!
  for i in $(seq 600); do
    grep -q "^step *3 |" "$WORK/$tag.log" && break
    kill -0 $pid 2>/dev/null || fail "$tag: hpctrain ended early: $(tail -n 3 "$WORK/$tag.log")"
    sleep 0.05
  done
  environ=$(tr '\0' '\n' <"/proc/$pid/environ" | grep '^GLIBC_TUNABLES=' || true)
  huge=$(awk '/^AnonHugePages:/ {print $2}' "/proc/$pid/smaps_rollup")
  wait $pid || fail "$tag: hpctrain failed: $(tail -n 3 "$WORK/$tag.log")"
}

run huge
[[ $environ == *glibc.malloc.hugetlb=1* ]] ||
  fail "the started process (pid kept) has '$environ', not the hugetlb tunable"
((huge > 0)) || fail "no huge pages in the training process (AnonHugePages $huge kB)"
echo "huge_pages: the same pid runs with $environ and holds $huge kB of huge pages"

run small HPCTRAIN_HUGE_PAGES=0
[[ -z $environ ]] || fail "HPCTRAIN_HUGE_PAGES=0 still set $environ"
((huge == 0)) || fail "HPCTRAIN_HUGE_PAGES=0 still holds $huge kB of huge pages"
diff <(losses "$WORK/huge.jsonl") <(losses "$WORK/small.jsonl") >/dev/null ||
  fail "huge pages changed the losses"
echo "huge_pages: HPCTRAIN_HUGE_PAGES=0: no tunable, 0 kB of huge pages, the same 60 losses"

# glibc rewrites the variable in place as it reads it (2.36 keeps arena_max in it, not hugetlb):
# what counts is the user's tunable kept, and the huge pages.
run own GLIBC_TUNABLES=glibc.malloc.arena_max=2
[[ $environ == *glibc.malloc.arena_max=2* ]] || fail "a user's GLIBC_TUNABLES became '$environ'"
((huge > 0)) || fail "with a user's GLIBC_TUNABLES: no huge pages"
run off GLIBC_TUNABLES=glibc.malloc.hugetlb=0
[[ $environ == "GLIBC_TUNABLES=glibc.malloc.hugetlb=0" ]] || fail "hugetlb=0 became '$environ'"
((huge == 0)) || fail "GLIBC_TUNABLES=glibc.malloc.hugetlb=0 still holds $huge kB of huge pages"
echo "huge_pages: a user's GLIBC_TUNABLES kept (arena_max=2 extended, hugetlb=0 obeyed)"
