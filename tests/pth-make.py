# SPDX-License-Identifier: MIT
"""tests/pth-make.py - .pth files made by torch.save, good and hostile,
for tests/pth-torch.sh.

    pth-make.py DIR     writes DIR/*.pth and DIR/images/ (a tiny image folder)

Good files: a torchvision resnet18 with random weights (no download), a
state dict wrapped as {"state_dict": ...} and as {"model": ...}, F16 and
BF16 tensors, views into a shared storage (an offset, a transpose), and
DIR/expect.pt, what each should read as (torch.save'd by this script, for
the checker). Hostile or broken ones: the legacy (pre-1.6) format, pickles
that call os.system or eval, a truncated archive, a storage entry of the
wrong size and a tensor view reaching past its storage. Exit status 77 when
torch, torchvision or PIL is missing.
"""
import io
import os
import sys
import zipfile

try:
    import torch
    import torchvision
    from PIL import Image
except ImportError:
    sys.exit(77)

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)


def path(name):
    return os.path.join(out, name)


# A real torchvision state dict, BatchNorm statistics moved off their
# initial values so that a reader that skipped them would be noticed.
model = torchvision.models.resnet18()
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2.0)
            m.num_batches_tracked.fill_(7)
torch.save(model.state_dict(), path("r18.pth"))

small = {"fc.weight": torch.randn(3, 4), "fc.bias": torch.randn(3)}
torch.save({"state_dict": small, "epoch": 3, "best_acc": 0.5, "arch": "tiny"},
           path("wrapped.pth"))
torch.save({"model": small, "optimizer": {"state": {}, "param_groups": [{"lr": 0.1}]}},
           path("model.pth"))

halves = {"h": torch.randn(4, 3).half(), "b": torch.randn(5).bfloat16(),
          "tiny": torch.tensor([6e-8, -6.1e-5, 65504.0, float("inf")]).half()}
torch.save(halves, path("f16.pth"))

base = torch.arange(100, dtype=torch.float32)
views = {"t": base[10:40].view(5, 6).t(), "o": base[50:60], "s": base[::7],
         "scalar": base[3], "n": torch.tensor(5, dtype=torch.int64)}
torch.save(views, path("view.pth"))

torch.save(small, path("legacy.pth"), _use_new_zipfile_serialization=False)

expect = {"r18": model.state_dict(), "small": small,
          "f16": {k: v.float() for k, v in halves.items()},
          "view": {k: v.contiguous() for k, v in views.items()}}
torch.save(expect, path("expect.pt"))


def repack(src, dst, change):
    """Copy archive src to dst, entry by entry, stored; change(name, data)
    gives each entry's new bytes."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, change(info.filename, zin.read(info.filename)))


torch.save(small, path("small.pth"))


class Evil:
    def __init__(self, fn, arg):
        self.fn, self.arg = fn, arg

    def __reduce__(self):
        return (self.fn, (self.arg,))


canary = path("pwned")
repack(path("small.pth"), path("evil-system.pth"),
       lambda n, d: __import__("pickle").dumps(Evil(os.system, "touch " + canary), protocol=2)
       if n.endswith("data.pkl") else d)
repack(path("small.pth"), path("evil-eval.pth"),
       lambda n, d: __import__("pickle").dumps(
           {"w": Evil(eval, "open(%r, 'w')" % canary)}, protocol=4)
       if n.endswith("data.pkl") else d)

with open(path("small.pth"), "rb") as f:
    whole = f.read()
with open(path("truncated.pth"), "wb") as f:
    f.write(whole[:len(whole) // 2])


def shrink_storage(name, data):
    # fc.weight's storage (key 0, 12 floats) loses its last element.
    return data[:-4] if name.endswith("/data/0") else data


repack(path("small.pth"), path("short-storage.pth"), shrink_storage)


def widen_view(name, data):
    # fc.weight's size tuple (3, 4) becomes (3, 5): the view reaches past
    # its 12-element storage.
    if name.endswith("data.pkl"):
        assert data.count(b"K\x03K\x04\x86") == 1
        return data.replace(b"K\x03K\x04\x86", b"K\x03K\x05\x86")
    return data


repack(path("small.pth"), path("wide-view.pth"), widen_view)

# Ten 32x32 RGB images in five classes.
for c in range(5):
    os.makedirs(path("images/c%d" % c), exist_ok=True)
    for i in range(2):
        px = (torch.rand(32, 32, 3) * 255).to(torch.uint8).numpy()
        Image.fromarray(px, "RGB").save(path("images/c%d/%d.png" % (c, i)))

# A checkpoint as Tandem writes one: the model's tensors plus the trainer's
# own, named tandem.*, which `tandem export` leaves out; ckpt/latest is a
# relative symbolic link to it.
def safetensors_bytes(tensors, metadata):
    import json
    import struct
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    names = {torch.float32: "F32", torch.int64: "I64"}
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


os.makedirs(path("ckpt"), exist_ok=True)
ckpt = dict(small)
ckpt["tandem.optim.momentum.fc.weight"] = torch.ones(3, 4)
ckpt["tandem.trainer.step"] = torch.tensor([12], dtype=torch.int64)
with open(path("ckpt/ckpt-000000012.safetensors"), "wb") as f:
    f.write(safetensors_bytes(ckpt, {"format": "tandem-checkpoint", "format_version": "1"}))
os.symlink("ckpt-000000012.safetensors", path("ckpt/latest"))
