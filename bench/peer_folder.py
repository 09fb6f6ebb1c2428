#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench/peer_folder.py - PyTorch's side of bench/train-folder.

Fine-tunes torchvision's resnet18 or resnet50 (num_classes=K, fresh
weights) on an image folder as a user would: torchvision.datasets.ImageFolder
with RandomResizedCrop(S), RandomHorizontalFlip, ToTensor and Normalize
(ImageNet's mean and std), a shuffled DataLoader with W worker processes
(persistent, pin_memory off), cross-entropy and SGD with momentum, in train
mode. WARMUP untimed steps, then STEPS timed ones; images/s covers the timed
steps, loading and augmentation included (the loop waits for its batches as
a real one does). The epochs wrap around when the folder is small.

Best settings on 2 cores: torch.set_num_threads(THREADS) for the compute,
OpenBLAS (torch's BLAS on Debian, only the classifier uses it) held to one
thread so that its pool does not spin against OpenMP's (see
bench/peer_train.py), and the workers forked before the model exists, so
that they do not inherit its pages. channels_last (--channels-last) was
not faster with Debian's torch 1.13 on the 2-core AVX-512 machine: on
resnet18 at 128 px the two layouts took turns being ahead between runs
(4.8/7.6 against 8.0/4.1 images/s on a loaded machine), on resnet50 at
64 px it was slower (1.38 against 1.58), so the default layout is used. bench/train-folder runs
this script with glibc's malloc tuned (its "tuned" figure).

Peak memory: ru_maxrss of this process (self), and of its largest waited-for
child (the workers end before it is read), whose sum is the "total" that
bench/train-folder compares against Tandem's single process (Tandem's loader
runs threads); the total counts pages shared between the parent and its
forked workers twice, so the peak of the summed proportional set size
(PSS, sampled from /proc every 50 ms) is printed beside it.

--count-flops prints the model's forward multiply-adds per image at the
row's size, counted with forward hooks on every Conv2d and Linear, and the
training flops per image by the convention 3 x forward (forward, backward
to the data, backward to the weights) x 2 flops per multiply-add.

Prints one JSON object on stdout.
"""

import argparse
import gc
import json
import os
import resource
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402
from torchvision import transforms as T  # noqa: E402

from peer_train import set_blas_threads  # noqa: E402

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def count_macs(model, size):
    """Forward multiply-adds per image of every Conv2d and Linear."""
    macs = [0]

    def conv_hook(mod, inp, out):
        k = mod.kernel_size[0] * mod.kernel_size[1] * (mod.in_channels // mod.groups)
        macs[0] += out.numel() // out.shape[0] * k

    def linear_hook(mod, inp, out):
        macs[0] += out.numel() // out.shape[0] * mod.in_features

    hooks = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_hook(linear_hook))
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    for h in hooks:
        h.remove()
    return macs[0]


class PssSampler(threading.Thread):
    """Peak over time of the PSS of this process and its children."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak_kib = 0
        self.stop = threading.Event()

    @staticmethod
    def pss_kib(pid):
        try:
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    @staticmethod
    def children(pid):
        kids = []
        try:
            for tid in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                    kids += [int(c) for c in f.read().split()]
        except OSError:
            pass
        return kids

    def run(self):
        me = os.getpid()
        while not self.stop.wait(0.05):
            total = self.pss_kib(me) + sum(self.pss_kib(c) for c in self.children(me))
            self.peak_kib = max(self.peak_kib, total)


def batches(loader):
    """The loader's batches, epoch after epoch."""
    while True:
        for b in loader:
            yield b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "resnet50"])
    ap.add_argument("--root", help="the image folder (one subfolder per class)")
    ap.add_argument("--size", type=int, default=64, help="RandomResizedCrop size, px")
    ap.add_argument("--classes", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count-flops", action="store_true")
    a = ap.parse_args()

    ctor = getattr(torchvision.models, a.model)
    if a.count_flops:
        macs = count_macs(ctor(num_classes=a.classes), a.size)
        print(json.dumps({"model": a.model, "size": a.size, "forward_macs": macs,
                          "train_flops_per_image": 6 * macs,
                          "convention": "training = 3 x forward, 2 flops per multiply-add"}))
        return 0
    if not a.root:
        ap.error("--root is needed unless --count-flops")

    torch.set_num_threads(a.threads)
    blas = set_blas_threads(1)
    torch.manual_seed(a.seed)
    sampler = PssSampler()
    sampler.start()

    tf = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(MEAN, STD)])
    ds = torchvision.datasets.ImageFolder(a.root, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True,
                                         drop_last=True, num_workers=a.workers,
                                         pin_memory=False, persistent_workers=a.workers > 0)
    it = batches(loader)
    first = next(it)  # forks the workers before the model exists

    model = ctor(num_classes=a.classes)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)

    def step(x, y):
        if a.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    loss = step(*first)
    for _ in range(a.warmup - 1):
        loss = step(*next(it))
    t0 = time.perf_counter()
    seen = 0
    for _ in range(a.steps):
        x, y = next(it)
        loss = step(x, y)
        seen += x.shape[0]
    seconds = time.perf_counter() - t0

    # The workers must have ended for RUSAGE_CHILDREN to count them.
    it.close()
    del it, loader
    gc.collect()
    sampler.stop.set()
    sampler.join()
    self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({
        "model": a.model, "size": a.size, "batch_size": a.batch_size,
        "warmup_steps": a.warmup, "steps": a.steps, "images": seen,
        "seconds": round(seconds, 4), "images_per_s": round(seen / seconds, 2),
        "peak_rss_self_mib": round(self_kib / 1024.0, 1),
        "peak_rss_children_mib": round(kids_kib / 1024.0, 1),
        "peak_rss_mib": round((self_kib + kids_kib) / 1024.0, 1),
        "peak_pss_total_mib": round(sampler.peak_kib / 1024.0, 1),
        "final_loss": round(loss, 4), "workers": a.workers,
        "torch_threads": torch.get_num_threads(), "channels_last": a.channels_last,
        "blas": blas, "torch": torch.__version__, "torchvision": torchvision.__version__,
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
