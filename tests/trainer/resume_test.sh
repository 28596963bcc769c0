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
[[ -f "$WORK/split/step_00000005/manifest.json" && -f "$WORK/split/step_00000005/rank00000.safetensors" ]] ||
  fail "no checkpoint after step 5: $(ls -R "$WORK/split")"
"$HPCTRAIN" train "${common[@]}" --micro-batch 2 --max-steps 10 --resume auto --checkpoint-dir "$WORK/split" \
  --metrics "$WORK/split.jsonl" >"$WORK/split2.log"
grep -q "resumed from .*step_00000005 at step 5" "$WORK/split2.log" || fail "did not resume"
diff <(losses "$WORK/full.jsonl") <(losses "$WORK/split.jsonl") || fail "losses differ after resume"
for f in manifest.json rank00000.safetensors; do
  cmp "$WORK/full/step_00000010/$f" "$WORK/split/step_00000010/$f" || fail "final checkpoints differ ($f)"
done
# --keep-checkpoints 2 (the default): step 5 and step 10 remain, nothing half-written beside them.
[[ "$(ls "$WORK/split")" == "$(printf 'step_00000005\nstep_00000010')" ]] ||
  fail "checkpoint directory holds: $(ls "$WORK/split")"
# A checkpoint for another batch shape is refused with one line, before anything is written.
rc=0
"$HPCTRAIN" train "${common[@]}" --max-steps 12 --resume auto --checkpoint-dir "$WORK/split" \
  --micro-batch 2 --seq-len 16 --metrics "$WORK/refused.jsonl" 2>"$WORK/err" >/dev/null || rc=$?
[[ $rc -eq 2 && $(wc -l <"$WORK/err") -eq 1 ]] && grep -q "seq-len 32 .*this run has 16" "$WORK/err" ||
  fail "mismatched resume not refused: status $rc: $(cat "$WORK/err")"
[[ ! -e "$WORK/refused.jsonl" ]] || fail "a refused resume wrote metrics"
rc=0
"$HPCTRAIN" train "${common[@]}" --max-steps 12 --resume auto --checkpoint-dir "$WORK/split" \
  --micro-batch 2 --n-layer 3 2>"$WORK/err" >/dev/null || rc=$?
[[ $rc -eq 2 && $(wc -l <"$WORK/err") -eq 1 ]] && grep -q "checkpoint is for model L2" "$WORK/err" ||
  fail "resume with another model not refused: status $rc: $(cat "$WORK/err")"
# Only checkpoints of the earlier single-file format: said so, then a fresh start.
mkdir -p "$WORK/old" && : >"$WORK/old/ckpt_00000005.safetensors"
"$HPCTRAIN" train "${common[@]}" --micro-batch 2 --max-steps 1 --resume auto --checkpoint-dir "$WORK/old" \
  --metrics "$WORK/old.jsonl" >"$WORK/old.log" 2>"$WORK/old.err" || fail "old-format directory: $(cat "$WORK/old.err")"
grep -q "earlier single-file format" "$WORK/old.err" && ! grep -q "resumed" "$WORK/old.log" ||
  fail "old-format checkpoints not reported: $(cat "$WORK/old.err")"
echo "resume: 10 steps == 5 + resume + 5 ($(losses "$WORK/full.jsonl" | wc -l) losses, checkpoints identical)"
