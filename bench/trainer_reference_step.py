#!/usr/bin/python3
"""Times training steps of the PyTorch reference GPT-2 (tests/trainer/reference_gpt.py: nanoGPT's
model.py in structure: explicit masked attention on torch 1.13, full logits + F.cross_entropy,
AdamW with decay on 2-D tensors, clip 1.0) on the same data and shape as hpctrain.
Prints one JSON line: {"median_step_ms", "tokens_per_s", "cpu_ms", "steps"}.
Usage: trainer_reference_step.py TOKENS.npy L H C T B V STEPS THREADS
"""
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "trainer"))
import reference_gpt as ref  # noqa: E402

path = sys.argv[1]
L, H, C, T, B, V, steps, threads = map(int, sys.argv[2:10])
torch.set_num_threads(threads)
torch.manual_seed(1337)
model = ref.GPT(ref.Config(L, H, C, T, V))
opt = model.optimizer(6e-4)
tokens = np.load(path, mmap_mode="r")
wall, cpu = [], []
pos = 0
for step in range(steps):
    t0, c0 = time.perf_counter(), time.process_time()
    buf = torch.from_numpy(tokens[pos:pos + B * T + 1].astype(np.int64))
    pos += B * T
    x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
    opt.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    loss.item()
    wall.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
warm = wall[2:] or wall
cpu_warm = cpu[2:] or cpu
ms = statistics.median(warm) * 1e3
print(json.dumps({"median_step_ms": ms, "tokens_per_s": B * T / (ms / 1e3),
                  "cpu_ms": statistics.median(cpu_warm) * 1e3, "steps": steps}))
