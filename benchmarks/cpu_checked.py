"""What the cpu backend's checked mode (``debug=True``: bounds checks on every load, store
and atomic, integer division by zero) costs, kernel by kernel.

    .venv/bin/python benchmarks/cpu_checked.py [--quick] [--rounds N] [--out FILE]

Each kernel runs unchecked and checked on the same arrays (results compared first, then
timed); the two are timed in alternation, ``--rounds`` times, each round the median of
several runs, so a noisy machine shows as the range of the per-round ratios.  Two clocks:
wall time, and the process's CPU time (all threads), which other processes on a shared
machine disturb less.  Sizes: the usual ones (``benchmarks/cpu.py``: 64 MiB arrays, memory
bound) and small ones that stay in cache (where the checks' instructions show).  Prints a
markdown table: median times and checked / unchecked ratios (median, min-max)."""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import statistics
import sys
import time

import numpy as np

import anytile as at
from kernels import add_kernel, layernorm_kernel, matmul_kernel, softmax_kernel


def median_times(fn, repeat: int) -> tuple[float, float]:
    """Median wall time and median CPU time (all threads) of ``repeat`` calls."""
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def workloads(quick: bool, dev) -> list:
    """``(name, size, launch(debug), output array, repeats)`` per benchmark."""
    rng = np.random.default_rng(0)

    def array(*shape):
        return at.asarray(rng.standard_normal(shape, dtype=np.float32), device=dev)

    def empty(*shape):
        return at.empty(shape, np.float32, device=dev)
    out = []
    for n, reps in ((2**20 if quick else 2**24, 15), (2**16, 200)):
        x, y, z = array(n), array(n), empty(n)
        out.append(("vector add fp32", f"2^{n.bit_length() - 1}",
                    lambda d, x=x, y=y, z=z, n=n: add_kernel[(at.cdiv(n, 4096),)](
                        x, y, z, n, BLOCK=4096, debug=d), z, reps))
    for rows, reps in ((1024 if quick else 4096, 15), (64, 200)):
        cols = 1024 if quick or rows == 64 else 4096
        block = at.next_power_of_2(cols)
        xs, ys, yl, w, b = array(rows, cols), empty(rows, cols), empty(rows, cols), \
            array(cols), array(cols)
        out.append(("fused softmax fp32", f"{rows}x{cols}",
                    lambda d, xs=xs, ys=ys, r=rows, c=cols, bl=block: softmax_kernel[(r,)](
                        ys, xs, c, c, c, BLOCK=bl, debug=d), ys, reps))
        out.append(("layer norm fp32", f"{rows}x{cols}",
                    lambda d, xs=xs, yl=yl, w=w, b=b, r=rows, c=cols, bl=block:
                    layernorm_kernel[(r,)](xs, yl, w, b, c, c, 1e-5, BLOCK=bl, debug=d),
                    yl, reps))
    for s, reps in ((512 if quick else 1024, 5), (256, 40)):
        a, bm, c = array(s, s), array(s, s), empty(s, s)
        out.append(("matmul fp32", f"{s}^3",
                    lambda d, a=a, bm=bm, c=c, s=s: matmul_kernel[(s // 128, s // 128)](
                        a, bm, c, s, s, s, s, s, s, BM=128, BN=128, BK=32, debug=d), c, reps))
    ones, tiny = array(16), empty(16)
    out.append(("launch, tiny vector add", "16",
                lambda d: [add_kernel[(1,)](ones, ones, tiny, 16, BLOCK=16, debug=d)
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
            offs.append(median_times(lambda: launch(False), repeat))
            ons.append(median_times(lambda: launch(True), repeat))
        scale, unit = (1e6 / 100, "us") if name.startswith("launch") else (1e3, "ms")
        cells = [name, size]
        for clock in (0, 1):
            ratios = [on[clock] / off[clock] for on, off in zip(ons, offs)]
            cells += [f"{statistics.median(o[clock] for o in offs) * scale:.2f} {unit}",
                      f"{statistics.median(o[clock] for o in ons) * scale:.2f} {unit}",
                      f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"]
        rows.append(cells)
        print("  ".join(cells), flush=True)
    header = (f"cpu checked mode, {datetime.date.today()}, "
              f"{platform.processor() or platform.machine()} ({dev.info.description}), "
              f"{os.cpu_count()} cores, {args.rounds} alternating rounds")
    lines = [header, "", "| kernel | size | wall: unchecked | checked | checked / unchecked | "
             "CPU time: unchecked | checked | checked / unchecked |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    print("\n" + "\n".join(lines))
    if args.out:
        pathlib.Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
