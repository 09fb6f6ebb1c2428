#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/make-fixtures.py - small CIFAR and image-folder data sets for the
dataset reader tests, made at test time (no binary file is committed).

    make-fixtures.py cifar DIR    CIFAR-10 and CIFAR-100 files (no PIL needed)
    make-fixtures.py images DIR   image folders, good and bad, with PIL's
                                  decoding of every image as the reference
Exit status 77 when PIL is missing (the images part is then skipped).

CIFAR pixels and labels follow formulas the C test recomputes:
  CIFAR-10, split s (0 train, 1 test), sample i (over all batch files):
    label = (3 i + 7 s) % 10, pixel k = (37 i + 11 k + 101 s) % 256
  CIFAR-100: coarse = (i + s) % 20, fine = (13 i + 5 + s) % 100, pixels as above.
Train batches: data_batch_1.bin (3 records), data_batch_2.bin (2 records);
test_batch.bin (2). CIFAR-100: train.bin (4), test.bin (3).

Image folder "good" (torchvision order: classes sorted by code point, so
"Dog" comes before "cat"): RGB, grey, RGBA and palette PNGs, RGB and grey
JPEGs, of different sizes, a nested folder, an upper-case extension, and a
file that is not an image. For each sample in order, "good.expect" has a line
  PATH LABEL W H FORMAT
