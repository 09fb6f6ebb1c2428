#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench/peer_gpu.py - PyTorch eager's side of the GPU step benchmark.

Usage: peer_gpu.py [--device cuda|cpu] [--warmup N] [--steps N] [--profile] ROW...
  ROW = MODEL:BATCH:CxHxW:CLASSES:PRECISION[:WARMUP:STEPS],
        e.g. resnet8:1024:1x28x28:10:fp32 (WARMUP, STEPS: the options' values)
  PRECISION = fp32 (strict: TF32 off), tf32, or bf16 (torch.autocast).

What bench/gpu-step does for Tandem, in PyTorch: the same models (mlp and
resnet8 are the definitions of tests/oracle/torch_zoo.py, which match
Tandem's zoo name for name; resnet18 is torchvision's), the same synthetic
batch kept on the device, the same step (zero_grad, forward, mean
cross-entropy, backward, SGD lr 0.01 momentum 0.9 weight decay 5e-4) and
loss.item() every step. cudnn.benchmark is on. On cuda each step is timed
with CUDA events (the host waits in loss.item(), so the events are done by
then); on cpu with the wall clock. WARMUP steps, then the median of STEPS.
Peak memory: torch.cuda.max_memory_allocated (reset before each row), or
-1 on cpu. All rows run in one process (one start of torch and CUDA), each
printing its "RESULT impl=torch ..." line as soon as it is done, so a
timeout keeps the rows already measured. A row that fails prints
"RESULT impl=torch ... error=..." and the others still run.

--profile: after a row's timed steps, one more step under torch.profiler,
and its device kernels by total time ("KERNEL impl=torch" lines: the
row, milliseconds, calls, name), for bench/gpu-profile.
"""
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle"))
import torch_zoo as zoo  # noqa: E402  (the model zoo in PyTorch)


def build(name, c, hw, k):
    if name == "mlp":
        return zoo.Mlp(c, hw, k)
    if name == "lenet":
        return zoo.LeNet(c, hw, k)
    if name == "resnet8":
        return zoo.CifarResNet(c, k, 1)
    if name == "resnet20":
        return zoo.CifarResNet(c, k, 3)
    if name in ("resnet18", "resnet34"):
        import torchvision
        if c != 3:
            raise ValueError("%s takes 3 input channels (torchvision's layout)" % name)
        return getattr(torchvision.models, name)(num_classes=k)
    raise ValueError("unknown model %r" % name)


def set_precision(precision):
    """fp32 is strict IEEE (Tandem's default): TF32 off for cuBLAS and cuDNN."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    if precision not in ("fp32", "tf32", "bf16"):
        raise ValueError("unknown precision %r (fp32, tf32 or bf16)" % precision)


def print_kernels(prof, row, cuda, top=30):
    """The profiled step's device kernels (on the CPU: its ops), by total
    time, one line each."""
    rows = []
    for e in prof.key_averages():
        if not cuda:
            t = e.self_cpu_time_total
        else:  # torch 2 names it device time, 1.13 cuda time
            t = getattr(e, "self_device_time_total", None)
            if t is None:
                t = getattr(e, "self_cuda_time_total", 0)
        if t > 0:
            rows.append((t / 1e3, e.count, e.key))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    print("KERNEL impl=torch row=%s total_ms=%.3f kernels=%d" % (row, total, len(rows)), flush=True)
    for ms, calls, name in rows[:top]:
        print("KERNEL impl=torch row=%s %9.3f ms %5d  %s" % (row, ms, calls, name[:120]), flush=True)


def run_row(dev, row, warmup, steps, profile=False):
    fields = row.split(":")
    if len(fields) == 7:
        warmup, steps = int(fields[5]), int(fields[6])
    elif len(fields) != 5:
        raise ValueError("a row is MODEL:BATCH:CxHxW:CLASSES:PRECISION[:WARMUP:STEPS]")
    name, batch, shape, classes, precision = fields[:5]
    batch, classes = int(batch), int(classes)
    c, h, w = (int(v) for v in shape.split("x"))
    if h != w:
        raise ValueError("square inputs only, got %s" % shape)
    set_precision(precision)
    torch.manual_seed(42)
    model = build(name, c, h, classes).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    gen = torch.Generator(device="cpu").manual_seed(7)
    x = (torch.rand(batch, c, h, w, generator=gen) * 2 - 1).to(dev)
    y = torch.randint(0, classes, (batch,), generator=gen).to(dev)
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    autocast = torch.autocast(device_type=dev.type, dtype=torch.bfloat16,
                              enabled=precision == "bf16")
    times = []
    loss_value = float("nan")
    for s in range(warmup + steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if cuda:
            end.record()
        loss_value = loss.item()  # the host waits here, as Tandem's side does every step
        if s >= warmup:
            times.append(start.elapsed_time(end) / 1e3 if cuda else time.perf_counter() - t0)
    med = statistics.median(times)
    peak = torch.cuda.max_memory_allocated(dev) / 2**20 if cuda else -1.0
    if profile:
        from torch.profiler import ProfilerActivity, profile as torch_profile
        acts = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
        with torch_profile(activities=acts) as prof:
            opt.zero_grad(set_to_none=True)
            with autocast:
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
        print_kernels(prof, row, cuda)
    return ("model=%s batch=%d input=%s precision=%s steps=%d median_ms=%.4f img_per_s=%.1f "
            "peak_mib=%.1f loss=%.4f" % (name, batch, shape, precision, steps, med * 1e3,
                                         batch / med, peak, loss_value))


def main(argv):
    device, warmup, steps, rows, profile = "cuda", 10, 50, [], False
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("--device", "--warmup", "--steps") and i + 1 < len(argv):
            v = argv[i + 1]
            if a == "--device":
                device = v
            elif a == "--warmup":
                warmup = int(v)
            else:
                steps = int(v)
            i += 2
            continue
        if a == "--profile":
            profile = True
            i += 1
            continue
        if a.startswith("-"):
            sys.stderr.write(__doc__.split("\n\n")[0] + "\nunknown option %s\n" % a)
            return 2
        rows.append(a)
        i += 1
    if not rows or steps < 1:
        sys.stderr.write("peer_gpu.py: no ROW given (MODEL:BATCH:CxHxW:CLASSES:PRECISION)\n")
        return 2
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True
        print("# torch %s, CUDA %s, cuDNN %s, %s" % (torch.__version__, torch.version.cuda,
                                                    torch.backends.cudnn.version(),
                                                    torch.cuda.get_device_name(dev)), flush=True)
    else:
        print("# torch %s on %s, %d threads" % (torch.__version__, device,
                                              torch.get_num_threads()), flush=True)
    failed = 0
    for row in rows:
        try:
            result = run_row(dev, row, warmup, steps, profile)
        except Exception as e:  # one bad row must not lose the others
            failed += 1
            result = "row=%s error=%s" % (row, str(e).replace(" ", "_")[:200])
            if dev.type == "cuda":
                torch.cuda.empty_cache()
        print("RESULT impl=torch device=%s %s" % (device, result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
