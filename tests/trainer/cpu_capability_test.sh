#!/usr/bin/env bash
# The trainer's numeric unit tests under one of the kernel paths LibTorch picks on x86:
# ATEN_CPU_CAPABILITY=default (no vector instructions), avx2 or avx512. LibTorch takes the
# variable as given (avx512 on a CPU without it would die on an illegal instruction), so a path
# this CPU lacks is reported as skipped (exit 77), naming the missing flags.
# Usage: cpu_capability_test.sh CAPABILITY TRAINER_TORCH_TESTS [catch2 arguments]
set -euo pipefail
cap=$1 tests=$2
shift 2
case $cap in
  default) need=() ;;
  avx2) need=(avx2 fma) ;;                          # ATen's AVX2 kernels: AVX2 and FMA3
  avx512) need=(avx512f avx512vl avx512bw avx512dq fma) ;; # and its AVX-512 ones
  *) echo "cpu_capability_test: unknown capability '$cap' (default, avx2 or avx512)" >&2; exit 2 ;;
esac
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
missing=()
for f in "${need[@]}"; do [[ $flags == *" $f "* ]] || missing+=("$f"); done
if ((${#missing[@]})); then
  echo "skip: this CPU lacks ${missing[*]}: LibTorch's $cap kernels cannot run here"
  exit 77
fi
echo "ATEN_CPU_CAPABILITY=$cap"
ATEN_CPU_CAPABILITY=$cap exec "$tests" "$@"
