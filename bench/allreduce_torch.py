# SPDX-License-Identifier: MIT
"""bench/allreduce_torch.py - PyTorch's torch.distributed.all_reduce (gloo
backend, f32 sum) timed the way bench/allreduce.c times Tandem's collectives:
for each size (powers of 4 from MIN_BYTES to MAX_BYTES) a warm-up, then the
median of 5 runs of enough calls to move about 64 MiB (3..1000), each run
started after a barrier. Rank 0 prints `torch-gloo BYTES SECONDS_PER_CALL`.

Usage: /usr/bin/python3 bench/allreduce_torch.py [NPROC] [MIN_BYTES] [MAX_BYTES]
Run by bench/allreduce; not a test.
"""
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port, min_bytes, max_bytes):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    size = min_bytes
    while size <= max_bytes:
        t = torch.ones(size // 4, dtype=torch.float32)
        calls = max(3, min(1000, (64 << 20) // size))
        for _ in range(3):
            dist.all_reduce(t)
        runs = []
        for _ in range(5):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(t)
            runs.append((time.perf_counter() - t0) / calls)
        if rank == 0:
            print("torch-gloo %d %.9f" % (size, statistics.median(runs)), flush=True)
        size *= 4
    dist.destroy_process_group()


def main():
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    min_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    max_bytes = int(sys.argv[3]) if len(sys.argv) > 3 else 64 << 20
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(world, port, min_bytes, max_bytes), nprocs=world, join=True)


if __name__ == "__main__":
    main()
