#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/transforms-oracle.py - every transform against torchvision.

Each case runs a Tandem pipeline (through tests/transform-apply) and the
torchvision transform with the same FIXED parameters on the same image:
real Fashion-MNIST images (1 channel, u8) and a random RGB image, both as
PIL images, i.e. torchvision's PIL path for u8 images. Random choices are
pinned on both sides: on Tandem's with the parameters that exist for that
(`at=`, `box=`, `degrees=10,10`, `brightness=1.3,1.3`, `p=1`), on
torchvision's by its own pinned ranges or by replacing the class's
get_params with one that returns the same choice, so torchvision's own
forward() code (padding rules, fallbacks) still runs.

Results are compared in grey levels (0..255). Geometry without
interpolation must match exactly. Resampling, rotation and colour
adjustments may differ by up to 1 grey level: PIL rounds (resize) or
truncates (rotate, ImageEnhance blends) to integers, Tandem keeps floats.
Prints TAP; skips when torch or torchvision is missing.
"""
import gzip
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torchvision
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from PIL import Image
except Exception as e:  # noqa: BLE001 - any import failure means skip
    print("1..0 # SKIP torch/torchvision/PIL not available (%s)" % e)
    sys.exit(0)

BUILD = os.environ.get("TDM_TOP_BUILDDIR", ".")
SRC = os.environ.get("TDM_TOP_SRCDIR", ".")
APPLY = os.path.join(BUILD, "tests", "transform-apply")
EXACT = 1e-3   # float rounding of x / 255 * 255
ONE_GREY = 1.0 + 1e-3


def fashion_images(n):
    for d in ("/usr/share/datasets/fashion-mnist", os.path.join(SRC, "data", "fashion-mnist")):
        path = os.path.join(d, "train-images-idx3-ubyte.gz")
        if os.path.exists(path):
            with gzip.open(path, "rb") as f:
                magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
                assert magic == 0x803
                data = f.read(rows * cols * n)
            return [np.frombuffer(data[i * rows * cols:(i + 1) * rows * cols],
                                  dtype=np.uint8).reshape(1, rows, cols) for i in range(n)]
    return []


def random_rgb():
    rng = np.random.default_rng(1234)
    # Smooth structure plus noise: exercises both the filters and the edges.
    y, x = np.mgrid[0:37, 0:45]
    base = np.stack([x * 5, y * 6, (x + y) * 3]).astype(np.float64)
    img = base + rng.integers(0, 60, size=(3, 37, 45))
    return np.clip(img, 0, 255).astype(np.uint8)


def to_pil(chw):
    if chw.shape[0] == 1:
        return Image.fromarray(chw[0], mode="L")
    return Image.fromarray(np.ascontiguousarray(chw.transpose(1, 2, 0)), mode="RGB")


def from_torchvision(out):
    """A PIL image or a tensor as float CHW on Tandem's output scale: 0..1
    (PIL's grey levels / 255, ToTensor's values) or normalised units."""
    if isinstance(out, Image.Image):
        a = np.asarray(out).astype(np.float64) / 255.0
        return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
    return out.numpy().astype(np.float64)


def run_tandem(pipeline, chw, tmp):
    src = os.path.join(tmp, "in.u8")
    dst = os.path.join(tmp, "out.f32")
    with open(src, "wb") as f:
        f.write(np.ascontiguousarray(chw).tobytes())
    c, h, w = chw.shape
    r = subprocess.run([APPLY, pipeline, str(c), str(h), str(w), src, dst],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    oc, oh, ow = (int(v) for v in r.stdout.split())
    return np.fromfile(dst, dtype=np.float32).astype(np.float64).reshape(oc, oh, ow)


class Pinned:
    """Replace cls.get_params with a function returning `value` for a while."""

    def __init__(self, cls, value):
        self.cls, self.value = cls, value

    def __enter__(self):
        self.saved = self.cls.__dict__["get_params"]
        value = self.value
        self.cls.get_params = staticmethod(lambda *a, **k: value)

    def __exit__(self, *exc):
        self.cls.get_params = self.saved


def erase_params(i, j, h, w, value):
    return (i, j, h, w, torch.tensor(value, dtype=torch.float32)[:, None, None])


def cases(gray, rgb):
    """(description, image, tandem pipeline, torchvision callable, unscale, tolerance).
    unscale maps both outputs to the units of the tolerance: grey levels, or
    normalised units for a plain normalize."""
    g = lambda x: x * 255.0  # noqa: E731 - pipelines ending with x / 255
    nm = lambda m, s: (lambda x: (x * s + m) * 255.0)  # noqa: E731 - after normalize
    out = []
    for k, img in enumerate(gray):
        tag = "fashion[%d]" % k
        out += [
            (tag + " pad 3", img, "pad 3", T.Pad(3), g, EXACT),
            (tag + " pad 1,2,3,4 fill=7", img, "pad 1,2,3,4 fill=7", T.Pad((1, 2, 3, 4), fill=7),
             g, EXACT),
            (tag + " pad reflect", img, "pad 2,5 padding_mode=reflect",
             T.Pad((2, 5), padding_mode="reflect"), g, EXACT),
            (tag + " pad edge", img, "pad 4 padding_mode=edge", T.Pad(4, padding_mode="edge"), g,
             EXACT),
            (tag + " pad symmetric", img, "pad 3 padding_mode=symmetric",
             T.Pad(3, padding_mode="symmetric"), g, EXACT),
            (tag + " random-crop 24 at=3,1", img, "random-crop 24 at=3,1",
             ("pin", T.RandomCrop, (3, 1, 24, 24), T.RandomCrop(24)), g, EXACT),
            (tag + " random-crop 28 padding=4 at=7,2", img, "random-crop 28 padding=4 at=7,2",
             ("pin", T.RandomCrop, (7, 2, 28, 28), T.RandomCrop(28, padding=4)), g, EXACT),
            (tag + " random-crop pad_if_needed", img, "random-crop 30,33 pad_if_needed=true at=1,5",
             ("pin", T.RandomCrop, (1, 5, 30, 33), T.RandomCrop((30, 33), pad_if_needed=True)),
             g, EXACT),
            (tag + " center-crop 20", img, "center-crop 20", T.CenterCrop(20), g, EXACT),
            (tag + " center-crop 21,17", img, "center-crop 21,17", T.CenterCrop((21, 17)), g,
             EXACT),
            (tag + " center-crop 33 (pads)", img, "center-crop 33,31", T.CenterCrop((33, 31)), g,
             EXACT),
            (tag + " hflip p=1", img, "hflip p=1", T.RandomHorizontalFlip(p=1.0), g, EXACT),
            (tag + " vflip p=1", img, "vflip p=1", T.RandomVerticalFlip(p=1.0), g, EXACT),
            (tag + " hflip p=0", img, "hflip p=0", T.RandomHorizontalFlip(p=0.0), g, EXACT),
            (tag + " resize 14 (shrink)", img, "resize 14", T.Resize(14), g, ONE_GREY),
            (tag + " resize 40 (enlarge)", img, "resize 40", T.Resize(40), g, ONE_GREY),
            (tag + " resize 20,33", img, "resize 20,33", T.Resize((20, 33)), g, ONE_GREY),
            (tag + " random-resized-crop box", img, "random-resized-crop 32 box=2,3,20,15",
             ("pin", T.RandomResizedCrop, (2, 3, 20, 15), T.RandomResizedCrop(32)), g, ONE_GREY),
            (tag + " rotate 10", img, "rotate degrees=10,10",
             T.RandomRotation((10, 10), interpolation=T.InterpolationMode.BILINEAR), g, ONE_GREY),
            (tag + " rotate -33 fill=40", img, "rotate degrees=-33,-33 fill=40",
             T.RandomRotation((-33, -33), interpolation=T.InterpolationMode.BILINEAR, fill=40),
             g, ONE_GREY),
            (tag + " rotate 90", img, "rotate degrees=90,90",
             T.RandomRotation((90, 90), interpolation=T.InterpolationMode.BILINEAR), g,
             ONE_GREY),
            (tag + " brightness 1.3", img, "color-jitter brightness=1.3,1.3",
             T.ColorJitter(brightness=(1.3, 1.3)), g, ONE_GREY),
            (tag + " brightness 0.6", img, "color-jitter brightness=0.6,0.6",
             T.ColorJitter(brightness=(0.6, 0.6)), g, ONE_GREY),
            (tag + " contrast 0.5", img, "color-jitter contrast=0.5,0.5",
             T.ColorJitter(contrast=(0.5, 0.5)), g, ONE_GREY),
            (tag + " contrast 1.7", img, "color-jitter contrast=1.7,1.7",
             T.ColorJitter(contrast=(1.7, 1.7)), g, ONE_GREY),
            (tag + " saturation (1 channel: none)", img, "color-jitter saturation=0.2,0.2",
             T.ColorJitter(saturation=(0.2, 0.2)), g, EXACT),
            (tag + " normalize", img, "normalize mean=0.2860 std=0.3530",
             T.Compose([T.ToTensor(), T.Normalize((0.2860,), (0.3530,))]), nm(0.2860, 0.3530),
             1e-3),
            (tag + " random-erasing box value=0.5", img,
             "random-erasing p=1 box=3,4,10,12 value=0.5",
             ("pin", T.RandomErasing, erase_params(3, 4, 10, 12, [0.5]),
              T.Compose([T.ToTensor(), T.RandomErasing(p=1.0, value=0.5)])), g, EXACT),
            (tag + " chain", img,
             "pad 4 | random-crop 28 at=2,6 | hflip p=1 | rotate degrees=10,10 | "
             "normalize mean=0.2860 std=0.3530",
             ("pin", T.RandomCrop, (2, 6, 28, 28),
              T.Compose([T.Pad(4), T.RandomCrop(28), T.RandomHorizontalFlip(1.0),
                         T.RandomRotation((10, 10), interpolation=T.InterpolationMode.BILINEAR),
                         T.ToTensor(), T.Normalize((0.2860,), (0.3530,))])),
             nm(0.2860, 0.3530), ONE_GREY),
        ]
    out += [
        ("rgb pad fill=10,20,30", rgb, "pad 2 fill=10,20,30", T.Pad(2, fill=(10, 20, 30)), g,
         EXACT),
        ("rgb random-crop 30 at=4,9", rgb, "random-crop 30 at=4,9",
         ("pin", T.RandomCrop, (4, 9, 30, 30), T.RandomCrop(30)), g, EXACT),
        ("rgb center-crop 30", rgb, "center-crop 30", T.CenterCrop(30), g, EXACT),
        ("rgb center-crop 22,27", rgb, "center-crop 22,27", T.CenterCrop((22, 27)), g, EXACT),
        ("rgb hflip", rgb, "hflip p=1", T.RandomHorizontalFlip(1.0), g, EXACT),
        ("rgb resize 24", rgb, "resize 24", T.Resize(24), g, ONE_GREY),
        ("rgb resize 50,61", rgb, "resize 50,61", T.Resize((50, 61)), g, ONE_GREY),
        ("rgb random-resized-crop box", rgb, "random-resized-crop 24 box=5,4,30,33",
         ("pin", T.RandomResizedCrop, (5, 4, 30, 33), T.RandomResizedCrop(24)), g, ONE_GREY),
        ("rgb random-resized-crop 64,48 box", rgb, "random-resized-crop 64,48 box=1,2,11,17",
         ("pin", T.RandomResizedCrop, (1, 2, 11, 17), T.RandomResizedCrop((64, 48))), g,
         ONE_GREY),
        ("rgb rotate 33", rgb, "rotate degrees=33,33 fill=9,99,199",
         T.RandomRotation((33, 33), interpolation=T.InterpolationMode.BILINEAR,
                          fill=(9, 99, 199)), g, ONE_GREY),
        ("rgb brightness 1.4", rgb, "color-jitter brightness=1.4,1.4",
         T.ColorJitter(brightness=(1.4, 1.4)), g, ONE_GREY),
        ("rgb contrast 0.4", rgb, "color-jitter contrast=0.4,0.4",
         T.ColorJitter(contrast=(0.4, 0.4)), g, ONE_GREY),
        ("rgb contrast 1.5", rgb, "color-jitter contrast=1.5,1.5",
         T.ColorJitter(contrast=(1.5, 1.5)), g, ONE_GREY),
        ("rgb saturation 0.3", rgb, "color-jitter saturation=0.3,0.3",
         T.ColorJitter(saturation=(0.3, 0.3)), g, ONE_GREY),
        ("rgb saturation 1.8", rgb, "color-jitter saturation=1.8,1.8",
         T.ColorJitter(saturation=(1.8, 1.8)), g, ONE_GREY),
        ("rgb normalize", rgb, "normalize mean=0.5,0.4,0.3 std=0.2,0.25,0.3",
         T.Compose([T.ToTensor(), T.Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))]),
         lambda x: x, 1e-5),
        ("rgb random-erasing after normalize", rgb,
         "normalize mean=0.5 std=0.25 | random-erasing p=1 box=6,7,9,20 value=1.5,-1,0.25",
         ("pin", T.RandomErasing, erase_params(6, 7, 9, 20, [1.5, -1.0, 0.25]),
          T.Compose([T.ToTensor(), T.Normalize((0.5,) * 3, (0.25,) * 3),
                     T.RandomErasing(p=1.0, value=(1.5, -1.0, 0.25))])),
         lambda x: (x * 0.25 + 0.5) * 255.0, 1e-3),
    ]
    return out


def reference(spec, img):
    pil = to_pil(img)
    if isinstance(spec, tuple) and spec[0] == "pin":
        _, cls, value, fn = spec
        with Pinned(cls, value):
            return fn(pil)
    return spec(pil)


def main():
    if not os.access(APPLY, os.X_OK):
        print("1..0 # SKIP %s not built" % APPLY)
        return 0
    gray = fashion_images(2)
    rgb = random_rgb()
    todo = cases(gray, rgb)
    print("1..%d" % len(todo))
    print("# torch %s, torchvision %s, Pillow %s, %d Fashion-MNIST images"
          % (torch.__version__, torchvision.__version__, Image.__version__, len(gray)))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n, (desc, img, pipeline, spec, unscale, tol) in enumerate(todo, 1):
            try:
                ref = from_torchvision(reference(spec, img))
                got = run_tandem(pipeline, img, tmp)
                got, ref = unscale(got), unscale(ref)
                if got.shape != ref.shape:
                    raise RuntimeError("shape %s, torchvision %s" % (got.shape, ref.shape))
                diff = np.abs(got - ref)
                worst = float(diff.max()) if diff.size else 0.0
                ok = worst <= tol
                where = np.unravel_index(int(diff.argmax()), diff.shape) if diff.size else ()
                print("%s %d - %s: '%s' max diff %.4g (tolerance %.4g)"
                      % ("ok" if ok else "not ok", n, desc, pipeline, worst, tol))
                if not ok:
                    failed += 1
                    print("#   worst at %s: tandem %.3f torchvision %.3f; %d values over"
                          % (tuple(int(v) for v in where), got[where], ref[where],
                             int((diff > tol).sum())))
            except Exception as e:  # noqa: BLE001 - report and go on
                failed += 1
                print("not ok %d - %s: '%s': %s" % (n, desc, pipeline, e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
