#!/usr/bin/env bash
# Resharding (issue 5): a checkpoint written by 4 ranks resumes on 2 ranks and on 1, and the next
# 4 steps' losses equal those of an uninterrupted 4-rank run to 1e-5; a checkpoint written by one
# rank resumes on 4 and on 2 ("and back"). The total batch stays 256 tokens (2 x 32 x 4 ranks):
# accumulation 1 at W=4, 2 at W=2, 4 at W=1, so every step sees the same sequences.
#   W=4 zero2 -> step 6 -> W=2 zero2, W=1 none (steps 6..9)
#   W=4 fsdp  -> step 6 -> W=2 fsdp,  W=1 ddp  (steps 6..9; when hpctrain has fsdp)
#   W=1 none writes step 8 -> W=4 zero1, W=2 ddp, W=4 fsdp (steps 8..9)
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
next_port
common=(--data "$WORK/data/corpus_train.txt" --model tiny --micro-batch 2 --seq-len 32
        --total-batch-tokens 256 --warmup-steps 3 --decay-steps 10 --max-lr 3e-3 --grad-clip 0.5
        --eval-every 0 --seed 11 --threads 1 --dist-timeout 60)

# The losses of GOT (a resumed run's metrics) against those of steps FIRST.. of the full run.
same_losses() {  # GOT FIRST WHAT
  paste <(losses "$WORK/full.jsonl" | tail -n +$(($2 + 1))) <(losses "$1") |
    awk -v what="$3" -v want=$((10 - $2)) '
      { n++; d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > worst) worst = r }
      END { printf "reshard: %s: %d steps, worst relative loss difference %.2e\n", what, n, worst;
            exit !(n == want && worst <= 1e-5) }' ||
    fail "$3: losses differ from the uninterrupted W=4 run: $(paste <(losses "$WORK/full.jsonl" | tail -n +$(($2 + 1))) <(losses "$1"))"
}

resumed_at() {  # TAG STEP WORLD_SAVED
  grep -q "resumed from .*step_0*$2 at step $2 (saved by $3 rank(s)" "$WORK/${1}_0.log" ||
    fail "$1 did not resume at step $2: $(head -n 3 "$WORK/${1}_0.log")"
}

w4=(zero2)
if "$HPCTRAIN" train --help | grep -q fsdp; then w4+=(fsdp); fi

train full zero2 4 --max-steps 10
for s in "${w4[@]}"; do
  ck="$WORK/ck_$s"
  train "save_$s" "$s" 4 --max-steps 6 --checkpoint-at-end --checkpoint-dir "$ck"
  for r in 0 1 2 3; do
    [[ -s "$ck/step_00000006/rank0000$r.safetensors" ]] || fail "$s: no file of rank $r: $(ls -R "$ck")"
  done
  grep -q '"world": 4' "$ck/step_00000006/manifest.json" || fail "$s: manifest does not say world 4"

  train "w2_$s" "$s" 2 --max-steps 10 --resume "$ck/step_00000006"
  resumed_at "w2_$s" 6 4
  grep -q "accumulation 2 world 2" "$WORK/w2_${s}_0.log" || fail "W=2 did not accumulate 2 micro-steps"
  same_losses "$WORK/w2_$s.jsonl" 6 "W=4 $s -> W=2 $s"

  one=none
  [[ $s == fsdp ]] && one=ddp
  train "w1_$s" "$one" 1 --max-steps 10 --resume "$ck/step_00000006" --checkpoint-every 8 \
    --checkpoint-dir "$WORK/back_$s"
  resumed_at "w1_$s" 6 4
  grep -q "accumulation 4 world 1" "$WORK/w1_${s}_0.log" || fail "W=1 did not accumulate 4 micro-steps"
  same_losses "$WORK/w1_$s.jsonl" 6 "W=4 $s -> W=1 $one"
done

# And back: the single rank's checkpoint of step 8 on 4 and on 2 ranks.
[[ -s "$WORK/back_zero2/step_00000008/rank00000.safetensors" &&
   ! -e "$WORK/back_zero2/step_00000008/rank00001.safetensors" ]] || fail "W=1 checkpoint: $(ls -R "$WORK/back_zero2")"
train back4 zero1 4 --max-steps 10 --resume "$WORK/back_zero2"
resumed_at back4 8 1
same_losses "$WORK/back4.jsonl" 8 "W=1 none -> W=4 zero1"
train back2 ddp 2 --max-steps 10 --resume "$WORK/back_zero2"
resumed_at back2 8 1
same_losses "$WORK/back2.jsonl" 8 "W=1 none -> W=2 ddp"
if [[ ${#w4[@]} -gt 1 ]]; then
  train back4f fsdp 4 --max-steps 10 --resume "$WORK/back_zero2"
  resumed_at back4f 8 1
  same_losses "$WORK/back4f.jsonl" 8 "W=1 none -> W=4 fsdp"
fi
