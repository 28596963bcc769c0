#!/usr/bin/python3
"""Times training steps of the PyTorch reference GPT-2 (tests/trainer/reference_gpt.py: nanoGPT's
model.py in structure, written for this repository, not copied from it: full logits +
F.cross_entropy, weight tying, AdamW with decay on 2-D tensors, clip 1.0) on the same data and
shape as hpctrain. Attention as nanoGPT's model.py chooses it: F.scaled_dot_product_attention
(is_causal) where torch has it (>= 2.0), else the explicit masked softmax.
Prints one JSON line: {"median_step_ms", "tokens_per_s", "cpu_ms", "steps", "mode", "torch",
"first_step_s"} (the medians over the steps after the first two; first_step_s includes
torch.compile's compilation).
Usage: trainer_reference_step.py TOKENS.npy L H C T B V STEPS THREADS [eager|compile]
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
mode = sys.argv[10] if len(sys.argv) > 10 else "eager"
assert mode in ("eager", "compile"), mode
torch.set_num_threads(threads)


def flash_forward(self, x):
    """CausalSelfAttention.forward as nanoGPT's model.py runs it on torch >= 2.0 (its `flash`)."""
    B_, T_, C_ = x.size()
    q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
    hs = C_ // self.n_head
    q, k, v = (t.view(B_, T_, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.c_proj(y.transpose(1, 2).contiguous().view(B_, T_, C_))


if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
    ref.CausalSelfAttention.forward = flash_forward
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
step_model = torch.compile(model) if mode == "compile" else model
tokens = np.load(path, mmap_mode="r")
wall, cpu = [], []
pos = 0
for step in range(steps):
    t0, c0 = time.perf_counter(), time.process_time()
    buf = torch.from_numpy(tokens[pos:pos + B * T + 1].astype(np.int64))
    pos += B * T
    x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
    opt.zero_grad(set_to_none=True)
    _, loss = step_model(x, y)
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
                  "cpu_ms": statistics.median(cpu_warm) * 1e3, "steps": steps, "mode": mode,
                  "torch": torch.__version__, "first_step_s": wall[0],
                  "reference": "nanoGPT model.py" if nanogpt else "tests/trainer/reference_gpt.py"}))
