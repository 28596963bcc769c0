#!/usr/bin/env bash
# Sharded checkpoints of GPT-2 124M on this machine (CPU), measured against the disk they land
# on: the save (parameters + AdamW moments, ~1.5 GB, hashed while written) and the resume (each
# file verified by one rank, streamed from the disk and hashed; the other ranks read only the
# bytes they need) at W=1 and W=2, the resumes across world sizes, and `hpctrain export`.
#
# Like with like: every disk figure is dd on the same bytes in the same run. A save is compared
# with dd writing as many bytes with fsync, unbuffered (oflag=direct) and through the page cache,
# measured just before it, and the faster of the two counts; a resume with dd reading the
# checkpoint's own files (one dd per file, all at once, as the ranks read them), unbuffered and
# through the page cache, measured just before it, and again the faster counts. Both read cold:
# the files' pages are dropped from the page cache before each (dd iflag=nocache, posix_fadvise
# DONTNEED on the files only, so other users of the machine keep theirs; fincore shows none of the
# files' pages resident after it), as after a requeue on another node. The page cache of the
# machine's host (a VM's disk cache) is not dropped: it serves dd and the resume alike.
#
# The machine may be shared: the saves and the resumes run REPEATS times (default 3), alternating
# with their dd writes and reads (dd, save, dd, save, ...), and the tables give medians (the ratio:
# the median of each one's ratio to the dd just before it) and CPU seconds, which other load does
# not change.
#
# Usage: bench/checkpoint_bench.sh [PATH/TO/hpctrain]   (MODEL=mini for a 4x smaller run,
#        REPEATS=5 for more resumes per case). An older hpctrain's missing figures print as "-".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HPCTRAIN=${1:-$here/../build/trainer/hpctrain}
MODEL=${MODEL:-gpt2}
REPEATS=${REPEATS:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/checkpoint-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog."; done >"$work/corpus.txt"
common=(--data "$work/corpus.txt" --model "$MODEL" --micro-batch 1 --seq-len 64
        --total-batch-tokens 128 --eval-every 0 --threads 1 --warmup-steps 1)
port=$((20000 + RANDOM % 20000))
TIMEFORMAT='%R %U %S'  # bash's time: wall, user and system seconds

run() {  # WORLD STRATEGY LOG [args]: rank 0's output in LOG, the wall and CPU seconds in LOG.time
  local world=$1 strategy=$2 log=$3 r
  shift 3
  port=$((port + 1))
  {
    time {
      for ((r = 0; r < world; r++)); do
        RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
          "$HPCTRAIN" train "${common[@]}" --strategy "$strategy" "$@" >"$log.$r" 2>&1 &
      done
      wait
    }
  } 2>"$log.time"
  cp "$log.0" "$log"
}

calc() { echo "scale=4; $*" | bc; }
uncache() { local f; for f in "$@"; do dd if="$f" iflag=nocache count=0 status=none; done; }
# The number after "WORDS " on rank 0's line in LOG, or "-" (an older hpctrain's line lacks it).
after() { grep -o "$2 [0-9.]*" "$1" | head -n 1 | awk '{print $NF}' | grep . || echo -; }
median() { tr ' ' '\n' | grep -v '^-*$' | sort -g | awk '{v[NR]=$1} END {print NR ? v[int((NR+1)/2)] : "-"}'; }
fmt2() { if [[ $1 == - ]]; then echo -; else printf '%.2f' "$1"; fi; }
ratio() { if [[ $1 == - ]]; then echo -; else printf '%.2f' "$(calc "$1 / $2")"; fi; }

# dd reading FILES at once (one dd each), the files' pages dropped first, unbuffered (iflag=direct,
# as the resume reads) and through the page cache: "wall cpu" in seconds of the faster of the two.
disk_read() {
  uncache "$@"
  local f
  { time { for f in "$@"; do dd if="$f" of=/dev/null bs=16M iflag=direct status=none & done; wait; }; } 2>"$work/dd.time"
  uncache "$@"
  { time { for f in "$@"; do dd if="$f" of=/dev/null bs=16M status=none & done; wait; }; } 2>>"$work/dd.time"
  awk '{w[NR] = $1; c[NR] = $2 + $3} END {i = (w[1] <= w[2]) ? 1 : 2; print w[i], c[i]}' "$work/dd.time"
}
# dd writing the bytes of FILE with fsync, MODE "direct" (oflag=direct: from dd's buffer to the
# disk, as the save writes) or "buffered" (through the page cache): seconds.
disk_write() {
  local flag=()
  [[ $2 == direct ]] && flag=(oflag=direct)
  { time dd if="$1" of="$work/dd.bin" bs=16M "${flag[@]}" conv=fsync status=none; } 2>"$work/dd.time"
  rm -f "$work/dd.bin"
  awk '{print $1}' "$work/dd.time"
}

echo "hpctrain $HPCTRAIN, model $MODEL, $REPEATS saves and resumes per case, load average before:" \
  "$(cut -d' ' -f1 /proc/loadavg) on $(getconf _NPROCESSORS_ONLN) cores"

# --- saves, REPEATS times, each just after dd wrote the same bytes (the W=1 checkpoint's file),
# with fsync, both unbuffered and through the page cache; the save's ratio is to the faster of the
# two (the disk's best). Buffered writes on the test machine (a VM) took 0.7 to 4.7 s for the same
# 1.5 GB, depending on what the page cache had to give up first.
run 1 none "$work/save1" --max-steps 1 --checkpoint-at-end --checkpoint-dir "$work/ck1"
ck1=$(ls -d "$work"/ck1/step_*)
bytes=$(du -cb "$ck1"/*.safetensors | tail -n 1 | cut -f1)
declare -A saved
save_cases=("save   W=1 none|1|none" "save   W=2 zero2|2|zero2")
for ((rep = 0; rep < REPEATS; rep++)); do
  for c in "${!save_cases[@]}"; do
    IFS='|' read -r _ world strategy <<<"${save_cases[$c]}"
    direct_s=$(disk_write "$ck1/rank00000.safetensors" direct)
    buffered_s=$(disk_write "$ck1/rank00000.safetensors" buffered)
    best=$(echo "$direct_s $buffered_s" | awk '{print ($1 < $2) ? $1 : $2}')
    rm -rf "$work/cks"
    run "$world" "$strategy" "$work/save" --max-steps 1 --checkpoint-at-end --checkpoint-dir "$work/cks"
    total=$(after "$work/save" 'files,')
    saved[$c,total]+=" $total" saved[$c,direct]+=" $direct_s" saved[$c,buffered]+=" $buffered_s"
    saved[$c,ratio]+=" $(ratio "$total" "$best")" saved[$c,sha]+=" $(after "$work/save" 'SHA-256')"
    saved[$c,wait]+=" $(after "$work/save" 'waited for')"
    if [[ $strategy == zero2 && $rep == 0 ]]; then
      rm -rf "$work/ck2"
      mv "$work/cks" "$work/ck2"
    fi
  done
done
ck2=$(ls -d "$work"/ck2/step_*)
sm() { echo "${saved[$1,$2]}" | median; }
printf '\n%-26s %8s %9s %9s %7s | %9s %9s %7s\n' "save ($((bytes / 1000000)) MB, medians)" "save s" \
  "dd direct" "dd cached" "ratio" "SHA-256" "waited s" "waited"
for c in "${!save_cases[@]}"; do
  total=$(sm "$c" total) wait=$(sm "$c" wait)
  printf '%-26s %8s %9s %9s %6sx | %9s %9s %6s%%\n' "${save_cases[$c]%%|*}" "$(fmt2 "$total")" \
    "$(fmt2 "$(sm "$c" direct)")" "$(fmt2 "$(sm "$c" buffered)")" "$(fmt2 "$(sm "$c" ratio)")" \
    "$(fmt2 "$(sm "$c" sha)")" "$(fmt2 "$wait")" \
    "$([[ $wait == - ]] && echo - || printf '%.0f' "$(calc "100 * $wait / $total")")"
  echo "  each run: save s${saved[$c,total]}; dd direct${saved[$c,direct]}; dd cached${saved[$c,buffered]}"
done
echo "save s: the files written (unbuffered, O_DIRECT, where the file system takes it) and fsynced;"
echo "ratio: median of each save's seconds / the faster dd write just before it; SHA-256: CPU"
echo "seconds hashing beside the writes; waited: the save's wait for the hash after the writes"

# --- resumes: CASE = "NAME|WORLD|STRATEGY|CHECKPOINT"
cases=("resume W=1 none  from W=1|1|none|$ck1" "resume W=2 zero2 from W=2|2|zero2|$ck2"
       "resume W=1 none  from W=2|1|none|$ck2" "resume W=2 zero2 from W=1|2|zero2|$ck1")
declare -A got
for ((rep = 0; rep < REPEATS; rep++)); do
  for c in "${!cases[@]}"; do
    IFS='|' read -r _ world strategy ck <<<"${cases[$c]}"
    read -r dd_s dd_cpu < <(disk_read "$ck"/*.safetensors)
    uncache "$ck"/*.safetensors
    run "$world" "$strategy" "$work/load" --max-steps 1 --resume "$ck"
    log=$work/load
    total=$(after "$log" 'loaded in')
    read -r process_s _ < "$log.time"
    got[$c,dd]+=" $dd_s" got[$c,ddcpu]+=" $dd_cpu" got[$c,total]+=" $total"
    got[$c,ratio]+=" $(ratio "$total" "$dd_s")" got[$c,read]+=" $(after "$log" 'read in')"
    got[$c,sha]+=" $(after "$log" 'SHA-256')" got[$c,wait]+=" $(after "$log" 'waited for')"
    other=$(after "$log" 'after the reads') read_s=$(after "$log" 'read in')
    # An older hpctrain's line lacks it: what followed the reads is the rest of the load.
    [[ $other != - || $read_s == - ]] || other=$(calc "$total - $read_s")
    got[$c,cpu]+=" $(after "$log" 'CPU')" got[$c,other]+=" $other"
    got[$c,init]+=" $(after "$log" 'model and optimiser')" got[$c,process]+=" $process_s"
  done
done
m() { echo "${got[$1,$2]}" | median; }
printf '\n%-26s %8s %8s %7s | %6s %8s %6s %7s %6s %6s | %9s\n' "resume (medians)" "resume s" \
  "dd s" "ratio" "read s" "SHA-256" "waited" "other s" "CPU s" "dd CPU" "process s"
printf '%-26s %8s %8s %7s | %6s %8s %6s %7s %6s %6s | %9s\n' "" "" "" "" "" "CPU s" "s" "" "" "" \
  "(init s)"
for c in "${!cases[@]}"; do
  printf '%-26s %8s %8s %6sx | %6s %8s %6s %7s %6s %6s | %5s (%s)\n' "${cases[$c]%%|*}" \
    "$(fmt2 "$(m "$c" total)")" "$(fmt2 "$(m "$c" dd)")" "$(fmt2 "$(m "$c" ratio)")" \
    "$(fmt2 "$(m "$c" read)")" "$(fmt2 "$(m "$c" sha)")" "$(fmt2 "$(m "$c" wait)")" \
    "$(fmt2 "$(m "$c" other)")" "$(fmt2 "$(m "$c" cpu)")" "$(fmt2 "$(m "$c" ddcpu)")" \
    "$(fmt2 "$(m "$c" process)")" "$(fmt2 "$(m "$c" init)")"
done
echo "resume s: verified and loaded (the files read, then what follows: 'other s', e.g. an"
echo "all-gather); dd s: the faster of dd unbuffered and dd through the page cache just before it;"
echo "ratio: median of resume s / dd s, each resume against the dd read just before it; SHA-256:"
echo "CPU seconds hashing (older hpctrain: thread seconds); CPU s: the process's CPU"
echo "seconds while reading; process s: the whole run, start-up to exit (init s: model and optimiser)"
uncache "$ck2"/*.safetensors
{ time "$HPCTRAIN" export --from "$ck2" --to "$work/hf" --threads 1 >/dev/null; } 2>"$work/export.time"
printf '\nexport of the W=2 checkpoint: %.2f s (verify + load + write %d MB)\n' \
  "$(awk '{print $1}' "$work/export.time")" "$(du -m "$work/hf/model.safetensors" | cut -f1)"
load=$(cut -d' ' -f1 /proc/loadavg)
echo "load average after: $load"
