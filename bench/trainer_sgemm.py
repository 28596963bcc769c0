#!/usr/bin/python3
"""This machine's single-precision matrix-product rate through the BLAS LibTorch uses (Debian's
libtorch and python3-torch load the same libblas.so.3): best of 5 products of 2048 x 2048
matrices. Prints {"sgemm_gflops": ..., "threads": ...}. Usage: trainer_sgemm.py THREADS"""
import json
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.set_num_threads(threads)
a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
torch.mm(a, b)
best = min(
    (lambda t0: (torch.mm(a, b), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(5))
print(json.dumps({"sgemm_gflops": 2 * 2048 ** 3 / best / 1e9, "threads": threads}))
