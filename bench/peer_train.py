#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch's side of bench/train-throughput: one epoch of Fashion-MNIST.

Same models as Tandem's zoo (the definitions live in
tests/oracle/make_reference.py, which the oracle test checks Tandem against),
the first LIMIT training images, normalised (mean 0.2860, std 0.3530) and held
in memory as one tensor, batch 64, SGD lr 0.05 momentum 0.9 weight decay 5e-4,
one epoch in train mode. The images/s figure covers the training loop only
(every step of the epoch, the first included, as Tandem's trainer counts it);
loading and normalising the data is outside it.

Threads: PyTorch's OpenMP pool and OpenBLAS's pthread pool are separate, and
on 2 cores letting both spin makes PyTorch about 3x slower, so each is set
explicitly: --torch-threads through torch.set_num_threads, --blas-threads
through openblas_set_num_threads called with ctypes on the BLAS library torch
actually loaded (torch.set_num_threads does not reach OpenBLAS). When that
library is not OpenBLAS the output says so.

Prints one JSON object on stdout: images, seconds, images_per_s, peak_rss_mib
(ru_maxrss of this process), final_loss, and the thread and BLAS settings.
"""

import argparse
import ctypes
import gzip
import json
import os
import resource
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import make_reference  # noqa: E402  (the peer models, shared with the oracle test)

MEAN = 0.2860
STD = 0.3530


def read_idx(path, limit):
    """First `limit` items of a (gzip'ed) IDX file as a uint8 torch tensor."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        magic = f.read(4)
        if len(magic) != 4 or magic[0] != 0 or magic[1] != 0 or magic[2] != 0x08:
            raise SystemExit("%s: not an unsigned-byte IDX file" % path)
        ndim = magic[3]
        dims = list(struct.unpack(">" + "I" * ndim, f.read(4 * ndim)))
        n = min(dims[0], limit) if limit > 0 else dims[0]
        per_item = 1
        for d in dims[1:]:
            per_item *= d
        raw = f.read(n * per_item)
    if len(raw) != n * per_item:
        raise SystemExit("%s: truncated (%d of %d bytes)" % (path, len(raw), n * per_item))
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).reshape([n] + dims[1:])



def load_train(data, limit):
    """The first `limit` Fashion-MNIST training images, normalised as Tandem
    does, [N, 1, 28, 28] f32, and their labels (int64)."""
    images = read_idx(os.path.join(data, "train-images-idx3-ubyte.gz"), limit)
    labels = read_idx(os.path.join(data, "train-labels-idx1-ubyte.gz"), limit)
    x_all = ((images.float() / 255.0 - MEAN) / STD).unsqueeze(1).contiguous()
    return x_all, labels.long()


def train_epoch(model, opt, x_all, y_all, order, batch_size):
    """One epoch of SGD steps over the samples in `order`, `batch_size` at a
    time: (steps, images, loss sum)."""
    steps = 0
    seen = 0
    loss_sum = 0.0
    for start in range(0, order.shape[0], batch_size):
        idx = order[start:start + batch_size]
        xb = x_all[idx]
        yb = y_all[idx]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        loss_sum += loss.item()
        steps += 1
        seen += xb.shape[0]
    return steps, seen, loss_sum

def loaded_blas():
    """Path of the BLAS library mapped into this process (torch loads it)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            base = os.path.basename(path)
            if base.startswith("libblas") or base.startswith("libopenblas"):
                return os.path.realpath(path)
    return None


def set_blas_threads(n):
    """Call openblas_set_num_threads(n); returns a description of the BLAS."""
    path = loaded_blas()
    if path is None:
        return "no BLAS library loaded"
    lib = ctypes.CDLL(path)
    if not hasattr(lib, "openblas_set_num_threads"):
        return "%s (not OpenBLAS: thread count not settable)" % path
    lib.openblas_set_num_threads(ctypes.c_int(n))
    desc = path
    if hasattr(lib, "openblas_get_config"):
        lib.openblas_get_config.restype = ctypes.c_char_p
        desc += " [%s]" % lib.openblas_get_config().decode(errors="replace").strip()
    if hasattr(lib, "openblas_get_num_threads"):
        desc += " threads=%d" % lib.openblas_get_num_threads()
    return desc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, choices=["mlp", "lenet", "resnet8", "resnet20"])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--limit", type=int, default=10000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--torch-threads", type=int, default=2)
    ap.add_argument("--blas-threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(args.torch_threads)
    blas = set_blas_threads(args.blas_threads)
    torch.manual_seed(args.seed)

    x_all, y_all = load_train(args.data, args.limit)
    n = x_all.shape[0]

    model = make_reference.build(args.model)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)

    steps = 0
    seen = 0
    loss_sum = 0.0
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        e_steps, e_seen, e_loss = train_epoch(model, opt, x_all, y_all, torch.randperm(n),
                                              args.batch_size)
        steps += e_steps
        seen += e_seen
        loss_sum += e_loss
    seconds = time.perf_counter() - t0

    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "model": args.model,
        "images": seen,
        "steps": steps,
        "seconds": round(seconds, 4),
        "images_per_s": round(seen / seconds, 1),
        "peak_rss_mib": round(rss_kib / 1024.0, 1),
        "final_loss": round(loss_sum / max(steps, 1), 4),
        "torch_threads": torch.get_num_threads(),
        "blas_threads": args.blas_threads,
        "blas": blas,
        "torch": torch.__version__,
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
