#!/usr/bin/env bash
# tps_program.sh COUNTER_DIR [SCALE]: a user's program for the sweep tests. Rank 0 prints
# "tps N" with N = 100 x world size x SCALE, except the third run at world size 2, which prints
# 1.5 times that (repeats that disagree). COUNTER_DIR counts the runs per world size.
set -euo pipefail
[[ "${RANK:-0}" == 0 ]] || exit 0
counter="$1/w${WORLD_SIZE}"
n=$(($(cat "$counter" 2>/dev/null || echo 0) + 1))
echo "$n" >"$counter"
factor=1
if [[ "$WORLD_SIZE" == 2 && $n == 3 ]]; then factor=1.5; fi
awk -v w="$WORLD_SIZE" -v f="$factor" -v s="${2:-1}" 'BEGIN { printf "tps %.1f\n", 100 * w * f * s }'
