#!/usr/bin/env bash
# Sharded checkpoints of the strategies that shard the optimiser, on 2 local ranks:
#  1. zero1, zero2, fsdp: 6 steps == 3 + resume + 3, losses bit for bit, and the step-6 checkpoints
#     of both (manifest and every rank's file) byte for byte;
#  2. a truncated shard of the newest checkpoint: one warning line naming the file, the resume
#     falls back to the previous checkpoint and its losses equal the uninterrupted run's bit for
#     bit; when no checkpoint is whole, status 2 and a line saying so;
#  3. export of a zero2 checkpoint (pieces from both ranks' files) gives HF weights whose loss
#     (`hpctrain eval`) is the validation loss of a single-rank run resumed from the same checkpoint.
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
next_port
common=(--data "$WORK/data/corpus_train.txt" --val-data "$WORK/data/corpus_val.txt" --model tiny
        --micro-batch 2 --seq-len 32 --total-batch-tokens 256 --warmup-steps 3 --decay-steps 9
        --max-lr 3e-3 --eval-every 0 --seed 21 --threads 1 --dist-timeout 60)

# 1. Bit-exact resume under zero1 and zero2 (and fsdp, when hpctrain has it).
sharded=(zero1 zero2)
if "$HPCTRAIN" train --help | grep -q fsdp; then sharded+=(fsdp); fi
for s in "${sharded[@]}"; do
  train "full_$s" "$s" 2 --max-steps 9 --checkpoint-every 3 --keep-checkpoints 0 --checkpoint-dir "$WORK/full_$s"
  train "a_$s" "$s" 2 --max-steps 3 --checkpoint-every 3 --checkpoint-dir "$WORK/split_$s"
  train "b_$s" "$s" 2 --max-steps 6 --checkpoint-every 3 --checkpoint-dir "$WORK/split_$s" --resume auto
  grep -q "resumed from .*step_00000003 at step 3" "$WORK/b_${s}_0.log" || fail "$s did not resume: $(head -n 3 "$WORK/b_${s}_0.log")"
  cat "$WORK/a_$s.jsonl" "$WORK/b_$s.jsonl" >"$WORK/split_$s.jsonl"
  [[ $(losses "$WORK/split_$s.jsonl" | wc -l) -eq 6 ]] || fail "$s: $(losses "$WORK/split_$s.jsonl" | wc -l) losses, not 6"
  diff <(losses "$WORK/full_$s.jsonl" | head -n 6) <(losses "$WORK/split_$s.jsonl") >/dev/null ||
    fail "$s: 3 + resume + 3 steps changed the losses"
  for f in manifest.json rank00000.safetensors rank00001.safetensors; do
    cmp "$WORK/full_$s/step_00000006/$f" "$WORK/split_$s/step_00000006/$f" || fail "$s: step-6 $f differs after resume"
  done
  echo "checkpoint: $s W=2: 6 steps == 3 + resume + 3, step-6 checkpoints identical"
done

# 2. A truncated shard: warning, fallback to step 3, losses as the uninterrupted run's.
ck="$WORK/split_zero2"
bad="$ck/step_00000006/rank00001.safetensors"
truncate -s $(($(stat -c %s "$bad") / 2)) "$bad"
train fallback zero2 2 --max-steps 9 --checkpoint-dir "$ck" --resume auto
warnings=$(cat "$WORK"/fallback_*.log | grep -c "warning:" || true)
[[ $warnings -eq 1 ]] || fail "expected one warning line, got $warnings: $(cat "$WORK"/fallback_*.log)"
grep -h "warning:" "$WORK"/fallback_*.log | grep -q "$bad: .* bytes, the manifest says .*truncated" ||
  fail "the warning does not name the truncated file: $(grep -h warning: "$WORK"/fallback_*.log)"
grep -q "resumed from $ck/step_00000003 at step 3" "$WORK/fallback_0.log" ||
  fail "did not fall back to step 3: $(head -n 3 "$WORK/fallback_0.log")"
diff <(losses "$WORK/full_zero2.jsonl" | tail -n +4) <(losses "$WORK/fallback.jsonl") >/dev/null ||
  fail "the fallback resume's losses differ from the uninterrupted run's steps 3..8"
echo "checkpoint: truncated shard -> $(grep -h warning: "$WORK"/fallback_*.log | cut -c1-140)..."

# No whole checkpoint left (step 3: one file missing, one with a changed byte, same size):
# status 2 on every rank, the warnings, one error line.
rm "$ck/step_00000003/rank00000.safetensors"
changed="$ck/step_00000003/rank00001.safetensors"
byte=$(od -An -tu1 -j4000 -N1 "$changed" | tr -d ' ')
printf '%b' "\\x$(printf %02x $(((byte + 1) % 256)))" | dd of="$changed" bs=1 seek=4000 conv=notrunc status=none
next_port
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$HPCTRAIN" train "${common[@]}" --strategy zero2 --max-steps 9 --checkpoint-dir "$ck" \
    --resume auto >"$WORK/none_$r.out" 2>"$WORK/none_$r.err" &
  pids+=($!)
done
for r in 0 1; do
  rc=0
  wait "${pids[$r]}" || rc=$?
  [[ $rc -eq 2 ]] || fail "rank $r: status $rc with no whole checkpoint: $(cat "$WORK/none_$r.err")"
  grep -v "warning:" "$WORK/none_$r.err" | grep -q "none of the 2 checkpoint(s) is whole" ||
    fail "rank $r: $(cat "$WORK/none_$r.err")"
  [[ $(grep -vc "warning:" "$WORK/none_$r.err") -eq 1 ]] || fail "rank $r: more than one error line: $(cat "$WORK/none_$r.err")"
done
grep -qh "step_00000003/rank00000.safetensors: missing" "$WORK"/none_*.err || fail "the missing file is not named"
grep -qh "step_00000003/rank00001.safetensors: SHA-256 [0-9a-f]* does not match" "$WORK"/none_*.err ||
  fail "the changed file is not named: $(cat "$WORK"/none_*.err)"
echo "checkpoint: no whole checkpoint -> status 2: $(grep -vh warning: "$WORK/none_0.err")"

# 3. Export of the zero2 checkpoint of step 6 (written by 2 ranks, each half the parameters).
"$HPCTRAIN" export --from "$WORK/full_zero2" --to "$WORK/hf" >"$WORK/export.log" ||
  fail "export failed: $(cat "$WORK/export.log")"
grep -q "(step 9, saved by 2 rank(s))" "$WORK/export.log" || fail "export did not take the newest: $(cat "$WORK/export.log")"
"$HPCTRAIN" export --from "$WORK/full_zero2/step_00000006" --to "$WORK/hf6" >"$WORK/export6.log"
want=$("$HPCTRAIN" eval --init-from "$WORK/hf6" --data "$WORK/data/corpus_val.txt" --seq-len 32 \
         --batches 2 --threads 1 | grep -o '"loss": [^,]*' | cut -d' ' -f2)
train val6 none 1 --max-steps 7 --resume "$WORK/full_zero2/step_00000006" --eval-every 6 --val-batches 1
got=$(grep -o 'val loss [0-9.]*' "$WORK/val6_0.log" | head -n 1 | cut -d' ' -f3)
awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d / a <= 1e-5) }' ||
  fail "exported weights' loss $want, the resumed run's validation loss $got"
echo "checkpoint: export of a 2-rank zero2 checkpoint: eval loss $want == resumed validation loss $got"
