#!/usr/bin/python3
"""This machine's single-precision matrix-product rate through the LibTorch of the python that
runs it (Debian's python3-torch loads the same libblas.so.3 as Debian's libtorch; the wheel its
own BLAS): best of 5 products of 2048 x 2048 matrices, timed by the wall clock and by this
process's CPU time (with one thread the CPU time is the product's own, robust to load from other
processes). Prints {"sgemm_gflops", "sgemm_gflops_cpu_time", "threads", "torch"}.
Usage: trainer_sgemm.py THREADS"""
import json
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.set_num_threads(threads)
a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
torch.mm(a, b)
wall, cpu = [], []
for _ in range(5):
    t0, c0 = time.perf_counter(), time.process_time()
    torch.mm(a, b)
    wall.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
flops = 2 * 2048 ** 3
print(json.dumps({"sgemm_gflops": flops / min(wall) / 1e9,
                  "sgemm_gflops_cpu_time": flops / min(cpu) / 1e9, "threads": threads,
                  "torch": torch.__version__}))
