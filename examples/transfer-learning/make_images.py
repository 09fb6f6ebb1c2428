#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write a small image folder (torchvision's ImageFolder layout) for the
transfer-learning example: DIR/train/<class>/*.png and DIR/val/<class>/*.png.

Standard library only (zlib + struct write the PNGs), so the example needs
neither PyTorch nor Pillow. Each class is a family of patterns: stripes of
a class-dependent angle and frequency in a class-dependent colour, at a
random phase, with noise, so that a convolutional network can tell them
apart but not trivially. `--family` picks another set of patterns (rings
instead of stripes), which the example uses as the "pretraining" task.

usage: make_images.py DIR --classes N --train N --val N [--size PX]
                      [--family stripes|rings] [--seed S]
"""
import argparse
import math
import os
import random
import struct
import zlib


def png(path, width, height, rgb):
    """rgb: bytes of height rows of width RGB pixels."""
    raw = b"".join(b"\x00" + rgb[y * width * 3:(y + 1) * width * 3] for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def pattern(family, label, classes, size, rng):
    angle = math.pi * label / classes + rng.uniform(-0.15, 0.15)
    freq = 2.0 + 1.5 * (label % 3) + rng.uniform(-0.3, 0.3)
    phase = rng.uniform(0, 2 * math.pi)
    hue = [0.5 + 0.5 * math.cos(2 * math.pi * (label / classes + k / 3)) for k in range(3)]
    cx, cy = rng.uniform(0.3, 0.7) * size, rng.uniform(0.3, 0.7) * size
    ca, sa = math.cos(angle), math.sin(angle)
    out = bytearray(size * size * 3)
    for y in range(size):
        for x in range(size):
            if family == "rings":
                t = math.hypot(x - cx, y - cy) / size
            else:
                t = ((x - cx) * ca + (y - cy) * sa) / size
            v = 0.5 + 0.5 * math.sin(2 * math.pi * freq * t + phase)
            i = (y * size + x) * 3
            for k in range(3):
                c = 255 * (0.15 + 0.7 * v * hue[k]) + rng.gauss(0, 18)
                out[i + k] = min(255, max(0, int(c)))
    return bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--classes", type=int, default=5)
    ap.add_argument("--train", type=int, default=40)
    ap.add_argument("--val", type=int, default=10)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--family", choices=["stripes", "rings"], default="stripes")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    for split, n in (("train", a.train), ("val", a.val)):
        for c in range(a.classes):
            d = os.path.join(a.dir, split, "class%02d" % c)
            os.makedirs(d, exist_ok=True)
            for i in range(n):
                png(os.path.join(d, "%04d.png" % i), a.size, a.size,
                    pattern(a.family, c, a.classes, a.size, rng))
    print("%s: %d classes, %d + %d images of %dx%d (%s)"
          % (a.dir, a.classes, a.classes * a.train, a.classes * a.val, a.size, a.size, a.family))


if __name__ == "__main__":
    main()
