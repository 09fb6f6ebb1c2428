#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/fuzz/make-corpus.py - writes the seed corpus of each fuzz target
(tests/fuzz/corpus/<target>/): a handful of small valid inputs each, built
from the formats the tests already use (the idx files of fuzz-idx.c, the
CIFAR record layout, safetensors as tests/make-fixtures.py writes them,
the pipelines and parameter strings of the tests, the example INI file,
store frames as core/store-wire.h describes them, the cpu backend's
tuning-cache files). `make fuzz-run` starts
each target from these; the committed files are this script's output,
plus plot-log/ (short `tandem train --log-file` logs) and pth/ (written by
tests/pth-make.py style torch.save calls), which need a build or torch.

Usage: make-corpus.py CORPUS_DIR
"""
import gzip
import json
import os
import struct
import sys
import zlib


def put(root, target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, off, blob = {}, 0, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        blob += data
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def f32(*values):
    return struct.pack(f"<{len(values)}f", *values)


def idx_images(n, h, w):
    return struct.pack(">BBBBIII", 0, 0, 8, 3, n, h, w) + bytes((i * 7) % 256 for i in range(n * h * w))


def idx_labels(n):
    return struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(i % 10 for i in range(n))


def png(width, height, channels):
    color = {1: 0, 3: 2, 4: 6}[channels]
    rows = b"".join(b"\0" + bytes((x * 31 + y * 17 + c) % 256 for x in range(width) for c in range(channels))
                    for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def frame(op, *fields):
    body = bytes([op, len(fields)]) + b"".join(struct.pack("<I", len(f)) + f for f in fields)
    return struct.pack("<I", len(body)) + body


def main(root):
    # safetensors: f32 and i64 tensors, with and without metadata.
    put(root, "safetensors", "one-f32", safetensors([("w", "F32", [2, 2], f32(1, 2, 3, 4))]))
    put(root, "safetensors", "two-meta", safetensors(
        [("fc.weight", "F32", [2, 3], f32(*range(6))), ("fc.bias", "F32", [2], f32(0.5, -0.5))],
        {"format": "pt"}))
    put(root, "safetensors", "i64-scalar", safetensors([("step", "I64", [], struct.pack("<q", 7))]))
    put(root, "safetensors", "empty", safetensors([]))

    # checkpoint: a safetensors file with the checkpoint metadata and CRCs.
    def checkpoint(tensors, extra=None):
        sums = {n: "%08x" % zlib.crc32(d) for n, _, _, d in tensors}
        meta = {"format": "tandem-checkpoint", "format_version": "1",
                "checksums": json.dumps(sums, separators=(",", ":"))}
        meta.update(extra or {})
        return safetensors(tensors, meta)
    put(root, "checkpoint", "small", checkpoint([("model.fc.weight", "F32", [2, 2], f32(1, 2, 3, 4))]))
    put(root, "checkpoint", "with-state", checkpoint(
        [("model.fc.weight", "F32", [2], f32(1, 2)), ("optim.fc.weight.momentum", "F32", [2], f32(0, 1)),
         ("trainer.step", "I64", [1], struct.pack("<q", 3))], {"step": "3"}))
    put(root, "checkpoint", "bad-crc", safetensors(
        [("w", "F32", [1], f32(1))],
        {"format": "tandem-checkpoint", "format_version": "1", "checksums": '{"w":"00000000"}'}))

    # idx: the first byte picks the file (images, labels, raw or gzip; bit 2
    # the whole-file path), the rest is it.
    put(root, "idx", "images-raw", b"\x00" + idx_images(3, 2, 2))
    put(root, "idx", "labels-raw", b"\x01" + idx_labels(3))
    put(root, "idx", "images-gz", b"\x02" + gzip.compress(idx_images(3, 2, 2), mtime=0))
    put(root, "idx", "labels-gz-prepare", b"\x07" + gzip.compress(idx_labels(3), mtime=0))
    put(root, "idx", "images-28", b"\x04" + idx_images(2, 28, 28))

    # cifar: the first byte picks the file, then whole records.
    rec10 = bytes([3]) + bytes((i * 13) % 256 for i in range(3072))
    rec100 = bytes([1, 42]) + bytes((i * 5) % 256 for i in range(3072))
    put(root, "cifar", "train-one", b"\x00" + rec10)
    put(root, "cifar", "test-two", b"\x01" + rec10 + rec10)
    put(root, "cifar", "c100-fine", b"\x02" + rec100)
    put(root, "cifar", "c100-coarse", b"\x03" + rec100)

    # png: small images of each channel count (JPEG goes through the same
    # reader by content sniffing).
    put(root, "png", "grey-4x3.png", png(4, 3, 1))
    put(root, "png", "rgb-5x5.png", png(5, 5, 3))
    put(root, "png", "rgba-2x7.png", png(2, 7, 4))

    # params: the first byte picks strategy, optimizer, dataset, transform
    # or the all-types list.
    for i, text in enumerate(["\x00ddp bucket-mb=25", "\x01sgd momentum=0.9 nesterov=true",
                              "\x02imagefolder path='/a b' size=first", "\x03normalize mean=0.5 std=0.2",
                              "\x04" "5 x=0.25 b=true c=b 1,2,3 f=1,2 s=text"]):
        put(root, "params", f"seed-{i}", text)

    # pipeline: transform pipelines as the tests write them.
    for i, text in enumerate(["pad 4 | random-crop 28 | hflip | rotate 15 | normalize mean=0.5 std=0.2",
                              "random-crop 28 pad=4 | hflip | rotate 15", "resize | center-crop",
                              "random-resized-crop 8 | hflip | normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25"]):
        put(root, "pipeline", f"seed-{i}", text)

    # config: INI files (the first line is also tried as key=value).
    put(root, "config", "minimal.ini", "[optim]\nlr = 0.1\n")
    put(root, "config", "key-value.ini", "optim.lr=0.05\n[train]\nepochs = 2\nseed = 3\n")
    put(root, "config", "sections.ini",
        "[model]\nname = mlp\nin_channels = 0\n[data]\ndataset = fashion-mnist\nlimit = 100\n"
        "batch_size = 64\nnormalize = true\n[optim]\nname = sgd\nmomentum = 0.9\nschedule = cosine\n"
        "[train]\ndevice = auto\nstrategy = single\naccumulate = 2\neval = false\n")

    # cpu-tune: TDM_CPU_TUNE_CACHE files, made on the machine fuzz-cpu-tune.c
    # pretends to be (CHOICE<tab>CANDIDATES<tab>SHAPE lines).
    head = "tandem-cpu-tune 2\ncpu fuzz cpu\nisa avx2\nonednn 2.6.0\n"
    put(root, "cpu-tune", "empty", head)
    put(root, "cpu-tune", "choices", head
        + "gemm\tonednn,gemm\tconv_fwd n32 c512 h2 w2 o512 k3x3 s1x1 p1x1 d1x1 g1 t2\n\n"
        + "onednn_wino\tonednn,onednn_wino\tconv_bwd_data n32 c64 h16 w16 o64 k3x3 t2\n"
        + "onednn\tonednn,stem\tconv_fwd n32 c3 h64 w64 o64 k7x7 s2x2 p3x3 t2\n")
    put(root, "cpu-tune", "format-1", "tandem-cpu-tune 1\ncpu x\nisa avx2\nonednn 2.6.0\n"
        "onednn\tconv_fwd n1\n")

    # store: requests after the handshake (the target adds it), one frame each.
    OP_SET, OP_GET, OP_WAIT, OP_ADD, OP_CAS, OP_DELETE, OP_CHECK = range(2, 9)
    put(root, "store", "set-get", frame(OP_SET, b"k", b"v") + frame(OP_GET, b"k"))
    put(root, "store", "add", frame(OP_ADD, b"n", struct.pack("<q", 5)) + frame(OP_ADD, b"n", struct.pack("<q", -2)))
    put(root, "store", "cas-delete", frame(OP_SET, b"a", b"1") + frame(OP_CAS, b"a", b"1", b"2")
        + frame(OP_DELETE, b"a") + frame(OP_CHECK, b"a"))
    put(root, "store", "wait", frame(OP_WAIT, b"x", b"y") + frame(OP_SET, b"x", b"") + frame(OP_GET, b"y"))


main(sys.argv[1])
