"""What checked mode (``debug=True``: every load, store and atomic tested against its
argument's memory, ``anytile.codegen.bounds_checks``) costs on a GPU, kernel by kernel.

    python benchmarks/gpu_checked.py [--device cuda:0] [--rounds N] [--out FILE]

Each kernel runs unchecked and checked on the same arrays (results compared first), timed
in alternation ``--rounds`` times with ``at.testing.do_bench`` (device events, median), so
noise shows as the range of the per-round ratios.  A checked launch also waits for the
kernel and reads its error word, as a ``device_assert`` build does: the launch row shows
that cost.  Prints a markdown table."""
from __future__ import annotations

import argparse
import datetime
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import anytile as at  # noqa: E402
from kernels import add_kernel, layernorm_kernel, matmul_kernel, softmax_kernel  # noqa: E402


def workloads(dev) -> list:
    """``(name, size, launch(debug), output array)`` per benchmark."""
    rng = np.random.default_rng(0)

    def array(*shape, dtype=np.float32):
        return at.asarray(rng.standard_normal(shape).astype(dtype), device=dev)

    def empty(*shape, dtype=np.float32):
        return at.empty(shape, dtype, device=dev)
    out = []
    n = 2**26
    x, y, z = array(n), array(n), empty(n)
    out.append(("vector add fp32", "2^26", lambda d: add_kernel[(at.cdiv(n, 4096),)](
        x, y, z, n, BLOCK=4096, debug=d), z))
    rows, cols = 4096, 4096
    xs, ys, yl, w, b = array(rows, cols), empty(rows, cols), empty(rows, cols), array(cols), \
        array(cols)
    out.append(("fused softmax fp32", f"{rows}x{cols}", lambda d: softmax_kernel[(rows,)](
        ys, xs, cols, cols, cols, BLOCK=cols, num_warps=8, debug=d), ys))
    out.append(("layer norm fp32", f"{rows}x{cols}", lambda d: layernorm_kernel[(rows,)](
        xs, yl, w, b, cols, cols, 1e-5, BLOCK=cols, num_warps=8, debug=d), yl))
    s = 4096
    a, bm, c = array(s, s, dtype=np.float16), array(s, s, dtype=np.float16), empty(s, s)
    out.append(("matmul fp16", f"{s}^3", lambda d: matmul_kernel[(s // 128, s // 128)](
        a, bm, c, s, s, s, s, s, s, BM=128, BN=128, BK=64, num_warps=8, num_stages=3,
        debug=d), c))
    return out


def launch_cost(dev, debug: bool, count: int = 2000) -> float:
    """Microseconds per launch of a 16-element vector add, launched back to back."""
    ones, tiny = at.asarray(np.ones(16, np.float32), device=dev), at.empty((16,), np.float32,
                                                                            device=dev)
    add_kernel[(1,)](ones, ones, tiny, 16, BLOCK=16, debug=debug)
    dev.synchronize()
    t0 = time.perf_counter()
    for _ in range(count):
        add_kernel[(1,)](ones, ones, tiny, 16, BLOCK=16, debug=debug)
    dev.synchronize()
    return (time.perf_counter() - t0) / count * 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    dev = at.device(args.device)
    rows = []
    for name, size, launch, result in workloads(dev):
        launch(True)
        checked = result.numpy().copy()
        launch(False)
        # the checks' extra operations may change how a reduction is laid out (its summation
        # order), so the two agree to rounding, not bit for bit
        if not np.allclose(checked, result.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True):
            raise AssertionError(f"{name}: checked and unchecked results differ by "
                                 f"{np.nanmax(np.abs(checked - result.numpy())):.3g}")
        offs, ons = [], []
        for _ in range(args.rounds):
            offs.append(at.testing.do_bench(lambda: launch(False)))
            ons.append(at.testing.do_bench(lambda: launch(True)))
        ratios = [on / off for on, off in zip(ons, offs)]
        cells = [name, size, f"{statistics.median(offs):.3f} ms", f"{statistics.median(ons):.3f} ms",
                 f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"]
        rows.append(cells)
        print("  ".join(cells), flush=True)
    offs = [launch_cost(dev, False) for _ in range(args.rounds)]
    ons = [launch_cost(dev, True) for _ in range(args.rounds)]
    ratios = [on / off for on, off in zip(ons, offs)]
    rows.append(["launch, tiny vector add", "16", f"{statistics.median(offs):.1f} us",
                 f"{statistics.median(ons):.1f} us",
                 f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"])
    print("  ".join(rows[-1]), flush=True)
    header = (f"GPU checked mode, {datetime.date.today()}, {dev.info.description}, "
              f"{args.rounds} alternating rounds (do_bench medians)")
    lines = [header, "", "| kernel | size | unchecked | checked | checked / unchecked |",
             "| --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(c) + " |" for c in rows]
    print("\n" + "\n".join(lines))
    if args.out:
        pathlib.Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
