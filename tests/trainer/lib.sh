# Shared by the trainer's shell tests: a scratch directory, a small text corpus, assertions.
set -euo pipefail
HPCTRAIN=${1:?usage: $0 PATH/TO/hpctrain}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpctrain-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1

fail() { echo "FAIL: $*" >&2; exit 1; }

# Sets $port to a MASTER_PORT for the next group of ranks: a random port in 6000-9999 that nothing
# listens on now. The range is nobody else's while the tests run in parallel: the test clusters
# use 10000-19999, jobs' MASTER_PORT (Slurm and local) 20000-32767, and 32768 up is the kernel's
# ephemeral range (every Gloo connection's local port).
next_port() {
  local _
  for _ in $(seq 100); do
    port=$((6000 + RANDOM % 4000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || return 0
  done
  fail "no free port in 6000-9999"
}

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

# TAG STRATEGY WORLD [ARGS]: WORLD local ranks of `hpctrain train "${common[@]}" --strategy
# STRATEGY ARGS` on a port of their own (next_port); metrics in $WORK/TAG.jsonl, logs in
# $WORK/TAG_RANK.log.
train() {
  local tag=$1 strategy=$2 world=$3 pids=() r
  shift 3
  next_port
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$HPCTRAIN" train "${common[@]}" --strategy "$strategy" --metrics "$WORK/$tag.jsonl" "$@" \
      >"$WORK/${tag}_$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do
    wait "$r" || fail "$tag ($strategy, W=$world) failed: $(cat "$WORK/$tag"_*.log)"
  done
}

# STRATEGY WORLD: train STRATEGY_WORLD STRATEGY WORLD, and rank 0 said it ran that strategy.
run_strategy() {
  local strategy=$1 world=$2
  train "${strategy}_$world" "$strategy" "$world"
  grep -q "world $world ($strategy)" "$WORK/${strategy}_${world}_0.log" ||
    fail "rank 0 did not run $strategy: $(head -n1 "$WORK/${strategy}_${world}_0.log")"
}

# FILE NAME: the values of a numeric field of a metrics file, one per line.
field() { grep -o "\"$2\":[^,}]*" "$1" | cut -d: -f2; }

# WHAT ARGS...: two local ranks of `hpctrain train "${common[@]}" ARGS` (a long run, --dist-timeout
# 10) on a port of their own; rank 1 is killed at step 3 and rank 0 must then exit non-zero within 60 s
# instead of hanging, with an error that names rank 1. Rank 0's log stays in $WORK/d0.log.
dead_peer_check() {
  local what=$1 pid0 pid1 start rc=0
  shift
  next_port
  local long=("${common[@]}" "$@" --max-steps 100000 --dist-timeout 10)
  RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$HPCTRAIN" train "${long[@]}" >"$WORK/d0.log" 2>&1 &
  pid0=$!
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$HPCTRAIN" train "${long[@]}" >"$WORK/d1.log" 2>&1 &
  pid1=$!
  for _ in $(seq 150); do grep -q "^step     3 " "$WORK/d0.log" && break; sleep 0.2; done
  kill -9 "$pid1"
  wait "$pid1" 2>/dev/null || true
  start=$SECONDS
  timeout 60 tail --pid="$pid0" -f /dev/null || { kill -9 "$pid0"; fail "$what: rank 0 hung after its peer died"; }
  wait "$pid0" || rc=$?
  [[ $rc -ne 0 ]] || fail "$what: rank 0 exited 0 after its peer died"
  grep -q "rank 1 did not answer within 5 s" "$WORK/d0.log" ||
    fail "$what: rank 0's error does not name the lost rank: $(tail -n1 "$WORK/d0.log")"
  echo "dead peer: $what rank 0 exited with status $rc after $((SECONDS - start)) s: $(tail -n1 "$WORK/d0.log")"
}
