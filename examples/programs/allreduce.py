#!/usr/bin/env python3
"""All-reduce each rank's number over torch.distributed (Gloo, CPU): the smallest check that every
rank found the others.

Runs under `hpclaunch run --launch srun` (one task per GPU: RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT come from the batch script) and under `--launch torchrun` (torchrun
sets the same variables for the processes it starts). Each rank prints its rank and host; rank 0
prints the sum of all ranks, which is 0 + 1 + ... + (world - 1), and the hosts it heard from.

    rank 2/4 local 0 on node02
    sum of ranks: 6 (expected 6)
    hosts: node01,node02
"""
import os
import socket
import sys

import torch
import torch.distributed as dist


def say(line):
    # One write per line: the ranks of a node share srun's pipe, and print() under
    # PYTHONUNBUFFERED writes the text and its newline separately, so two ranks' lines could mix.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    # init_method env://: MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE from the environment.
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    host = socket.gethostname()
    say(f"rank {rank}/{world} local {os.environ.get('LOCAL_RANK', '?')} on {host}")

    total = torch.tensor([rank], dtype=torch.int64)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    hosts = [None] * world
    dist.all_gather_object(hosts, host)
    if rank == 0:
        say(f"sum of ranks: {total.item()} (expected {world * (world - 1) // 2})")
        say(f"hosts: {','.join(sorted(set(hosts)))}")
    dist.barrier()  # leave together: no rank closes its connections while a peer still talks
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
