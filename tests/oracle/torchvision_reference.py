#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reference numbers from torchvision for the zoo's ImageNet models.

For each case named on the command line (CASES below: a torchvision model,
an image size, a batch, and whether gradients are checked) this builds the
torchvision model with a fixed seed, randomises every BatchNorm's affine
parameters and running statistics and every bias (torchvision starts them
at 1 / 0, which would hide a bias or a statistic that Tandem ignored), and
writes into OUTDIR the files tests/oracle/test-torchvision.c reads:

  <init>-init.pth              the float32 state dict as torch.save writes it
                               (torchvision's pretrained files are such files);
                               <init> is the case's init name: cases of one
                               model share it where their weights are the same
  <case>-data.safetensors      "input" [N, 3, S, S] f32, "labels" [N] i64
  <case>-expected.safetensors  "logits" (eval mode, or train mode for a
                               training case); with gradients also "loss"
                               (mean cross-entropy) and "grad.<param>" for
                               every parameter: all of it, or every k-th
                               element (k = numel // SAMPLE) of a tensor over
                               SAMPLE elements, so that VGG's 100-million
                               element classifier does not need a 400 MB file.
                               Metadata: model, init, in_channels, num_classes,
                               image_size, batch, train, grads, sample.

The expected values are computed in float64 from the float32 weights, so the
tolerance the C side checks measures Tandem's float32 error.
"""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_reference import randomise_batchnorm, save_safetensors  # noqa: E402

SEED = 4321
CHANNELS = 3
CLASSES = 1000
SAMPLE = 65536

# Each bottleneck's last BatchNorm weight is multiplied by this in the
# "scaled" inits. At random initialisation a deep network of train-mode batch
# norms is chaotic: PyTorch's own float32 gradients of resnet50 (64 px,
# batch 2) are 2-3% away from float64 ones, so no float32 implementation can
# meet 1e-4. Damping the residual branches (torchvision's zero_init_residual
# sets that weight to 0, which would leave the branches without gradients)
# brings PyTorch's float32 within 5e-6, while every layer still contributes.
RESIDUAL_DAMPING = 0.1

# case: (torchvision model, init name, image size, batch, train mode, gradients)
# Sizes below 224 make VGG's AdaptiveAvgPool2d((7, 7)) upsample 2x2 and 3x3
# (and 1x1) feature maps; alexnet and resnet50 at 224 take the identity and
# the global average pool. vgg11's gradients are taken in eval mode (dropout
# off: its masks cannot match PyTorch's); resnet50's in train mode (batch
# statistics).
CASES = {
    "alexnet-224": ("alexnet", "alexnet", 224, 2, False, False),
    "vgg11-64": ("vgg11", "vgg11", 64, 2, False, False),
    "vgg11-grad-32": ("vgg11", "vgg11", 32, 2, False, True),
    "vgg16-96": ("vgg16", "vgg16", 96, 1, False, False),
    "vgg16_bn-64": ("vgg16_bn", "vgg16_bn", 64, 2, False, False),
    "resnet18-224": ("resnet18", "resnet18", 224, 2, False, False),
    "resnet18-train-64": ("resnet18", "resnet18", 64, 2, True, True),
    "resnet50-224": ("resnet50", "resnet50", 224, 1, False, False),
    "resnet50-train-64": ("resnet50", "resnet50-scaled", 64, 2, True, True),
}


def randomise_biases(model, gen):
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)) and m.bias is not None:
            with torch.no_grad():
                m.bias.copy_((torch.rand(m.bias.shape, generator=gen) - 0.5) * 0.2)


def sampled(t):
    flat = t.detach().reshape(-1)
    stride = max(1, flat.numel() // SAMPLE) if flat.numel() > SAMPLE else 1
    return flat[::stride].float().contiguous()


def reference(case, outdir, written):
    name, init, size, batch, train, grads = CASES[case]
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 1)
    model = getattr(torchvision.models, name)(num_classes=CLASSES)
    randomise_batchnorm(model, gen)
    randomise_biases(model, gen)
    if init.endswith("-scaled"):
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torchvision.models.resnet.Bottleneck):
                    m.bn3.weight.mul_(RESIDUAL_DAMPING)
    if init not in written:
        torch.save(model.state_dict(), os.path.join(outdir, init + "-init.pth"))
        written.add(init)
    x = torch.randn(batch, CHANNELS, size, size, generator=gen)
    y = torch.randint(0, CLASSES, (batch,), generator=gen, dtype=torch.int64)
    save_safetensors(os.path.join(outdir, case + "-data.safetensors"), {"input": x, "labels": y})

    model = model.double()
    model.train(train)
    expected = {}
    if grads:
        logits = model(x.double())
        loss = F.cross_entropy(logits, y)
        loss.backward()
        expected["loss"] = loss.detach().float().reshape(1)
        for pname, p in model.named_parameters():
            expected["grad." + pname] = sampled(p.grad)
    else:
        with torch.no_grad():
            logits = model(x.double())
    expected["logits"] = logits.detach().float()
    save_safetensors(os.path.join(outdir, case + "-expected.safetensors"), expected,
                     {"model": name, "init": init, "in_channels": CHANNELS, "num_classes": CLASSES,
                      "image_size": size, "batch": batch, "train": int(train),
                      "grads": int(grads), "sample": SAMPLE, "torch": torch.__version__,
                      "torchvision": torchvision.__version__})


def main(argv):
    if len(argv) < 3 or any(c not in CASES for c in argv[2:]):
        sys.stderr.write("usage: torchvision_reference.py OUTDIR CASE...\ncases: %s\n"
                         % " ".join(CASES))
        return 2
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    written = set()
    for case in argv[2:]:
        reference(case, argv[1], written)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
