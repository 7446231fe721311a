"""What the cpu backend's checked mode (``debug=True``: bounds checks on every load, store
and atomic, integer division by zero) costs, kernel by kernel.

    .venv/bin/python benchmarks/cpu_checked.py [--quick] [--rounds N] [--out FILE]

Each kernel runs unchecked and checked on the same arrays (results compared first, then
timed); the two are timed in alternation, ``--rounds`` times, each round the median of
several runs, so a noisy machine shows as the range of the per-round ratios.  Prints a
markdown table: median times and the checked / unchecked ratio (median, min-max)."""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

import numpy as np

import anytile as at
from kernels import add_kernel, layernorm_kernel, matmul_kernel, softmax_kernel


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def workloads(quick: bool, dev) -> list:
    """``(name, size, launch(debug), output array, repeats)`` per benchmark."""
    rng = np.random.default_rng(0)
    out = []
    n = 2**20 if quick else 2**24
    x, y = (at.asarray(rng.standard_normal(n, dtype=np.float32), device=dev) for _ in range(2))
    z = at.empty((n,), np.float32, device=dev)
    out.append(("vector add fp32", f"2^{n.bit_length() - 1}",
                lambda d: add_kernel[(at.cdiv(n, 4096),)](x, y, z, n, BLOCK=4096, debug=d), z, 15))
    R = C = 1024 if quick else 4096
    B = at.next_power_of_2(C)
    xs = at.asarray(rng.standard_normal((R, C), dtype=np.float32), device=dev)
    ys = at.empty((R, C), np.float32, device=dev)
    out.append(("fused softmax fp32", f"{R}x{C}",
                lambda d: softmax_kernel[(R,)](ys, xs, C, C, C, BLOCK=B, debug=d), ys, 15))
    w, b = (at.asarray(rng.standard_normal(C, dtype=np.float32), device=dev) for _ in range(2))
    yl = at.empty((R, C), np.float32, device=dev)
    out.append(("layer norm fp32", f"{R}x{C}",
                lambda d: layernorm_kernel[(R,)](xs, yl, w, b, C, C, 1e-5, BLOCK=B, debug=d),
                yl, 15))
    S = 512 if quick else 1024
    a, bm = (at.asarray(rng.standard_normal((S, S), dtype=np.float32), device=dev)
             for _ in range(2))
    c = at.empty((S, S), np.float32, device=dev)
    out.append(("matmul fp32", f"{S}^3",
                lambda d: matmul_kernel[(S // 128, S // 128)](a, bm, c, S, S, S, S, S, S, BM=128,
                                                               BN=128, BK=32, debug=d), c, 5))
    tiny = at.asarray(np.ones(16, np.float32), device=dev)
    out.append(("launch, tiny vector add", "16",
                lambda d: [add_kernel[(1,)](tiny, tiny, tiny, 16, BLOCK=16, debug=d)
                           for _ in range(100)], tiny, 15))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per kernel")
    parser.add_argument("--out", help="also write the markdown table here")
    args = parser.parse_args()
    dev = at.device("cpu")
    rows = []
    for name, size, launch, result, repeat in workloads(args.quick, dev):
        launch(True)
        checked = result.numpy().copy()
        launch(False)
        if not np.array_equal(checked, result.numpy(), equal_nan=True):
            raise AssertionError(f"{name}: checked and unchecked results differ")
        offs, ons = [], []
        for _ in range(args.rounds):
            offs.append(median_time(lambda: launch(False), repeat))
            ons.append(median_time(lambda: launch(True), repeat))
        ratios = [on / off for on, off in zip(ons, offs)]
        scale, unit = (1e6 / 100, "us") if name.startswith("launch") else (1e3, "ms")
        rows.append((name, size, statistics.median(offs) * scale, statistics.median(ons) * scale,
                     unit, statistics.median(ratios), min(ratios), max(ratios)))
        print(f"{name:<24} {size:<10} unchecked {rows[-1][2]:8.2f} {unit}  checked "
              f"{rows[-1][3]:8.2f} {unit}  ratio {rows[-1][5]:.2f} "
              f"({rows[-1][6]:.2f}-{rows[-1][7]:.2f})", flush=True)
    header = (f"cpu checked mode, {datetime.date.today()}, "
              f"{platform.processor() or platform.machine()} ({dev.info.description}), "
              f"{os.cpu_count()} cores, {args.rounds} alternating rounds")
    lines = [header, "", "| kernel | size | unchecked | checked (`debug=True`) | "
             "checked / unchecked, median (range) |", "| --- | --- | --- | --- | --- |"]
    for name, size, off, on, unit, ratio, lo, hi in rows:
        lines.append(f"| {name} | {size} | {off:.2f} {unit} | {on:.2f} {unit} | "
                     f"{ratio:.2f}x ({lo:.2f}-{hi:.2f}) |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
