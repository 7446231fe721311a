"""CPU benchmarks: anytile's cpu backend beside NumPy and numba, measured in the same run.

    make bench-cpu            # or: .venv/bin/python benchmarks/cpu.py [--quick] [--out FILE]

Median wall time of repeated runs after a warm-up; every result is checked against NumPy
before it is timed.  Prints a markdown table (ratio = peer time / anytile time, so > 1 means
anytile is faster)."""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

# numba's OpenMP/TBB workers spin after a parallel region and would steal the cores from
# whatever is timed next; its workqueue layer sleeps instead
os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")

import numpy as np  # noqa: E402

import anytile as at  # noqa: E402
from kernels import add_kernel, layernorm_kernel, matmul_kernel, softmax_kernel  # noqa: E402

try:
    import numba
    from numba import njit, prange
except ImportError:  # numba is optional: its columns then say so
    numba = None


# -- numba peers ------------------------------------------------------------------------------
if numba is not None:
    @njit(parallel=True, fastmath=False, cache=False)
    def numba_add(x, y, out):
        for i in prange(x.size):
            out[i] = x[i] + y[i]

    @njit(parallel=True)
    def numba_softmax(x, out):
        for r in prange(x.shape[0]):
            m = x[r].max()
            e = np.exp(x[r] - m)
            out[r] = e / e.sum()

    @njit(parallel=True)
    def numba_layernorm(x, w, b, eps, out):
        n = x.shape[1]
        for r in prange(x.shape[0]):
            mean = x[r].sum() / n
            d = x[r] - mean
            rstd = 1.0 / np.sqrt((d * d).sum() / n + eps)
            out[r] = d * rstd * w + b