and good-rgb/NNN.raw, good-grey/NNN.raw hold PIL's convert("RGB") and
convert("L") pixels, CHW. "torchvision.txt" (when torchvision imports) holds
ImageFolder(good).classes and .samples.
"""
import os
import sys


def cifar_record(i, s, k_bytes):
    return bytes((37 * i + 11 * k + 101 * s) % 256 for k in range(k_bytes))


def make_cifar(root):
    c10 = os.path.join(root, "cifar10")
    c100 = os.path.join(root, "cifar100")
    os.makedirs(c10, exist_ok=True)
    os.makedirs(c100, exist_ok=True)

    def c10_records(s, first, n):
        out = b""
        for i in range(first, first + n):
            out += bytes([(3 * i + 7 * s) % 10]) + cifar_record(i, s, 3072)
        return out

    def c100_records(s, n):
        out = b""
        for i in range(n):
            out += bytes([(i + s) % 20, (13 * i + 5 + s) % 100]) + cifar_record(i, s, 3072)
        return out

    with open(os.path.join(c10, "data_batch_1.bin"), "wb") as f:
        f.write(c10_records(0, 0, 3))
    with open(os.path.join(c10, "data_batch_2.bin"), "wb") as f:
        f.write(c10_records(0, 3, 2))
    with open(os.path.join(c10, "test_batch.bin"), "wb") as f:
        f.write(c10_records(1, 0, 2))
    with open(os.path.join(c100, "train.bin"), "wb") as f:
        f.write(c100_records(0, 4))
    with open(os.path.join(c100, "test.bin"), "wb") as f:
        f.write(c100_records(1, 3))


def pattern(w, h, mode, seed):
    """A deterministic image with edges and gradients (JPEG-unfriendly enough
    to exercise the decoder, not so noisy that PIL and libjpeg could differ)."""
    from PIL import Image
    img = Image.new("RGB", (w, h))
    px = img.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = ((x * 255 // max(w - 1, 1) + seed) % 256,
                        (y * 255 // max(h - 1, 1) + 3 * seed) % 256,
                        ((x + y) * 17 + 50 * seed) % 256 if (x // 4 + y // 4) % 2 else 30)
    if mode == "L":
        return img.convert("L")
    if mode == "RGBA":
        img = img.convert("RGBA")
        img.putalpha(Image.new("L", (w, h), 128))
        return img
    if mode == "P":
        return img.convert("P", palette=Image.ADAPTIVE, colors=16)
    return img


def make_images(root):
    try:
        from PIL import Image
    except ImportError:
        sys.exit(77)
    good = os.path.join(root, "good")
    # (class, relative path, mode, format, w, h)
    spec = [
        ("Dog", "d1.png", "RGB", "PNG", 7, 5),
        ("Dog", "d2.JPG", "RGB", "JPEG", 16, 12),
        ("Dog", "d3.png", "L", "PNG", 9, 9),
        ("cat", "a.png", "RGBA", "PNG", 6, 8),
        ("cat", "b.jpeg", "L", "JPEG", 10, 6),
        ("cat", "sub/c.png", "P", "PNG", 5, 5),
        ("cat", "sub-x/e.png", "RGB", "PNG", 3, 4),
        ("zebra", "z.jpg", "RGB", "JPEG", 24, 17),
    ]
    for n, (cls, rel, mode, fmt, w, h) in enumerate(spec):
        path = os.path.join(good, cls, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        img = pattern(w, h, mode, n)
        if fmt == "JPEG":
            img.save(path, "JPEG", quality=90)
        else:
            img.save(path, "PNG")
    with open(os.path.join(good, "zebra", "notes.txt"), "w") as f:
        f.write("not an image, skipped\n")

    # The expected order: torchvision's rules (sorted classes; per class,
    # sorted(os.walk) then sorted file names).
    classes = sorted(e.name for e in os.scandir(good) if e.is_dir())
    samples = []
    for label, cls in enumerate(classes):
        for dirpath, _, names in sorted(os.walk(os.path.join(good, cls), followlinks=True)):
            for name in sorted(names):
                if name.lower().endswith((".png", ".jpg", ".jpeg")):
                    samples.append((os.path.join(dirpath, name), label))
    for sub in ("good-rgb", "good-grey"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    with open(os.path.join(root, "good.expect"), "w") as f:
        for n, (path, label) in enumerate(samples):
            with Image.open(path) as img:
                fmt = img.format
                for sub, mode in (("good-rgb", "RGB"), ("good-grey", "L")):
                    conv = img.convert(mode)
                    bands = conv.split()
                    with open(os.path.join(root, sub, "%03d.raw" % n), "wb") as raw:
                        for b in bands:
                            raw.write(b.tobytes())
                f.write("%s %d %d %d %s\n" % (path, label, img.width, img.height, fmt))

    try:
        import torchvision
        ds = torchvision.datasets.ImageFolder(good)
        with open(os.path.join(root, "torchvision.txt"), "w") as f:
            f.write("classes %s\n" % " ".join(ds.classes))
            for path, label in ds.samples:
                f.write("%s %d\n" % (path, label))
    except ImportError:
        pass

    # Bad folders.
    png_bytes = open(os.path.join(good, "Dog", "d1.png"), "rb").read()
    jpeg_bytes = open(os.path.join(good, "zebra", "z.jpg"), "rb").read()
    bad = {
        # A PNG cut inside its image data.
        "bad-png": ("a/ok.png", png_bytes, "a/zz-broken.png", png_bytes[:60]),
        # A PNG whose image data is overwritten (CRC and zlib errors).
        "bad-png-data": ("a/ok.png", png_bytes, "a/zz-garbled.png",
                         png_bytes[:41] + b"\x00" * 20 + png_bytes[61:]),
        # Text named .jpg.
        "bad-jpg": ("a/ok.png", png_bytes, "b/photo.jpg", b"this is not a JPEG file\n"),
        # A JPEG cut short.
        # A JPEG cut inside its scan data.
        "bad-jpg-cut": ("a/ok.png", png_bytes, "b/cut.jpg", jpeg_bytes[:len(jpeg_bytes) * 3 // 4]),
        # A JPEG cut inside its headers.
        "bad-jpg-head": ("a/ok.png", png_bytes, "b/head.jpg", jpeg_bytes[:100]),
    }
    for name, (ok_rel, ok_data, bad_rel, bad_data) in bad.items():
        for rel, data in ((ok_rel, ok_data), (bad_rel, bad_data)):
            path = os.path.join(root, name, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    # A corrupt first image: fails at open.
    os.makedirs(os.path.join(root, "bad-first", "a"), exist_ok=True)
    with open(os.path.join(root, "bad-first", "a", "x.png"), "wb") as f:
        f.write(png_bytes[:60])
    # An empty class folder (holding only a non-image file).
    for rel, data in (("a/ok.png", png_bytes), ("empty/readme.txt", b"nothing here\n")):
        path = os.path.join(root, "empty-class", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    # No class folders at all.
    os.makedirs(os.path.join(root, "no-classes"), exist_ok=True)
    with open(os.path.join(root, "no-classes", "loose.png"), "wb") as f:
        f.write(png_bytes)
    # train/ and val/ splits, all images 6x6 (size=first works).
    for split, n in (("train", 3), ("val", 2)):
        for k in range(n):
            path = os.path.join(root, "splits", split, "c%d" % (k % 2), "%d.png" % k)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            pattern(6, 6, "RGB", 10 * k + len(split)).save(path, "PNG")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("cifar", "images"):
        sys.stderr.write("usage: make-fixtures.py cifar|images DIR\n")
        return 2
    os.makedirs(sys.argv[2], exist_ok=True)
    if sys.argv[1] == "cifar":
        make_cifar(sys.argv[2])
    else:
        make_images(sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
