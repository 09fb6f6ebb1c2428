#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""tests/test-zoo-names.py - the zoo's parameter and buffer names, shapes and
order against PyTorch: torchvision's resnet18 / resnet34 / resnet50, vgg11,
vgg16, vgg16_bn and alexnet (so their state dicts load strictly), and the reference
definitions of mlp, lenet, resnet8 and resnet20 in tests/oracle/torch_zoo.py
(the architectures of the model zoo, written the PyTorch way). Tandem's side
is printed by tests/zoo-dump. Prints TAP; skips when torch is missing."""
import os
import subprocess
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("1..0 # SKIP torch is not installed")
    sys.exit(0)
try:
    import torchvision
except ImportError:
    torchvision = None
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle"))
from torch_zoo import zoo_model  # noqa: E402 (after the check for torch)


def skip_weight_init():
    """Only names and shapes are compared: leave the weights uninitialised,
    which saves seconds per VGG (130 million parameters)."""
    for fn in ("kaiming_normal_", "kaiming_uniform_", "normal_", "uniform_", "constant_",
               "zeros_", "ones_"):
        setattr(nn.init, fn, lambda t, *a, **k: t)
    for cls in (nn.Linear, nn.Conv2d, nn.BatchNorm2d):
        cls.reset_parameters = lambda self: None


def torch_model(name, c, classes, size):
    m = zoo_model(name, c, size, classes)
    if m is not None:
        return m
    m = getattr(torchvision.models, name)(num_classes=classes)
    if c != 3 and name.startswith("resnet"):
        m.conv1 = nn.Conv2d(c, 64, 7, 2, 3, bias=False)
    elif c != 3:
        first = m.features[0]
        m.features[0] = nn.Conv2d(c, first.out_channels, first.kernel_size, first.stride,
                                  first.padding)
    return m


def torch_entries(model):
    out = [("param", n, list(p.shape)) for n, p in model.named_parameters()]
    out += [("buffer", n, list(b.shape)) for n, b in model.named_buffers()
            if not n.endswith("num_batches_tracked")]
    return out


def tandem_entries(name, c, classes, size):
    dump = os.path.join(os.environ.get("TDM_TOP_BUILDDIR", "."), "tests", "zoo-dump")
    res = subprocess.run([dump, name, str(c), str(classes), str(size)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError("zoo-dump failed: " + res.stderr.strip())
    out = []
    for line in res.stdout.splitlines():
        kind, n, shape = line.split(" ", 2)
        out.append((kind, n, [int(v) for v in shape.split("x")] if shape != "-" else []))
    return out


cases = [
    ("mlp", 1, 10, 28), ("mlp", 3, 100, 32),
    ("lenet", 1, 10, 28), ("lenet", 3, 10, 32),
    ("resnet8", 1, 10, 28), ("resnet20", 3, 10, 32),
    ("resnet18", 3, 1000, 224), ("resnet18", 1, 10, 28), ("resnet34", 3, 10, 32),
    ("resnet50", 3, 1000, 224), ("resnet50", 1, 5, 64),
    ("vgg11", 3, 1000, 224), ("vgg11", 1, 10, 32), ("vgg16", 3, 10, 64),
    ("vgg16_bn", 3, 1000, 224), ("alexnet", 3, 1000, 224), ("alexnet", 1, 10, 63),
]
if torchvision is None:
    cases = [c for c in cases if zoo_model(c[0], 1, 28, 10) is not None]

skip_weight_init()
print("1..%d" % len(cases))
failed = 0
for i, (name, c, classes, size) in enumerate(cases, 1):
    label = "%s in_channels=%d num_classes=%d image_size=%d" % (name, c, classes, size)
    try:
        model = torch_model(name, c, classes, size)
        want = torch_entries(model)
        got = tandem_entries(name, c, classes, size)
    except Exception as e:  # report, do not crash the TAP stream
        print("not ok %d - %s\n# %s" % (i, label, e))
        failed += 1
        continue
    if want == got:
        n = sum(p.numel() for p in model.parameters())
        print("ok %d - %s (%d entries, %d parameters)" % (i, label, len(want), n))
        continue
    failed += 1
    print("not ok %d - %s" % (i, label))
    for k in range(max(len(want), len(got))):
        w = want[k] if k < len(want) else None
        g = got[k] if k < len(got) else None
        if w != g:
            print("# first difference at entry %d: torch %s, tandem %s" % (k, w, g))
            break
sys.exit(1 if failed else 0)
