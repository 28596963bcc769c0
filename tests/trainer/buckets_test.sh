#!/usr/bin/env bash
# DDP, ZeRO-1 and ZeRO-2 with many gradient buckets (Gloo, processes on this machine). The other
# strategy tests use the default buckets (first 1 MiB, then 25 MiB), which hold the whole tiny
# model in one bucket; here --bucket-cap-mb 0.02 --first-bucket-mb 0.01 cut it into more than 4,
# so each bucket's offsets, the all-reduces that overlap the rest of backward, and ZeRO-2's
# shard taken out of each bucket (the shard boundaries fall inside buckets) are exercised:
#  1. the bucket count: rank 0's log says 1 bucket with the defaults and >= 4 here;
#  2. the first step's reduced gradients (--dump-grads) of ddp and zero1 with many buckets equal
#     the single process's gradients to 1e-5 (relative to the largest), parameter by parameter;
#  3. 20 steps, clipping active: ddp at W=2 with many buckets gives exactly (bit for bit) the
#     losses and gradient norms of ddp with one bucket (with two ranks each element's sum is a + b
#     wherever the bucket boundaries fall); zero1 and zero2 at W=2 give them to 1e-5 (relative;
#     the norm is summed over shards in another order); and ddp, zero1 and zero2 at W=2 and zero2
#     at W=4 give the single process's losses to 1e-5 and gradient norms to 1e-4 (relative: sums
#     in another order drift over 20 steps; one-bucket ddp itself is 1.1e-5 off in the norm).
# n_embd 66 and block size 63 make sizes that are not multiples of 4 (as in zero_test.sh).
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
common=(--data "$WORK/data/corpus_train.txt" --model tiny --n-embd 66 --block-size 63
        --micro-batch 2 --seq-len 32 --total-batch-tokens 512 --max-steps 20 --warmup-steps 3
        --max-lr 3e-3 --grad-clip 0.5 --eval-every 0 --seed 3 --threads 1 --dist-timeout 60)
many=(--bucket-cap-mb 0.02 --first-bucket-mb 0.01)

# TAG: the number of gradient buckets rank 0 reported.
buckets() {
  sed -n 's/^[a-z0-9]*: \([0-9]*\) gradient buckets\{0,1\} of .*/\1/p' "$WORK/${1}_0.log"
}

# The reference: one process, accumulation 8.
train one none 1 --dump-grads "$WORK/one.safetensors"

# The default buckets hold the whole tiny model: the case the other tests cover.
train ddp_default ddp 2
[[ $(buckets ddp_default) == 1 ]] ||
  fail "expected one bucket with the defaults: $(grep buckets "$WORK/ddp_default_0.log")"

# The worst relative difference of field FIELD between the metrics of runs REF and TAG (as
# written, 17 digits); exits non-zero above LIMIT or unless both have 20 steps.
compare() {  # REF TAG FIELD LIMIT
  paste <(field "$WORK/$1.jsonl" "$3") <(field "$WORK/$2.jsonl" "$3") | awk -v what="$2 vs $1" \
    -v f="$3" -v limit="$4" '
    { n++; d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > worst) worst = r }
    END { printf "%s: %s, %d steps, worst relative difference %.2e\n", what, f, n, worst;
          exit !(n == 20 && worst <= limit) }' || fail "$2: ${3}s differ from ${1}'s"
}

# Two .safetensors of fp32 gradients: every tensor of the first in the second, the same shape,
# and the largest difference within LIMIT of the tensor's largest value.
same_gradients() {  # WHAT A B LIMIT
  python3 - "$@" <<'EOF'
import json, struct, sys
what, a_path, b_path, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        lo, hi = t["data_offsets"]
        out[name] = (t["shape"], struct.unpack("<%df" % ((hi - lo) // 4), raw[8 + n + lo:8 + n + hi]))
    return out
a, b = tensors(a_path), tensors(b_path)
assert a.keys() == b.keys() and len(a) > 0, (what, sorted(a), sorted(b))
worst, where = 0.0, ""
for name, (shape, x) in a.items():
    assert b[name][0] == shape, (what, name, shape, b[name][0])
    y = b[name][1]
    scale = max(max(abs(v) for v in x), 1e-12)
    r = max(abs(u - v) for u, v in zip(x, y)) / scale
    if r > worst:
        worst, where = r, name
print("%s: %d gradients, worst relative difference %.2e (%s)" % (what, len(a), worst, where))
sys.exit(0 if worst <= limit else 1)
EOF
}

for run in ddp:2 zero1:2 zero2:2 zero2:4; do
  strategy=${run%:*} world=${run#*:} tag=${run/:/_}
  dump=()
  [[ $strategy == zero2 ]] || dump=(--dump-grads "$WORK/$tag.safetensors")
  train "$tag" "$strategy" "$world" "${many[@]}" "${dump[@]}"
  grep -q "world $world ($strategy)" "$WORK/${tag}_0.log" ||
    fail "rank 0 did not run $strategy: $(head -n1 "$WORK/${tag}_0.log")"
  n=$(buckets "$tag")
  [[ -n $n && $n -ge 4 ]] || fail "$tag: expected >= 4 buckets: $(grep buckets "$WORK/${tag}_0.log")"
  echo "$tag: $n gradient buckets"
  if [[ ${#dump[@]} -gt 0 ]]; then
    same_gradients "$tag vs one process" "$WORK/one.safetensors" "$WORK/$tag.safetensors" 1e-5 ||
      fail "$tag: the reduced gradients differ from the single process's"
  fi
  compare one "$tag" loss 1e-5
  compare one "$tag" grad_norm 1e-4
  if [[ $world == 2 ]]; then
    limit=1e-5
    [[ $strategy == ddp ]] && limit=0
    compare ddp_default "$tag" loss $limit
    compare ddp_default "$tag" grad_norm $limit
  fi
done
clipped=$(field "$WORK/one.jsonl" grad_norm | awk '$1 > 0.5 { n++ } END { print n + 0 }')
[[ $clipped -ge 10 ]] || fail "clipping was active in only $clipped of 20 steps"
