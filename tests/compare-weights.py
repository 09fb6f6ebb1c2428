#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""tests/compare-weights.py - compare two safetensors files tensor by tensor.

Usage: compare-weights.py A B [TOL]

For every tensor of A (B must hold the same names, dtypes and shapes) it
computes the relative difference ||a - b||_2 / max(||b||_2, 1e-30) and
prints the largest with its tensor's name. Exit status 0 when every tensor
is within TOL (default 1e-5), 1 otherwise, 2 on malformed input. Only the
Python standard library is used (f32 tensors only), so the strategy tests
do not need torch.
"""
import json
import math
import struct
import sys
from array import array


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header of {n} bytes runs past the end")
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {info['dtype']}, only F32 is compared")
        lo, hi = info["data_offsets"]
        values = array("f")
        values.frombytes(data[base + lo:base + hi])
        if sys.byteorder != "little":
            values.byteswap()
        out[name] = (tuple(info["shape"]), values)
    return out


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    tol = float(sys.argv[3]) if len(sys.argv) == 4 else 1e-5
    try:
        a, b = load(sys.argv[1]), load(sys.argv[2])
    except (OSError, ValueError, KeyError) as e:
        print(f"compare-weights: {e}", file=sys.stderr)
        return 2
    if set(a) != set(b):
        print(f"compare-weights: tensor names differ: {sorted(set(a) ^ set(b))}", file=sys.stderr)
        return 1
    worst, worst_name = 0.0, None
    for name in sorted(a):
        sa, va = a[name]
        sb, vb = b[name]
        if sa != sb:
            print(f"compare-weights: {name}: shape {sa} against {sb}", file=sys.stderr)
            return 1
        diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(va, vb)))
        norm = math.sqrt(sum(y * y for y in vb))
        rel = diff / max(norm, 1e-30) if norm > 0 or diff > 0 else 0.0
        if not math.isfinite(rel) or rel > worst or worst_name is None:
            worst, worst_name = rel, name
        if not math.isfinite(rel):
            break
    ok = math.isfinite(worst) and worst <= tol
    print(f"largest relative difference {worst:.3g} ({worst_name}), tolerance {tol:g}: "
          f"{'ok' if ok else 'TOO LARGE'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
