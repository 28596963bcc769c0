#!/usr/bin/env bash
# Bad input gets one clear line on stderr and exit status 2, before any training.
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
TXT="$WORK/data/corpus_train.txt"
ok=0

expect_usage_error() {  # NAME EXPECTED-SUBSTRING -- hpctrain args...
  local name=$1 want=$2
  shift 3
  local rc=0
  env -u RANK -u WORLD_SIZE -u SLURM_PROCID -u SLURM_NTASKS "$HPCTRAIN" "$@" \
    >"$WORK/out" 2>"$WORK/err" || rc=$?
  [[ $rc -eq 2 ]] || fail "$name: exit status $rc, want 2 (stderr: $(cat "$WORK/err"))"
  [[ $(wc -l <"$WORK/err") -eq 1 ]] || fail "$name: stderr is not one line: $(cat "$WORK/err")"
  grep -qF -- "$want" "$WORK/err" || fail "$name: stderr lacks '$want': $(cat "$WORK/err")"
  [[ ! -s "$WORK/out" ]] || fail "$name: printed to stdout: $(cat "$WORK/out")"
  ok=$((ok + 1))
}

TINY=(--model tiny --micro-batch 2 --seq-len 16 --total-batch-tokens 32 --max-steps 1)

expect_usage_error "missing data" "no such file" -- train --data "$WORK/nope.npy" "${TINY[@]}"
printf 'XNUMPY\x01\x00\x10\x00{}              ' >"$WORK/bad.npy"
expect_usage_error "wrong .npy magic" "bad magic" -- train --data "$WORK/bad.npy" "${TINY[@]}"
head -c 4096 /dev/zero >"$WORK/bad.bin"
printf '\x01\x02\x03\x04' | dd of="$WORK/bad.bin" conv=notrunc status=none
expect_usage_error "wrong llm.c magic" "bad magic" -- train --data "$WORK/bad.bin" --data-format llmc "${TINY[@]}"
printf 'abc' >"$WORK/odd.bin"
expect_usage_error "odd size" "odd size" -- train --data "$WORK/odd.bin" "${TINY[@]}"
# 200 tokens of id 50000 (0xC350, little-endian) for a 256-token vocabulary.
for _ in $(seq 200); do printf '\x50\xc3'; done >"$WORK/big.bin"
expect_usage_error "vocabulary too small" "--vocab-size 50001" -- train --data "$WORK/big.bin" "${TINY[@]}"
expect_usage_error "heads do not divide" "not divisible by --n-head" -- \
  train --data "$TXT" "${TINY[@]}" --n-embd 65 --n-head 2
expect_usage_error "batch does not divide" "--total-batch-tokens" -- \
  train --data "$TXT" --model tiny --micro-batch 2 --seq-len 16 --total-batch-tokens 100 --max-steps 1
expect_usage_error "sequence longer than block" "--seq-len" -- \
  train --data "$TXT" --model tiny --micro-batch 2 --seq-len 65 --total-batch-tokens 130 --max-steps 1
expect_usage_error "unknown model" "unknown model 'gpt5'" -- train --data "$TXT" "${TINY[@]}" --model gpt5
expect_usage_error "unknown precision" "unknown precision 'fp16'" -- \
  train --data "$TXT" "${TINY[@]}" --precision fp16
expect_usage_error "missing rendezvous variables" "RANK/WORLD_SIZE" -- \
  train --data "$TXT" "${TINY[@]}" --strategy ddp
expect_usage_error "unknown strategy" "unknown strategy 'zero3'" -- \
  train --data "$TXT" "${TINY[@]}" --strategy zero3
expect_usage_error "zero2 without ranks" "RANK/WORLD_SIZE" -- train --data "$TXT" "${TINY[@]}" --strategy zero2
expect_usage_error "unknown flag" "--bogus" -- train --data "$TXT" "${TINY[@]}" --bogus 1
expect_usage_error "eval without weights" "config.json" -- eval --init-from "$WORK" --data "$TXT"
expect_usage_error "unknown data format" "--data-format" -- train --data "$TXT" "${TINY[@]}" --data-format csv

echo "cli_errors: $ok cases passed"
