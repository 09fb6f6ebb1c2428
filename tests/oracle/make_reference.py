#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reference numbers from PyTorch for Tandem's oracle test.

For each model named on the command line this builds the model in PyTorch
exactly as /work/prompts/models.md (and Tandem's zoo) defines it, with a fixed
seed, and writes three safetensors files into OUTDIR that the C side of the
test (tests/oracle/test-oracle.c) reads back:

  <model>-init.safetensors      the initial float32 state dict (torchvision names,
                                num_batches_tracked included as PyTorch saves it)
  <model>-data.safetensors      "input" [N,1,28,28] f32 and "labels" [N] i64
                                (and "input.K", "labels.K" for step K > 0
                                when the steps take different batches)
  <model>-expected.safetensors  "logits" of the first forward (train mode),
                                "loss", "grad.<param>" after the first backward
                                of the mean cross-entropy, and "stepS.<name>"
                                for every parameter and BN running buffer after
                                S SGD steps (lr 0.05, momentum 0.9, wd 5e-4) in
                                train mode; metadata "steps" is S.

Options (before OUTDIR), for the GPU check (tests/gpu/run):
  --steps S     S SGD steps instead of 3
  --lr LR       learning rate LR instead of 0.05 (metadata "lr"): at 0.05
                float rounding grows past 1e-3 within 20 steps (ReLUs flip)
  --batch N     batch size N instead of 8
  --data DIR    take the batches in order from the Fashion-MNIST IDX files
                in DIR (step K uses images K*N .. K*N+N-1, normalised as
                Tandem does) instead of one random batch used by every step
  --device D    compute on torch device D (e.g. cuda) instead of the CPU,
                cuDNN in deterministic mode

The float32 initial weights are the ones Tandem loads, but the expected values
are computed in float64 from them, so the tolerance the C side checks measures
Tandem's float32 error against the exact result rather than against
PyTorch's own float32 rounding. BatchNorm affine parameters and running
statistics are randomised (not left at 1/0) so a backward that ignored gamma
or a forward that ignored the stored statistics cannot pass.

The safetensors writer is written here with struct + json because the
`safetensors` package may not be installed.
"""

import gzip
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_zoo import zoo_model

BATCH = 8
IN_CHANNELS = 1
IMAGE_SIZE = 28
NUM_CLASSES = 10
LR = 0.05
MOMENTUM = 0.9
WEIGHT_DECAY = 5e-4
STEPS = 3
SEED = 1234


# ---- models: tests/oracle/torch_zoo.py (names match torchvision / Tandem's zoo) ----

def build(name):
    model = zoo_model(name, IN_CHANNELS, IMAGE_SIZE, NUM_CLASSES)
    if model is None:
        raise SystemExit("make_reference.py: unknown model %r" % name)
    return model


# ---- safetensors writer ----

_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64",
           torch.int32: "I32", torch.uint8: "U8"}


def save_safetensors(path, tensors, metadata=None):
    """Write `tensors` (an ordered dict name -> tensor) as a safetensors file."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.numpy()  # x86 and arm64 hosts are little endian; written without a copy
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + data.nbytes]}
        blobs.append(data)
        offset += data.nbytes
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ---- the reference run ----

def randomise_batchnorm(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)


def load_fashion_mnist(data_dir, count):
    """The first `count` training images of an IDX directory, normalised as
    Tandem's loader does ((u8 / 255 - 0.2860) / 0.3530), and their labels."""
    with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz")) as f:
        raw = f.read()
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")) as f:
        lbl = f.read()
    n, h, w = struct.unpack(">III", raw[4:16])
    if count > n:
        raise SystemExit("make_reference.py: %s holds %d images, %d needed" % (data_dir, n, count))
    x = torch.frombuffer(bytearray(raw[16:16 + count * h * w]), dtype=torch.uint8)
    x = (x.reshape(count, 1, h, w).float() / 255.0 - 0.2860) / 0.3530
    y = torch.frombuffer(bytearray(lbl[8:8 + count]), dtype=torch.uint8).long()
    return x, y


def reference(name, outdir, steps=STEPS, batch=BATCH, data_dir=None, device="cpu", lr=LR):
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 1)
    model = build(name)
    randomise_batchnorm(model, gen)
    init = model.state_dict()
    save_safetensors(os.path.join(outdir, name + "-init.safetensors"), init,
                     {"model": name, "seed": SEED})

    if data_dir is None:
        x = torch.randn(batch, IN_CHANNELS, IMAGE_SIZE, IMAGE_SIZE, generator=gen)
        y = torch.randint(0, NUM_CLASSES, (batch,), generator=gen, dtype=torch.int64)
        batches = [(x, y)] * steps
        data = {"input": x, "labels": y}
    else:
        x, y = load_fashion_mnist(data_dir, steps * batch)
        batches = [(x[k * batch:(k + 1) * batch], y[k * batch:(k + 1) * batch])
                   for k in range(steps)]
        data = {}
        for k, (xk, yk) in enumerate(batches):
            suffix = "" if k == 0 else ".%d" % k
            data["input" + suffix], data["labels" + suffix] = xk, yk
    save_safetensors(os.path.join(outdir, name + "-data.safetensors"), data)

    dev = torch.device(device)
    if dev.type == "cuda":
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    model = model.double().to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM,
                          weight_decay=WEIGHT_DECAY)
    expected = {}
    for step in range(steps):
        xd, yd = batches[step][0].double().to(dev), batches[step][1].to(dev)
        opt.zero_grad(set_to_none=False)
        logits = model(xd)
        loss = F.cross_entropy(logits, yd)
        loss.backward()
        if step == 0:
            expected["logits"] = logits.detach().float()
            expected["loss"] = loss.detach().float().reshape(1)
            for pname, p in model.named_parameters():
                expected["grad." + pname] = p.grad.detach().float()
        opt.step()
    for pname, t in model.state_dict().items():
        if pname.endswith("num_batches_tracked"):
            continue
        expected["step%d.%s" % (steps, pname)] = t.detach().float()
    save_safetensors(os.path.join(outdir, name + "-expected.safetensors"), expected,
                     {"model": name, "steps": steps, "lr": lr, "momentum": MOMENTUM,
                      "weight_decay": WEIGHT_DECAY, "torch": torch.__version__,
                      "device": device, "batch": batch,
                      "data": "random" if data_dir is None else "fashion-mnist in order"})


def main(argv):
    opts = {}
    args = argv[1:]
    while args and args[0].startswith("--"):
        if len(args) < 2 or args[0] not in ("--steps", "--batch", "--data", "--device", "--lr"):
            sys.stderr.write("make_reference.py: unknown option or missing value: %s\n" % args[0])
            return 2
        key, value = args[0][2:], args[1]
        if key in ("steps", "batch"):
            value = int(value)
        elif key == "lr":
            value = float(value)
        opts["data_dir" if key == "data" else key] = value
        args = args[2:]
    if len(args) < 2:
        sys.stderr.write("usage: make_reference.py [--steps S] [--lr LR] [--batch N] "
                         "[--data DIR] [--device D] OUTDIR MODEL...\n")
        return 2
    torch.set_num_threads(1)
    outdir = args[0]
    for name in args[1:]:
        reference(name, outdir, **opts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
