#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench/ncu_step.py - the kernels of the last training step in an ncu log.

Usage: ncu_step.py [--row ROW] [--top N] CSV

CSV is what `ncu --csv --metrics gpu__time_duration.sum --log-file CSV`
wrote for a run of bench/gpu-step (bench/gpu-profile makes it): one line per
kernel launch, in launch order. A step ends with the optimizer's update, the
last kernel the run launched, so the last step is every launch after the
previous run of that kernel's name. Its kernels are summed by name (the
template arguments and parameter list cut off) and printed by total time as
"KERNEL impl=tandem" lines, the same form as bench/peer_gpu.py --profile.
"""
import csv
import re
import sys


def read_launches(path):
    """(name, milliseconds) of every launch in the log, in order."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    launches = []
    for rec in csv.DictReader(lines):
        if rec.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(rec["Metric Value"].replace(",", ""))
        unit = rec.get("Metric Unit", "ns")
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0,
                 "msecond": 1.0}.get(unit, 1e-6)
        launches.append((rec["Kernel Name"], value * scale))
    return launches


def last_step(launches):
    """The launches after the previous run of the last launch's name."""
    if not launches:
        return []
    last = launches[-1][0]
    i = len(launches) - 1
    while i >= 0 and launches[i][0] == last:
        i -= 1
    while i >= 0 and launches[i][0] != last:
        i -= 1
    return launches[i + 1:]


def short_name(name):
    """The kernel's name without its parameter list (and template tail)."""
    cut = re.sub(r"\(.*$", "", name)
    return cut[:120]


def main(argv):
    row, top, path = "-", 30, None
    i = 1
    while i < len(argv):
        if argv[i] in ("--row", "--top") and i + 1 < len(argv):
            if argv[i] == "--row":
                row = argv[i + 1]
            else:
                top = int(argv[i + 1])
            i += 2
            continue
        path = argv[i]
        i += 1
    if path is None:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    launches = read_launches(path)
    step = last_step(launches)
    if not step:
        print("KERNEL impl=tandem row=%s error=no_kernel_in_%s" % (row, path))
        return 1
    sums = {}
    for name, ms in step:
        key = short_name(name)
        total, calls = sums.get(key, (0.0, 0))
        sums[key] = (total + ms, calls + 1)
    print("KERNEL impl=tandem row=%s total_ms=%.3f kernels=%d launches_in_log=%d"
          % (row, sum(ms for _, ms in step), len(step), len(launches)))
    for key, (ms, calls) in sorted(sums.items(), key=lambda kv: -kv[1][0])[:top]:
        print("KERNEL impl=tandem row=%s %9.3f ms %5d  %s" % (row, ms, calls, key))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
