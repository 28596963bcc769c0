#!/usr/bin/env bash
# MKL's vendor check answered by hpctrain (trainer/mkl_cpu_dispatch.cc):
#  1. the executable exports mkl_serv_intel_cpu_true (without the export the dynamic linker would
#     bind MKL's calls to MKL's own definition and nothing would change);
#  2. where hpctrain's LibTorch carries MKL (the torch wheel's libtorch_cpu), a training run's
#     dynamic linker binds libtorch_cpu's call to the executable's definition (LD_DEBUG=bindings);
#  3. with HPCTRAIN_MKL_VENDOR_CHECK=1 the definition looks up MKL's own (a second binding, from
#     hpctrain to libtorch_cpu), and both runs give the same losses within 1e-4 relative (the
#     kernels differ only in rounding).
# Debian's LibTorch 1.13 uses OpenBLAS: there only 1 applies, and the test says so.
source "$(dirname "$0")/lib.sh"
make_corpus "$WORK/data"
common=(--data "$WORK/data/corpus_train.txt" --model tiny --micro-batch 2 --seq-len 32
        --total-batch-tokens 64 --max-steps 5 --eval-every 0 --seed 3 --threads 1)

[[ $(nm -D "$HPCTRAIN") == *" T mkl_serv_intel_cpu_true"* ]] ||
  fail "$HPCTRAIN does not export mkl_serv_intel_cpu_true"
torch_cpu=$(ldd "$HPCTRAIN" | grep -o '/[^ ]*libtorch_cpu[^ ]*' | head -n1)
[[ -n $torch_cpu ]] || fail "ldd finds no libtorch_cpu for $HPCTRAIN"
if [[ $(nm -D --defined-only "$torch_cpu") != *" T mkl_serv_intel_cpu_true"* ]]; then
  echo "exported; $torch_cpu has no MKL (OpenBLAS build): nothing calls it here"
  exit 0
fi

run() {  # TAG [ENV...]: one short training run under LD_DEBUG=bindings
  local tag=$1
  shift
  env "$@" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$WORK/ld-$tag" \
    "$HPCTRAIN" train "${common[@]}" --metrics "$WORK/$tag.jsonl" >"$WORK/$tag.log" 2>&1 ||
    fail "$tag: $(cat "$WORK/$tag.log")"
}
# Lines "binding file FROM [0] to TO [0]: normal symbol `mkl_serv_intel_cpu_true'" as FROM>TO
# (base names).
bindings() {
  cat "$WORK/ld-$1".* | grep "symbol \`mkl_serv_intel_cpu_true'" |
    sed -E 's/.*binding file ([^ ]*) \[[0-9]+\] to ([^ ]*) \[[0-9]+\].*/\1>\2/' |
    while IFS='>' read -r from to; do echo "$(basename "$from")>$(basename "$to")"; done | sort -u
}

run features
got=$(bindings features)
echo "default: $got"
[[ $got == "libtorch_cpu.so>hpctrain" ]] ||
  fail "MKL's vendor check is not bound to hpctrain's definition: '${got}'"

run vendor HPCTRAIN_MKL_VENDOR_CHECK=1
got=$(bindings vendor | tr '\n' ' ')
echo "HPCTRAIN_MKL_VENDOR_CHECK=1: $got"
[[ $got == "hpctrain>libtorch_cpu.so libtorch_cpu.so>hpctrain " ]] ||
  fail "HPCTRAIN_MKL_VENDOR_CHECK=1 does not ask MKL's own definition: '${got}'"

paste <(losses "$WORK/features.jsonl") <(losses "$WORK/vendor.jsonl") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > worst) worst = r }
  END { printf "%d steps, worst relative loss difference %.2e\n", n, worst
        exit !(n == 5 && worst <= 1e-4) }' ||
  fail "the two kernel choices give different losses"
