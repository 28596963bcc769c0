# Shared by the trainer's shell tests: a scratch directory, a small text corpus, assertions.
set -euo pipefail
HPCTRAIN=${1:?usage: $0 PATH/TO/hpctrain}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpctrain-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1

fail() { echo "FAIL: $*" >&2; exit 1; }

# A deterministic corpus of ~40 KB of text: the byte tokenizer turns it into tokens < 256.
make_corpus() {  # DIR
  mkdir -p "$1"
  local i
  for i in $(seq 1 400); do
    echo "line $i: the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs."
  done > "$1/corpus_train.txt"
  for i in $(seq 1 50); do
    echo "validation $i: sphinx of black quartz, judge my vow."
  done > "$1/corpus_val.txt"
}

# The "loss" values of a metrics file, one per line, as written (17 significant digits).
losses() { grep -o '"loss":[^,]*' "$1" | cut -d: -f2; }