def median_time(fn, repeat: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def check(name: str, got: np.ndarray, ref: np.ndarray, tol: float) -> None:
    err = float(np.max(np.abs(got.astype(np.float64) - ref)))
    if not err <= tol:
        raise AssertionError(f"{name}: max abs error {err:.3g} > {tol}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--out", help="also write the markdown table here")
    args = parser.parse_args()
    dev = at.device("cpu")
    rng = np.random.default_rng(0)
    rep = 5 if args.quick else 15
    rows = []

    def row(kernel, size, t_at, peers):
        rows.append((kernel, size, t_at, peers))
        cells = ", ".join(f"{k} {v * 1e3:.2f} ms ({v / t_at:.2f}x)" if v else f"{k} n/a"
                          for k, v in peers.items())
        print(f"{kernel:<22} {size:<14} anytile {t_at * 1e3:8.2f} ms | {cells}", flush=True)

    # vector add
    n = 2**20 if args.quick else 2**24
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    out = np.full(n, np.nan, np.float32)
    xa, ya, oa = (at.asarray(a, device=dev) for a in (x, y, out))
    grid = (at.cdiv(n, 4096),)
    add_kernel[grid](xa, ya, oa, n, BLOCK=4096)
    check("vector add", oa.numpy(), x.astype(np.float64) + y, 1e-6)
    t_at = median_time(lambda: add_kernel[grid](xa, ya, oa, n, BLOCK=4096), rep)
    t_np = median_time(lambda: np.add(x, y, out=out), rep)
    t_nb = median_time(lambda: numba_add(x, y, out), rep) if numba else None
    row("vector add fp32", f"2^{n.bit_length() - 1}", t_at, {"numpy": t_np, "numba": t_nb})

    # fused softmax
    R, C = (1024, 1024) if args.quick else (4096, 4096)
    xs = rng.standard_normal((R, C), dtype=np.float32)
    outs = np.full((R, C), np.nan, np.float32)
    xsa, osa = at.asarray(xs, device=dev), at.asarray(outs, device=dev)
    softmax_kernel[(R,)](osa, xsa, C, C, C, BLOCK=at.next_power_of_2(C))
    x64 = xs.astype(np.float64)
    ref = np.exp(x64 - x64.max(1, keepdims=True))
    check("softmax", osa.numpy(), ref / ref.sum(1, keepdims=True), 1e-6)

    def np_softmax():
        e = np.exp(xs - xs.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    t_at = median_time(lambda: softmax_kernel[(R,)](osa, xsa, C, C, C, BLOCK=at.next_power_of_2(C)), rep)
    t_np = median_time(np_softmax, rep)
    t_nb = median_time(lambda: numba_softmax(xs, outs), rep) if numba else None
    row("fused softmax fp32", f"{R}x{C}", t_at, {"numpy": t_np, "numba": t_nb})

    # layer norm
    w = rng.standard_normal(C, dtype=np.float32)
    b = rng.standard_normal(C, dtype=np.float32)
    wa, ba = at.asarray(w, device=dev), at.asarray(b, device=dev)
    yl = at.asarray(np.full((R, C), np.nan, np.float32), device=dev)
    layernorm_kernel[(R,)](xsa, yl, wa, ba, C, C, 1e-5, BLOCK=at.next_power_of_2(C))
    refl = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * w + b
    check("layernorm", yl.numpy(), refl, 1e-3)

    def np_layernorm():
        mean = xs.mean(axis=1, keepdims=True)
        d = xs - mean
        return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5) * w + b
    t_at = median_time(lambda: layernorm_kernel[(R,)](xsa, yl, wa, ba, C, C, 1e-5,
                                                      BLOCK=at.next_power_of_2(C)), rep)
    t_np = median_time(np_layernorm, rep)
    t_nb = median_time(lambda: numba_layernorm(xs, w, b, 1e-5, outs), rep) if numba else None
    row("layer norm fp32", f"{R}x{C}", t_at, {"numpy": t_np, "numba": t_nb})

    # matmul
    for S in ((512,) if args.quick else (1024, 2048)):
        a = rng.standard_normal((S, S), dtype=np.float32)
        bm = rng.standard_normal((S, S), dtype=np.float32)
        c = np.full((S, S), np.nan, np.float32)
        aa, bb, cc = (at.asarray(v, device=dev) for v in (a, bm, c))
        BM, BN, BK = 128, 128, 32   # best of a small sweep on this machine (see BENCHMARKS.md)
        g = (S // BM, S // BN)
        matmul_kernel[g](aa, bb, cc, S, S, S, S, S, S, BM=BM, BN=BN, BK=BK)
        check("matmul", cc.numpy(), a.astype(np.float64) @ bm, 1e-2 * np.sqrt(S))
        t_at = median_time(lambda: matmul_kernel[g](aa, bb, cc, S, S, S, S, S, S,
                                                    BM=BM, BN=BN, BK=BK), max(3, rep // 3), 1)
        t_np = median_time(lambda: np.matmul(a, bm, out=c), max(3, rep // 3), 1)
        row("matmul fp32", f"{S}^3", t_at, {"numpy": t_np})

    # compile time of a new kernel (cold: a fresh JITFunction, no cache), and launch overhead
    src_fn = add_kernel.fn
    t0 = time.perf_counter()
    fresh = at.jit(src_fn)
    fresh.warmup(xa, ya, oa, n, BLOCK=1024, grid=(1,))
    t_compile = time.perf_counter() - t0
    nb_compile = None
    if numba:
        t0 = time.perf_counter()
        njit(parallel=True)(numba_add.py_func)(x[:16], y[:16], out[:16])
        nb_compile = time.perf_counter() - t0
    print(f"compile, new vector-add kernel: anytile {t_compile * 1e3:.0f} ms, "
          f"numba {nb_compile * 1e3 if nb_compile else float('nan'):.0f} ms")
    tiny = at.asarray(np.ones(16, np.float32), device=dev)
    add_kernel[(1,)](tiny, tiny, tiny, 16, BLOCK=16)
    t_launch = median_time(lambda: [add_kernel[(1,)](tiny, tiny, tiny, 16, BLOCK=16) for _ in range(100)],
                           rep) / 100
    print(f"launch overhead, tiny kernel: {t_launch * 1e6:.1f} us")

    header = (f"CPU benchmarks, {datetime.date.today()}, {platform.processor() or platform.machine()} "
              f"({dev.info.description}), {os.cpu_count()} cores, numpy {np.__version__}, "
              f"numba {numba.__version__ if numba else 'not installed'}")
    lines = [header, "", "| kernel | size | anytile cpu | numpy | numba | vs numpy | vs numba |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for kernel, size, t_at, peers in rows:
        tn, tb = peers.get("numpy"), peers.get("numba")
        lines.append(f"| {kernel} | {size} | {t_at * 1e3:.2f} ms | {tn * 1e3:.2f} ms | "
                     f"{f'{tb * 1e3:.2f} ms' if tb else 'n/a'} | {tn / t_at:.2f}x | "
                     f"{f'{tb / t_at:.2f}x' if tb else 'n/a'} |")
    lines.append(f"| compile, new vector-add kernel | - | {t_compile * 1e3:.0f} ms | - | "
                 f"{f'{nb_compile * 1e3:.0f} ms' if nb_compile else 'n/a'} | - | - |")
    lines.append(f"| launch overhead, tiny kernel | - | {t_launch * 1e6:.1f} us | - | - | - | - |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
