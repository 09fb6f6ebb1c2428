#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch's side of bench/ddp-throughput: one epoch of DistributedDataParallel.

Started by torch.distributed.run (one process per rank; under Python 3.11
torch 1.13's launcher needs `--redirects 2 --tee 2`). Each rank: gloo
process group, one PyTorch thread and one BLAS thread, the same model as
Tandem's zoo (tests/oracle/make_reference.py), the first LIMIT Fashion-MNIST
training images normalised and held in memory, a DistributedSampler
(shuffle, set_epoch) giving this rank its share, batch BATCH per rank, SGD
lr 0.05 momentum 0.9 weight decay 5e-4, DDP with its default buckets.
Batches are sliced from the in-memory tensor by the sampler's indices (no
DataLoader workers or per-sample collation, as on Tandem's side, whose
loader also only gathers and normalises). The clock covers the training loop
of every rank, from a barrier before the first step to the end of the last;
the slowest rank's time counts.

Rank 0 prints one JSON object on stdout: world, images (all ranks), seconds,
images_per_s (global), per-rank batch, final_loss, threads and versions.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

import make_reference  # noqa: E402
from peer_train import load_train, set_blas_threads, train_epoch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, choices=["mlp", "lenet", "resnet8", "resnet20"])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--limit", type=int, default=10000)
    ap.add_argument("--batch-size", type=int, default=64, help="per rank")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch and BLAS threads per rank")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    blas = set_blas_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    x_all, y_all = load_train(args.data, args.limit)
    n = x_all.shape[0]

    model = DistributedDataParallel(make_reference.build(args.model))
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed)

    steps = 0
    seen = 0
    loss_sum = 0.0
    dist.barrier()
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)), dtype=torch.long)
        e_steps, e_seen, e_loss = train_epoch(model, opt, x_all, y_all, order, args.batch_size)
        steps += e_steps
        seen += e_seen
        loss_sum += e_loss
    seconds = time.perf_counter() - t0

    totals = torch.tensor([float(seen), seconds], dtype=torch.float64)
    slowest = totals.clone()
    dist.all_reduce(totals[:1], op=dist.ReduceOp.SUM)
    dist.all_reduce(slowest[1:], op=dist.ReduceOp.MAX)
    if rank == 0:
        images_all, secs = int(totals[0].item()), float(slowest[1].item())
        print(json.dumps({
            "model": args.model,
            "world": world,
            "batch_per_rank": args.batch_size,
            "images": images_all,
            "steps": steps,
            "seconds": round(secs, 4),
            "images_per_s": round(images_all / secs, 1),
            "final_loss": round(loss_sum / max(steps, 1), 4),
            "threads_per_rank": args.threads,
            "blas": blas,
            "torch": torch.__version__,
            "backend": "gloo",
        }), flush=True)
    # torch 1.13's gloo teardown (destroy_process_group or interpreter exit)
    # was seen to hang on rank 0 once the other rank had gone: meet once
    # more, then leave without it.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
