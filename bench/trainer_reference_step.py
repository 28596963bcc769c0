#!/usr/bin/python3
"""Times training steps of the PyTorch reference GPT-2 (tests/trainer/reference_gpt.py: nanoGPT's
model.py in structure: explicit masked attention on torch 1.13, full logits + F.cross_entropy,
AdamW with decay on 2-D tensors, clip 1.0) on the same data and shape as hpctrain.
Prints one JSON line: {"median_step_ms", "tokens_per_s", "cpu_ms", "steps"}.
Usage: trainer_reference_step.py TOKENS.npy L H C T B V STEPS THREADS
With NANOGPT_MODEL=/path/to/nanoGPT/model.py, times nanoGPT's own model.py instead (fetch
karpathy/nanoGPT yourself; it is not part of this repository): GPTConfig with dropout 0 and
biases, configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu").
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
nanogpt = os.environ.get("NANOGPT_MODEL")
if nanogpt:
    import importlib.util
    import contextlib
    import io
    spec = importlib.util.spec_from_file_location("nanogpt_model", nanogpt)
    nano = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nano)
    with contextlib.redirect_stdout(io.StringIO()):  # it prints parameter counts
        model = nano.GPT(nano.GPTConfig(block_size=T, vocab_size=V, n_layer=L, n_head=H, n_embd=C,
                                        dropout=0.0, bias=True))
        opt = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu")
else:
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
                  "cpu_ms": statistics.median(cpu_warm) * 1e3, "steps": steps,
                  "reference": "nanoGPT model.py" if nanogpt else "tests/trainer/reference_gpt.py"}))
