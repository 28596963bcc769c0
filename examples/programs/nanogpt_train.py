#!/usr/bin/env python3
"""A tiny character-level GPT trained with DDP: nanoGPT's train.py in miniature.

Launch it as you would nanoGPT's, one process per GPU, under torchrun or srun; here through
hpclaunch (docs/program-examples.md):

    hpclaunch run --preset 2n2g --launch torchrun -- examples/programs/nanogpt_train.py --steps 30
    hpclaunch run --preset 2n2g --launch srun -- python examples/programs/nanogpt_train.py

Every process reads RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun and
hpclaunch's srun launch both set them). Rank 0 prints one line per step, which `hpclaunch run`
streams as it comes:

    step 7 | loss 2.8812 | 1830 tokens/s | 4 ranks

tokens/s counts the tokens of all ranks in that step, so `hpclaunch sweep` can read it with
`--metric-regex '\| ([0-9.]+) tokens/s'` (docs/sweeps.md). On CPU (no GPU, or the test
cluster's fake ones) it uses Gloo; with CUDA it uses NCCL and one GPU per process.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

# The training text: a few sentences repeated. Small enough to live here, varied enough that the
# loss has somewhere to go (from ln(vocab) ~ 3.3 towards the repeats' entropy).
TEXT = (
    "One process per GPU; world size is nodes times GPUs per node. The first host of the job's "
    "node list is the master address, and every rank dials it on the same port. Rank zero alone "
    "prints and saves. A job that is preempted writes a checkpoint, is requeued and resumes "
    "where it stopped. "
) * 40


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):  # x: (B, T, C)
        T = x.size(1)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, block, n_layer=2, n_head=2, n_embd=48):
        super().__init__()
        self.tok = nn.Embedding(vocab, n_embd)
        self.pos = nn.Embedding(block, n_embd)
        self.blocks = nn.Sequential(*[Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as in GPT-2
        for emb in (self.tok, self.pos):  # GPT-2's std 0.02: the first logits are near uniform
            nn.init.normal_(emb.weight, std=0.02)

    def forward(self, idx, targets):  # idx, targets: (B, T) token ids
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(pos))  # (B, T, C)
        logits = self.head(self.ln_f(x))  # (B, T, vocab)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank and step")
    ap.add_argument("--block", type=int, default=32, help="characters per sequence")
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()

    cuda = torch.cuda.is_available() and os.environ.get("HPC_FORCE_CPU") != "1"
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else "cpu"

    chars = sorted(set(TEXT))
    data = torch.tensor([chars.index(c) for c in TEXT], dtype=torch.long)
    torch.manual_seed(1337)  # the same initial weights on every rank (DDP also broadcasts them)
    model = TinyGPT(len(chars), args.block).to(device)
    model = DDP(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank draws its own batches

    if rank == 0:
        print(f"training a {sum(p.numel() for p in model.parameters())}-parameter GPT on "
              f"{len(TEXT)} characters, {world} ranks", flush=True)
    for step in range(args.steps):
        t0 = time.perf_counter()
        starts = torch.randint(0, len(data) - args.block - 1, (args.batch,), generator=gen)
        x = torch.stack([data[s:s + args.block] for s in starts]).to(device)  # (B, T)
        y = torch.stack([data[s + 1:s + args.block + 1] for s in starts]).to(device)  # (B, T)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP averages the gradients of all ranks here
        opt.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        mean_loss /= world
        dt = time.perf_counter() - t0
        if rank == 0:
            tokens = args.batch * args.block * world
            print(f"step {step} | loss {mean_loss.item():.4f} | {tokens / dt:.0f} tokens/s | "
                  f"{world} ranks", flush=True)
    if rank == 0 and not math.isfinite(mean_loss.item()):
        raise SystemExit("loss is not finite")
    # Leave together: every rank waits for the others before the group closes its connections
    # (a rank that closes while a peer still talks to it can take Gloo down with SIGABRT).
    del model, opt
    dist.barrier()
    dist.destroy_process_group()
    # DDP keeps a reference to the process group, so its Gloo worker threads outlive
    # destroy_process_group(); one that drops the last collective's tensor while Python shuts
    # down aborts the process ("terminate called without an active exception": 6 of 35 torchrun
    # runs of this script on a loaded test cluster). Nothing is left to do: leave without Python's shutdown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
