#!/usr/bin/env python3
"""A training loop whose rank --stuck-rank stops for ever in its data loader at step
--stuck-step, while the other ranks wait for it in all_reduce: what a hung job looks like when one
rank's file system stalls. The test of hpclaunch's roll-call (docs/troubleshooting.md, "A job
that hangs"): with job.hang_seconds set, hpclaunch asks every rank where it is (SIGURG), and the
stacks this program prints name the stuck rank:

    roll-call: 3 of 4 ranks at stuck_loader.py:NN in main, inside all_reduce; rank 2 on node02
    at stuck_loader.py:NN in __next__

It opts into the roll-call with one line (faulthandler.register, below): Python prints every
thread's stack when SIGURG arrives, even while the main thread is blocked inside a collective.

With --heartbeat it prints nothing per step and writes its step into the heartbeat file
hpclaunch reads instead ($HPCLAUNCH_HEARTBEAT_DIR/heartbeat-RANK): a quiet program that hang
detection does not mistake for a hung one.
"""
import argparse
import faulthandler
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

# The roll-call: every thread's Python stack on SIGURG (hpclaunch's hang detection sends it).
faulthandler.register(signal.SIGURG, file=sys.stderr, all_threads=True)


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Batches:
    """One small batch per step; on the stuck rank, at the stuck step, a read that never ends."""

    def __init__(self, rank, stuck_rank, stuck_step):
        self.rank, self.stuck_rank, self.stuck_step, self.step = rank, stuck_rank, stuck_step, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.rank == self.stuck_rank and self.step == self.stuck_step:
            say(f"rank {self.rank}: stuck in the data loader at step {self.step} at {time.time():.3f}")
            while True:
                time.sleep(3600)  # a read from a file system that stopped answering
        self.step += 1
        return torch.full([4], float(self.rank))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--stuck-rank", type=int, default=2)
    p.add_argument("--stuck-step", type=int, default=3)
    p.add_argument("--step-sleep", type=float, default=0.2)
    p.add_argument("--heartbeat", action="store_true", help="a heartbeat file, not a line, a step")
    a = p.parse_args()
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    batches = Batches(rank, a.stuck_rank, a.stuck_step)
    heartbeat = None
    if a.heartbeat:
        os.makedirs(os.environ["HPCLAUNCH_HEARTBEAT_DIR"], exist_ok=True)
        heartbeat = os.path.join(os.environ["HPCLAUNCH_HEARTBEAT_DIR"], f"heartbeat-{rank}")
        say(f"rank {rank}: heartbeat in {heartbeat}, no line a step")
    for step in range(a.steps):
        x = next(batches)
        dist.all_reduce(x)
        if heartbeat:
            with open(heartbeat, "w") as f:
                f.write(f"step {step}\n")
        else:
            say(f"rank {rank}: step {step} sum {x[0].item():.0f}")
        time.sleep(a.step_sleep)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
