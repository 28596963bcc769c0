#!/usr/bin/env bash
# A run is deterministic for a seed: the same seed gives the same losses, bit for bit; another
# seed gives others. The loss falls on a text the tiny model can learn.
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
run() {  # SEED METRICS
  "$HPCTRAIN" train --data "$WORK/data" --model tiny --micro-batch 4 --seq-len 32 \
    --total-batch-tokens 256 --max-steps 12 --warmup-steps 3 --max-lr 3e-3 --eval-every 6 \
    --val-batches 2 --seed "$1" --metrics "$2" >"$2.log"
}
run 1 "$WORK/a.jsonl"
run 1 "$WORK/b.jsonl"
run 2 "$WORK/c.jsonl"
[[ $(losses "$WORK/a.jsonl" | wc -l) -eq 12 ]] || fail "expected 12 step lines"
diff <(losses "$WORK/a.jsonl") <(losses "$WORK/b.jsonl") >/dev/null || fail "same seed, different losses"
diff <(losses "$WORK/a.jsonl") <(losses "$WORK/c.jsonl") >/dev/null && fail "different seeds, same losses"
first=$(losses "$WORK/a.jsonl" | head -n1)
last=$(losses "$WORK/a.jsonl" | tail -n1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }' || fail "loss did not fall: $first -> $last"
grep -q '"val_loss"' "$WORK/a.jsonl" || fail "no validation loss in the metrics"
for key in step loss lr grad_norm step_ms tokens_per_s mfu memory; do
  grep -q "\"$key\":" "$WORK/a.jsonl" || fail "metrics lack $key"
done
grep -q '^step     0 | loss' "$WORK/a.jsonl.log" || fail "no step log line"
echo "determinism: losses $first -> $last, identical for the same seed"
