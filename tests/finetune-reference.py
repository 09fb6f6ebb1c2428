#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""tests/finetune-reference.py - PyTorch's side of tests/finetune-torch.sh.

  finetune-reference.py init MODEL OUT.safetensors
      the zoo model MODEL (tests/oracle/torch_zoo.py) with seeded random
      weights and batch-norm statistics, saved for `tandem train --init`

  finetune-reference.py check INIT TANDEM.safetensors OPTIONS...
      trains the model of INIT in PyTorch (float64) as `tandem train` was
      told to (OPTIONS below) on the first N Fashion-MNIST training images,
      one full batch of them per step, and prints
          <largest |difference|> <its tensor> <tensors compared>
      against Tandem's result, over every parameter and running statistic.

OPTIONS: model=NAME steps=S n=N lr=LR momentum=M wd=WD opt=sgd|adamw
freeze=P,P groups=P=LR,P=LR clip=X warmup=W schedule=constant|cosine
min_lr=LR. Frozen parameters stop needing gradients, and a batch norm whose
weight and bias are both frozen is put in eval mode (the torchvision
fine-tuning recipe), which is what Tandem does with them. Groups take
parameters by name prefix (the longest wins); each group runs the schedule
from its own rate: the warmup lr * (step + 1) / (W + 1), then the cosine
from the group's rate to min_lr over the remaining steps.
"""
import gzip
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "oracle"))
from make_reference import load_fashion_mnist, randomise_batchnorm, save_safetensors  # noqa: E402
from torch_zoo import zoo_model  # noqa: E402


def read_safetensors(path):
    raw = open(path, "rb").read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    dtypes = {"F32": torch.float32, "I64": torch.int64}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        buf = bytearray(raw[8 + hlen + lo:8 + hlen + hi])
        out[name] = torch.frombuffer(buf, dtype=dtypes[e["dtype"]]).reshape(e["shape"]).clone()
    return out


def longest_prefix(prefixes, name):
    best = None
    for p in prefixes:
        if p and name.startswith(p) and (best is None or len(p) > len(best)):
            best = p
    return best


def group_lr(base, step, o):
    w = o["warmup"]
    if w > 0 and step < w:
        return base * (step + 1) / (w + 1)
    if o["schedule"] == "cosine":
        span = o["steps"] - w
        t = min((step - w) / span, 1.0)
        return o["min_lr"] + 0.5 * (base - o["min_lr"]) * (1 + math.cos(math.pi * t))
    return base


def check(init_path, tandem_path, args):
    o = {"model": "resnet8", "steps": 5, "n": 16, "lr": 0.05, "momentum": 0.9, "wd": 5e-4,
         "opt": "sgd", "freeze": "", "groups": "", "clip": 0.0, "warmup": 0,
         "schedule": "constant", "min_lr": 0.0, "eps": 1e-8}
    for a in args:
        k, v = a.split("=", 1)
        o[k] = type(o[k])(v) if not isinstance(o[k], float) else float(v)
    torch.set_num_threads(1)
    model = zoo_model(o["model"], 1, 28, 10)
    model.load_state_dict({k: v for k, v in read_safetensors(init_path).items()}, strict=True)
    model = model.double()

    frozen = [p.strip() for p in o["freeze"].split(",") if p.strip()]
    for name, p in model.named_parameters():
        if longest_prefix(frozen, name) is not None:
            p.requires_grad_(False)
    frozen_bn = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)
                 and not m.weight.requires_grad and not m.bias.requires_grad]

    prefixes, rates = [], []
    for entry in filter(None, (e.strip() for e in o["groups"].split(","))):
        p, r = entry.split("=")
        prefixes.append(p.strip())
        rates.append(float(r))
    members = {p: [] for p in prefixes}
    rest = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        g = longest_prefix(prefixes, name)
        (members[g] if g is not None else rest).append(p)
    groups = [{"params": rest, "lr": o["lr"]}]
    groups += [{"params": members[p], "lr": r} for p, r in zip(prefixes, rates)]
    bases = [g["lr"] for g in groups]
    if o["opt"] == "sgd":
        opt = torch.optim.SGD(groups, lr=o["lr"], momentum=o["momentum"], weight_decay=o["wd"])
    else:
        opt = torch.optim.AdamW(groups, lr=o["lr"], weight_decay=o["wd"], eps=o["eps"])

    data_dir = os.path.join(HERE, "..", "data", "fashion-mnist")
    x, y = load_fashion_mnist(data_dir, o["n"])
    x = x.double()
    trainable = [p for p in model.parameters() if p.requires_grad]
    for step in range(o["steps"]):
        model.train()
        for m in frozen_bn:
            m.eval()
        for g, base in zip(opt.param_groups, bases):
            g["lr"] = group_lr(base, step, o)
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(model(x), y).backward()
        if o["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(trainable, o["clip"])
        opt.step()

    mine = read_safetensors(tandem_path)
    worst, worst_name, n = 0.0, "-", 0
    for name, t in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        d = (mine[name].double() - t).abs().max().item()
        n += 1
        if d > worst or d != d:
            worst, worst_name = d, name
    print("%.3g %s %d" % (worst, worst_name, n))


def pretrain_statistics(model):
    """Running statistics of images the weights have seen, as a pretrained
    model has them: a frozen batch norm then normalises its input to about
    zero mean and unit variance. (Statistics that do not fit the data leave
    later batch norms channels of almost no variance, whose float32
    gradients no two implementations round alike.)"""
    x, _ = load_fashion_mnist(os.path.join(HERE, "..", "data", "fashion-mnist"), 256)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the batches
    model.train()
    with torch.no_grad():
        for k in range(0, 256, 64):
            model(x[k:k + 64])
    for m in bns:
        m.momentum = 0.1


def main(argv):
    if len(argv) >= 4 and argv[1] == "init":
        torch.manual_seed(1234)
        model = zoo_model(argv[2], 1, 28, 10)
        randomise_batchnorm(model, torch.Generator().manual_seed(1235))
        pretrain_statistics(model)
        save_safetensors(argv[3], model.state_dict(), {"model": argv[2]})
        return 0
    if len(argv) >= 4 and argv[1] == "check":
        check(argv[2], argv[3], argv[4:])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
