"""A plain PyTorch GPT-2 (the nanoGPT shape of it) used as the reference for hpctrain's tests and
benchmarks, plus Hugging Face safetensors reading/writing without the safetensors package.

Written for Debian's python3-torch 1.13 (/usr/bin/python3): no scaled_dot_product_attention, so
attention is the explicit masked softmax, as nanoGPT's model.py does on torch < 2.0.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size):
        self.n_layer, self.n_head, self.n_embd = n_layer, n_head, n_embd
        self.block_size, self.vocab_size = block_size, vocab_size


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head, self.n_embd = c.n_head, c.n_embd
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)
        mask = torch.tril(torch.ones(c.block_size, c.block_size)).view(1, 1, c.block_size, c.block_size)
        self.register_buffer("bias", mask)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd),
            wpe=nn.Embedding(c.block_size, c.n_embd),
            h=nn.ModuleList([Block(c) for _ in range(c.n_layer)]),
            ln_f=nn.LayerNorm(c.n_embd),
        ))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # residual projections, scaled by depth
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                torch.nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    # HF GPT2Model names: the "transformer." prefix dropped, Conv1D weights as [in, out].
    def hf_state(self):
        out = {}
        for name, p in self.transformer.named_parameters():
            t = p.detach()
            if is_conv1d(name):
                t = t.t()
            out[name] = t.contiguous()
        return out

    def hf_grads(self):
        out = {}
        for name, p in self.transformer.named_parameters():
            g = p.grad.detach()
            if is_conv1d(name):
                g = g.t()
            out[name] = g.contiguous()
        return out

    def optimizer(self, lr, weight_decay=0.1):
        params = [p for p in self.parameters() if p.requires_grad]
        decay = [p for p in params if p.dim() >= 2]
        nodecay = [p for p in params if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay},
                  {"params": nodecay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def is_conv1d(name):
    parts = name.split(".")
    return (len(parts) == 5 and parts[0] == "h" and parts[-1] == "weight"
            and ".".join(parts[2:4]) in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"))


def get_lr(step, max_lr, warmup, decay_steps, min_ratio=0.1):
    min_lr = max_lr * min_ratio
    if step < warmup:
        return max_lr * (step + 1) / warmup
    if step > decay_steps:
        return min_lr
    ratio = (step - warmup) / (decay_steps - warmup) if decay_steps > warmup else 1.0
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)


_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs, offset = [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:  # numpy has no bfloat16: go through the raw 16 bits
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[8 + n + b: 8 + n + end]
        if e["dtype"] == "F32":
            t = torch.from_numpy(np.frombuffer(raw, dtype=np.float32).copy())
        elif e["dtype"] == "F16":
            t = torch.from_numpy(np.frombuffer(raw, dtype=np.float16).copy())
        elif e["dtype"] == "BF16":
            t = torch.from_numpy(np.frombuffer(raw, dtype=np.int16).copy()).view(torch.bfloat16)
        else:
            raise ValueError(e["dtype"])
        out[name] = t.view(e["shape"])
    return out


def save_hf(model, directory, dtype=torch.float32):
    os.makedirs(directory, exist_ok=True)
    state = {k: v.to(dtype) for k, v in model.hf_state().items()}
    write_safetensors(os.path.join(directory, "model.safetensors"), state, {"format": "pt"})
    c = model.config
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "n_layer": c.n_layer, "n_head": c.n_head,
                   "n_embd": c.n_embd, "n_positions": c.block_size, "vocab_size": c.vocab_size,
                   "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}, f)


def load_hf(directory):
    with open(os.path.join(directory, "config.json")) as f:
        j = json.load(f)
    model = GPT(Config(j["n_layer"], j["n_head"], j["n_embd"], j["n_positions"], j["vocab_size"]))
    state = read_safetensors(os.path.join(directory, "model.safetensors"))
    with torch.no_grad():
        for name, p in model.transformer.named_parameters():
            t = state[name].float()
            p.copy_(t.t() if is_conv1d(name) else t)
    return model
