#!/usr/bin/env bash
# 10 steps in one run equal 5 steps, a checkpoint, and 5 more after --resume auto: the same
# losses (bit for bit) and the same final checkpoint, byte for byte.
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
common=(--data "$WORK/data" --model tiny --seq-len 32 --total-batch-tokens 128
        --warmup-steps 3 --decay-steps 10 --max-lr 3e-3 --eval-every 4 --val-batches 2 --seed 5
        --checkpoint-at-end)
"$HPCTRAIN" train "${common[@]}" --micro-batch 2 --max-steps 10 --checkpoint-dir "$WORK/full" \
  --metrics "$WORK/full.jsonl" >"$WORK/full.log"
"$HPCTRAIN" train "${common[@]}" --micro-batch 2 --max-steps 5 --checkpoint-every 5 --checkpoint-dir "$WORK/split" \
  --metrics "$WORK/split.jsonl" >"$WORK/split1.log"
[[ -f "$WORK/split/ckpt_00000005.safetensors" ]] || fail "no checkpoint after step 5"
"$HPCTRAIN" train "${common[@]}" --micro-batch 2 --max-steps 10 --resume auto --checkpoint-dir "$WORK/split" \
  --metrics "$WORK/split.jsonl" >"$WORK/split2.log"
grep -q "resumed from .*ckpt_00000005.safetensors at step 5" "$WORK/split2.log" || fail "did not resume"
diff <(losses "$WORK/full.jsonl") <(losses "$WORK/split.jsonl") || fail "losses differ after resume"
cmp "$WORK/full/ckpt_00000010.safetensors" "$WORK/split/ckpt_00000010.safetensors" ||
  fail "final checkpoints differ"
# A checkpoint for other flags is refused with one line.
rc=0
"$HPCTRAIN" train "${common[@]}" --max-steps 12 --resume auto --checkpoint-dir "$WORK/split" \
  --micro-batch 4 2>"$WORK/err" >/dev/null || rc=$?
[[ $rc -eq 2 ]] && grep -q "micro-batch" "$WORK/err" || fail "mismatched resume not refused: $(cat "$WORK/err")"
echo "resume: 10 steps == 5 + resume + 5 ($(losses "$WORK/full.jsonl" | wc -l) losses, checkpoints identical)"
