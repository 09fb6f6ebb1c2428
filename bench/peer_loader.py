#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench/peer_loader.py - PyTorch's side of bench/loader.

Times torch.utils.data.DataLoader with torchvision transforms equal to
Tandem's pipeline: Fashion-MNIST as torchvision's FashionMNIST hands it out
(a PIL image per sample, from the Debian IDX files held in memory) or an
image folder through torchvision.datasets.ImageFolder. Batch 64, shuffled,
persistent workers; one untimed warm-up epoch (worker start-up), then the
timed epochs. Prints one JSON line. It can also generate the image folder
(--make-folder DIR N: N random RGB JPEGs with PIL, 96x96 in 10 classes
unless --size and --classes say otherwise; bench/train-folder uses it too).
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np


def make_folder(root, n, size=96, classes=10, seed=0):
    from PIL import Image
    rng = np.random.default_rng(seed)
    for i in range(n):
        cls = os.path.join(root, "class%d" % (i % classes))
        os.makedirs(cls, exist_ok=True)
        # Smooth random content (JPEG of pure noise is unlike photos).
        base = rng.integers(0, 256, size=(12, 12, 3), dtype=np.uint8)
        img = Image.fromarray(base).resize((size, size), Image.BILINEAR)
        img.save(os.path.join(cls, "img%05d.jpg" % i), quality=90)


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(root, stem):
    for name in (stem, stem + ".gz"):
        p = os.path.join(root, name)
        if os.path.exists(p):
            return p
    sys.exit("peer_loader: no %s in %s" % (stem, root))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["fashion", "folder"], default="fashion")
    ap.add_argument("--root", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--make-folder", nargs=2, metavar=("DIR", "N"))
    ap.add_argument("--size", type=int, default=96, help="--make-folder: image side, px")
    ap.add_argument("--classes", type=int, default=10, help="--make-folder: class folders")
    a = ap.parse_args()
    if a.make_folder:
        make_folder(a.make_folder[0], int(a.make_folder[1]), a.size, a.classes)
        return

    import torch
    import torchvision
    from PIL import Image
    from torchvision import transforms as T
    torch.set_num_threads(1)

    if a.kind == "fashion":
        images = read_idx(find(a.root, "train-images-idx3-ubyte"))
        labels = read_idx(find(a.root, "train-labels-idx1-ubyte")).astype(np.int64)
        if a.limit:
            images, labels = images[:a.limit], labels[:a.limit]
        tf = T.Compose([T.RandomCrop(28, padding=2), T.RandomHorizontalFlip(),
                        T.RandomRotation(10), T.ToTensor(), T.Normalize((0.2860,), (0.3530,))])

        class Fashion(torch.utils.data.Dataset):
            def __len__(self):
                return len(images)

            def __getitem__(self, i):
                # What torchvision.datasets.FashionMNIST does per sample.
                img = Image.fromarray(images[i], mode="L")
                return tf(img), int(labels[i])

        ds = Fashion()
    else:
        tf = T.Compose([T.RandomResizedCrop(64), T.RandomHorizontalFlip(),
                        T.ColorJitter(brightness=0.2, contrast=0.2, saturation=0.2),
                        T.ToTensor(), T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])
        ds = torchvision.datasets.ImageFolder(a.root, transform=tf)
        if a.limit:
            ds = torch.utils.data.Subset(ds, range(min(a.limit, len(ds))))

    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers,
                                         persistent_workers=a.workers > 0)
    for _ in loader:  # warm-up: worker processes start
        pass
    n = 0
    t0 = time.perf_counter()
    for _ in range(a.epochs):
        for x, y in loader:
            n += x.shape[0]
    s = time.perf_counter() - t0
    print(json.dumps({"mode": "torch", "kind": a.kind, "workers": a.workers, "images": n,
                      "seconds": round(s, 4), "img_per_s": round(n / s, 1)}))


if __name__ == "__main__":
    main()
