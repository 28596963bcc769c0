#!/usr/bin/env bash
# record_test.sh HPCLAUNCH HPCTRAIN: a run's whole record, `hpclaunch rerun` and `hpclaunch diff`
# on the real test cluster (the slurm_cluster fixture sets SLURM_CONF), with the real hpctrain
# (tiny GPT on CPU, Gloo, 2 nodes x 1 rank), submitted from a git work tree (docs/records.md):
#   1. run A: run.json records the program's git revision; the batch script wrote
#      record/restart-0.json (nodes node[01-02], Slurm's version, hpctrain's LibTorch line)
#   2. rerun A -> B: the same spec hash, rerun_of names A, the same final loss; diff A B says
#      spec, program, versions and nodes are the same
#   3. an uncommitted change: rerun refuses (exit 2, one line naming the change and --force),
#      nothing is submitted; --force with a --set submits C, with a one-line warning, and
#      diff A C names the spec key and the uncommitted changes; --json too
#   4. a program of one's own (launch srun): the record has python3's version; rerun runs it
#   5. bad input: diff of a run that does not exist, rerun of a bad --set: exit 2, one line
set -euo pipefail
hpclaunch=$1 hpctrain=$2
: "${SLURM_CONF:?run me through ctest (the slurm_cluster fixture sets SLURM_CONF)}"
work=$(mktemp -d "${TMPDIR:-/tmp}/record-test.XXXXXX")
name="record-$$"
cleanup() {
  local ids
  mapfile -t ids < <(squeue --noheader --name "$name" --format %i 2>/dev/null || true)
  ((${#ids[@]} == 0)) || scancel "${ids[@]}" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.err "$work"/*.out; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
  exit 1
}
# job_field, wait_state, submitted_id
# shellcheck source-path=SCRIPTDIR source=job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
# One line on stderr: exactly one newline, at its end.
one_line() { [[ $(wc -l <"$1") -eq 1 ]] || fail "$1 is not one line: $(cat "$1")"; }
json_get() { python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    d = d[int(k)] if isinstance(d, list) else d[k]
print(d)' "$@"; }

proj="$work/proj"
mkdir -p "$proj"
cd "$proj"
export XDG_CONFIG_HOME="$work/xdg" HPCLAUNCH_PATH="" GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1
git init -q .
for i in $(seq 1 400); do
  echo "line $i: the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs."
done >corpus.txt
printf 'runs/\n' >.gitignore
git add corpus.txt .gitignore
git -c user.name=t -c user.email=t@example.org commit -q -m corpus
revision=$(git rev-parse HEAD)

"$hpclaunch" run --no-project --preset 2n2g --strategy ddp \
  --set shape.gpus_per_node=1 --set shape.cpus_per_gpu=1 --set "job.name=$name" \
  --set "trainer.program=$hpctrain" -- \
  --data corpus.txt --data-format text --model tiny --micro-batch 4 --seq-len 64 \
  --total-batch-tokens 512 --warmup-steps 3 --decay-steps 600 --max-lr 3e-3 --eval-every 0 \
  --seed 9 --threads 1 --log-every 10 --max-steps 30 2>"$work/a.err" >"$work/a.out" ||
  fail "run A exited $?"
a=$(submitted_id "$work/a.err")
run_a="runs/$name-$a"
[[ $(json_get "$run_a/run.json" program revision) == "$revision" ]] || fail "run.json: no program revision"
[[ $(json_get "$run_a/run.json" program dirty) == False ]] || fail "run.json: the tree is not dirty"
[[ ! -e $run_a/program.diff ]] || fail "program.diff written for a clean tree"
record="$run_a/record/restart-0.json"
[[ -f $record ]] || fail "no $record"
python3 -m json.tool "$record" >/dev/null || fail "$record is not JSON"
[[ $(json_get "$record" restart) == 0 ]] || fail "$record: restart"
[[ $(json_get "$record" nodelist) == "node[01-02]" ]] || fail "$record: nodelist $(json_get "$record" nodelist)"
[[ $(json_get "$record" versions slurm) == slurm*" "[0-9]* ]] || fail "$record: no Slurm version"
[[ $(json_get "$record" versions program) == *$'\n'"LibTorch "* ]] || fail "$record: no LibTorch line"

# 2. rerun: the same spec, the same figures
"$hpclaunch" rerun "$a" 2>"$work/b.err" >"$work/b.out" || fail "rerun exited $?"
b=$(submitted_id "$work/b.err")
[[ -n $b && $b != "$a" ]] || fail "rerun submitted no new job"
run_b="runs/$name-$b"
grep -q "rerun of .*$name-$a (job $a): the same spec" "$work/b.err" || fail "rerun did not say it is the same spec"
[[ $(json_get "$run_b/run.json" spec_hash) == $(json_get "$run_a/run.json" spec_hash) ]] || fail "spec hashes differ"
[[ $(json_get "$run_b/run.json" rerun_of) == *"/$name-$a" ]] || fail "run.json: rerun_of"
[[ -f $run_b/record/restart-0.json ]] || fail "rerun: no record"
"$hpclaunch" diff "$a" "$b" >"$work/diff-ab.out" 2>"$work/diff-ab.err" || fail "diff exited $?"
grep -q "same spec, program, versions and nodes\|the runs are identical" "$work/diff-ab.out" ||
  fail "diff A B: $(cat "$work/diff-ab.out")"
! grep -q "final loss" "$work/diff-ab.out" || fail "the rerun's final loss differs: $(cat "$work/diff-ab.out")"

# 3. the code changed: refused, nothing submitted; --force runs it
echo "x = 1" >changed.py
runs_before=$(find runs -mindepth 1 -maxdepth 1 | wc -l)
rc=0
"$hpclaunch" rerun "$a" 2>"$work/refused.err" >"$work/refused.out" || rc=$?
[[ $rc -eq 2 ]] || fail "rerun of changed code exited $rc, not 2"
one_line "$work/refused.err"
grep -q "the code changed since the run: the uncommitted changes differ.*--force" "$work/refused.err" ||
  fail "refusal: $(cat "$work/refused.err")"
[[ $(find runs -mindepth 1 -maxdepth 1 | wc -l) -eq $runs_before ]] || fail "the refused rerun left a run directory"
"$hpclaunch" rerun "$a" --force --no-follow --set shape.time=00:20:00 2>"$work/c.err" >"$work/c.out" ||
  fail "rerun --force exited $?"
grep -q "^hpclaunch: warning: .*uncommitted changes differ.*--force" "$work/c.err" || fail "no warning: $(cat "$work/c.err")"
c=$(head -n 1 "$work/c.out")
wait_state "$c" 120 COMPLETED >/dev/null || fail "job C $(job_field "$c" JobState)"
"$hpclaunch" diff "$a" "$c" >"$work/diff-ac.out" || fail "diff A C exited $?"
grep -q "^  shape.time .* 00:20:00$" "$work/diff-ac.out" || fail "diff A C: $(cat "$work/diff-ac.out")"
grep -q "uncommitted changes .*none .*sha256" "$work/diff-ac.out" || fail "diff A C: program: $(cat "$work/diff-ac.out")"
"$hpclaunch" diff "$a" "$c" --json >"$work/diff-ac.json" || fail "diff --json exited $?"
[[ $(json_get "$work/diff-ac.json" identical) == False ]] || fail "diff --json: identical"
python3 - "$work/diff-ac.json" <<'PY' || fail "diff --json has no shape.time row"
import json, sys
rows = json.load(open(sys.argv[1]))["differences"]
assert any(r["section"] == "spec" and r["key"] == "shape.time" and r["b"] == "00:20:00" for r in rows)
PY

# 4. a program of one's own (launch srun, a bash line): the same record, with python3's version
# shellcheck disable=SC2016 # $RANK is the task's, expanded by the program's bash
"$hpclaunch" run --no-project --preset 2n2g --launch srun --set shape.gpus_per_node=1 \
  --set shape.cpus_per_gpu=1 --set "job.name=$name" -- bash -c 'echo "rank $RANK"' \
  2>"$work/d.err" >"$work/d.out" || fail "launch srun exited $?"
d=$(submitted_id "$work/d.err")
record="runs/$name-$d/record/restart-0.json"
[[ $(json_get "$record" nodelist) == "node[01-02]" ]] || fail "$record: nodelist"
[[ $(json_get "$record" versions python) == 3.* ]] || fail "$record: no python version"
"$hpclaunch" rerun "$d" --force >"$work/e.out" 2>"$work/e.err" || fail "rerun of launch srun exited $?"
grep -q "^1: rank 1$" "$work/e.out" || fail "the rerun did not run the program: $(cat "$work/e.out")"

# 5. bad input: one line, exit 2
for args in "diff $a 999999" "rerun 999999" "rerun $a --force --set shape.nodes=banana"; do
  rc=0
  # shellcheck disable=SC2086 # the words of one case
  "$hpclaunch" $args >"$work/bad.out" 2>"$work/bad.err" || rc=$?
  [[ $rc -eq 2 ]] || fail "hpclaunch $args exited $rc, not 2: $(cat "$work/bad.err")"
  one_line "$work/bad.err"
done
echo "record: run $a (revision ${revision:0:12}, nodes node[01-02]), rerun $b (same spec and loss), changed code refused, --force run $c differs in shape.time and program"
