#!/usr/bin/env python3
"""PyTorch Lightning under Slurm: DDP over every task srun starts, and Lightning's own requeue.

    hpclaunch run --preset 2n2g --launch srun -- \
        python examples/programs/lightning_train.py --nodes 2 --devices 2 --max-steps 40

Lightning's SLURMEnvironment reads the ranks from srun's variables (SLURM_PROCID, SLURM_LOCALID,
SLURM_NODEID, SLURM_NTASKS) and keeps the batch script's MASTER_ADDR and MASTER_PORT; the Trainer
must be told the same shape as the job (num_nodes, devices), or Lightning stops with a mismatch.
Each rank prints what Lightning made of it:

    lightning: global_rank 3 of world_size 4 (node_rank 1, local_rank 1) on node02

On USR1 (Slurm's --signal, or `scancel --signal=USR1 --batch JOBID`, which hpclaunch's batch script
forwards to the tasks) Lightning saves `hpc_ckpt_N.ckpt` in --root and its rank 0 runs
`scontrol requeue`; the requeued job starts again from that checkpoint
(docs/program-examples.md). Rank 0 prints where training starts and where it ends:

    lightning: training starts at step 5
    lightning: finished at step 40, train_loss 0.2067
"""
import argparse
import socket
import sys
import time

import lightning as L
import torch
from lightning.pytorch.plugins.environments import SLURMEnvironment
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LinearFit(L.LightningModule):
    """Fits y = 3x - 1 on noisy samples: a loss that falls to the noise's variance (0.01)."""

    def __init__(self, step_sleep):
        super().__init__()
        self.net = nn.Linear(1, 1)
        self.step_sleep = step_sleep

    def training_step(self, batch, _):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, sync_dist=True)
        if self.step_sleep:
            time.sleep(self.step_sleep)  # stands in for a longer step: time to preempt the job
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def on_fit_start(self):
        t = self.trainer
        # One write for the whole line: the ranks of a node share srun's pipe, and print() under
        # PYTHONUNBUFFERED writes the text and its newline separately.
        sys.stdout.write(f"lightning: global_rank {t.global_rank} of world_size {t.world_size} "
                         f"(node_rank {t.node_rank}, local_rank {t.local_rank}) on "
                         f"{socket.gethostname()}\n")
        sys.stdout.flush()

    def on_train_start(self):
        if self.trainer.is_global_zero:
            print(f"lightning: training starts at step {self.trainer.global_step}", flush=True)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.trainer.is_global_zero:
            print(f"lightning: step {self.trainer.global_step} loss {outputs['loss'].item():.4f}",
                  flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--devices", type=int, default=1, help="processes per node")
    ap.add_argument("--max-steps", type=int, default=40)
    ap.add_argument("--step-sleep", type=float, default=0.0, help="seconds added to each step")
    ap.add_argument("--root", default=".", help="Lightning's default_root_dir (hpc_ckpt_*.ckpt)")
    args = ap.parse_args()

    g = torch.Generator().manual_seed(0)
    x = torch.rand(4096, 1, generator=g)
    y = 3 * x - 1 + 0.1 * torch.randn(4096, 1, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)

    trainer = L.Trainer(
        accelerator="cpu", strategy="ddp", devices=args.devices, num_nodes=args.nodes,
        max_steps=args.max_steps, default_root_dir=args.root,
        # auto_requeue=True (the default, written out): on USR1 save hpc_ckpt_N.ckpt and
        # `scontrol requeue` the job; a restarted job resumes from the newest one. Outside a
        # Slurm job (a laptop) Lightning starts the processes itself.
        plugins=[SLURMEnvironment(auto_requeue=True)] if SLURMEnvironment.detect() else [],
        logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False)
    model = LinearFit(args.step_sleep)
    trainer.fit(model, loader)
    if trainer.is_global_zero:
        loss = trainer.callback_metrics["train_loss"].item()
        print(f"lightning: finished at step {trainer.global_step}, train_loss {loss:.4f}",
              flush=True)

    # Lightning leaves the process group up after fit (for a later trainer.test). Left to the
    # interpreter's exit, Gloo's worker threads can end a rank with "terminate called without an
    # active exception" (SIGABRT) after training succeeded (pytorch/pytorch#190489); only after a
    # successful fit, so that a rank that failed does not wait in it (pytorch/torchtitan#1342).
    # The barrier first: a rank that closes its connections while a peer still uses them takes
    # that peer down (docs/program-examples.md).
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
