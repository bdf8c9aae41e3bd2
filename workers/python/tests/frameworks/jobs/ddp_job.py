"""Rank-independent work under torchrun, as people shard a data job: each rank of a gloo
process group works through its own shard under a tqdm bar (shown on rank 0 only), then all
meet at a barrier. No Overtime call. HANG_RANK (if set) stops making progress after 10
items, as a rank stuck on one bad record does, while staying alive and connected; every
other rank goes on until JOB_UNTIL (a Unix time) and prints "rank R done"."""

import os
import time

import torch.distributed as dist
from tqdm import tqdm

dist.init_process_group("gloo")
rank = dist.get_rank()
until = float(os.environ["JOB_UNTIL"])
hang = os.environ.get("HANG_RANK")
items = int((until - time.time()) / 0.1) + 1
for item in tqdm(range(items), desc="shard {}".format(rank), disable=rank != 0):
    if hang is not None and rank == int(hang) and item == 10:
        time.sleep(3600)
    time.sleep(0.1)
print("rank {} done".format(rank), flush=True)
dist.barrier()
dist.destroy_process_group()
