# SPDX-License-Identifier: MIT
"""tests/pth-check.py - checks, in PyTorch, the files tests/pth-torch.sh
made with Tandem from the ones tests/pth-make.py made with torch.save.

    pth-check.py DIR    prints "PASS name" or "FAIL name: why" per check

Tensors read by Tandem's .pth reader (exported as safetensors) must equal
torch.load's bit for bit; .pth files written by `tandem export` must load
with torch.load(weights_only=True) and load_state_dict(strict=True) into
the torchvision model, equal bit for bit, with stored, 64-byte aligned data
entries.
"""
import json
import os
import struct
import sys
import zipfile

import torch
import torchvision

d = sys.argv[1]
expect = torch.load(os.path.join(d, "expect.pt"))
failed = 0


def check(name, fn):
    global failed
    try:
        fn()
        print("PASS " + name)
    except Exception as e:  # report every check, not just the first
        failed += 1
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e))


def read_safetensors(name):
    raw = open(os.path.join(d, name), "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    dtypes = {"F32": torch.float32, "I64": torch.int64}
    out = {}
    for k, e in header.items():
        if k == "__metadata__":
            continue
        b, end = e["data_offsets"]
        buf = bytearray(raw[8 + n + b:8 + n + end])
        out[k] = torch.frombuffer(buf, dtype=dtypes[e["dtype"]]).reshape(e["shape"]).clone() \
            if buf else torch.zeros(e["shape"], dtype=dtypes[e["dtype"]])
    return out


def same(a, b, keys=None):
    keys = list(a) if keys is None else keys
    assert sorted(keys) == sorted(b if keys is None else keys), \
        "names differ: %s vs %s" % (sorted(a), sorted(b))
    for k in keys:
        x, y = a[k], b[k]
        assert x.dtype == y.dtype and x.shape == y.shape, \
            "%s: %s %s vs %s %s" % (k, x.dtype, tuple(x.shape), y.dtype, tuple(y.shape))
        # bit for bit: compare the bytes, so -0.0 and NaN count too
        assert x.reshape(-1).view(torch.uint8).equal(y.reshape(-1).view(torch.uint8)), \
            "%s differs" % k


def load_pth(name, num_classes=1000):
    path = os.path.join(d, name)
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        raw = f.read()
        for info in z.infolist():
            assert info.compress_type == zipfile.ZIP_STORED, info.filename + " is compressed"
            o = info.header_offset
            n, e = struct.unpack("<HH", raw[o + 26:o + 30])
            if "/data/" in info.filename:
                assert (o + 30 + n + e) % 64 == 0, info.filename + " is not 64-byte aligned"
    sd = torch.load(path, weights_only=True)
    model = torchvision.models.resnet18(num_classes=num_classes)
    model.load_state_dict(sd, strict=True)
    return sd


check("reader: resnet18 .pth equals torch.load bit for bit",
      lambda: same(expect["r18"], read_safetensors("r18.safetensors")))
check("writer: exported .pth loads weights_only and strict, bit for bit",
      lambda: same(expect["r18"], load_pth("back.pth")))
check("writer: .pth to .pth directly",
      lambda: same(expect["r18"], load_pth("direct.pth")))
check("reader: {'state_dict': ...} wrapper",
      lambda: same(expect["small"], read_safetensors("wrapped.safetensors")))
check("reader: {'model': ...} wrapper",
      lambda: same(expect["small"], read_safetensors("model.safetensors")))
check("reader: F16 and BF16 become F32 exactly",
      lambda: same(expect["f16"], read_safetensors("f16.safetensors")))
check("reader: views with offsets and strides into one storage",
      lambda: same(expect["view"], read_safetensors("view.safetensors")))


def ckpt_export():
    sd = torch.load(os.path.join(d, "ckpt.pth"), weights_only=True)
    same(expect["small"], sd)


check("export of a checkpoint leaves tandem.* out", ckpt_export)


def finetune():
    sd = load_pth("ft.pth", num_classes=5)
    frozen = [k for k in expect["r18"] if k.startswith(("conv1.", "layer1.", "layer2."))
              and not k.endswith(("running_mean", "running_var", "num_batches_tracked"))]
    same(expect["r18"], sd, keys=frozen)
    moved = "layer4.1.conv2.weight"
    assert not sd[moved].equal(expect["r18"][moved]), "layer4 did not train"
    assert tuple(sd["fc.weight"].shape) == (5, 512)


check("fine-tune: frozen layers keep the .pth weights, layer4 trains, fc has 5 classes",
      finetune)
sys.exit(1 if failed else 0)
