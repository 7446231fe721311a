"""anytile's OpenCL backend beside its peers, measured in the same run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/opencl.py [--device opencl:0]

On an OpenCL CPU device (PoCL) the peers are NumPy (``out=`` forms, preallocated) and
anytile's cpu backend; on an OpenCL GPU, anytile's nvidia backend (``cuda:0``).  Vector add,
row softmax 4096x4096 and layer norm 4096x4096 in fp32, the same kernel sources everywhere
(``kernels.py``).  Every result is checked against NumPy in float64 before it is timed.
anytile launches are queued back to back and timed to the end of the queue; the sides take
turns, ``--repeat`` batches each after a warm-up, and the medians are compared.  Prints a markdown table (ratio = peer time / OpenCL
time: above 1, OpenCL is faster)."""
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
from kernels import add_kernel, layernorm_kernel, softmax_kernel  # noqa: E402

def timed(sides: dict, repeat: int, batch: int) -> dict:
    """Median seconds of one run per side (``name -> (run, sync)``): ``batch`` runs then
    ``sync()``, the sides taking turns ``repeat`` times (a noisy machine slows all alike)."""
    for run, sync in sides.values():
        run()
        sync()
    times: dict = {name: [] for name in sides}
    for _ in range(repeat):
        for name, (run, sync) in sides.items():
            t0 = time.perf_counter()
            for _ in range(batch):
                run()
            sync()
            times[name].append((time.perf_counter() - t0) / batch)
    return {name: statistics.median(t) for name, t in times.items()}


def check(name: str, got: np.ndarray, ref: np.ndarray, tol: float) -> None:
    err = float(np.max(np.abs(got.astype(np.float64) - ref)))
    if not err <= tol:
        raise AssertionError(f"{name}: max abs error {err:.3g} > {tol}")


def softmax_ref(x: np.ndarray) -> np.ndarray:
    w = x.astype(np.float64)
    e = np.exp(w - w.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def layernorm_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    return (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + eps) * w + b


class NumpyPeer:
    """The kernels in NumPy, into preallocated outputs."""

    def __init__(self, rows: int, cols: int) -> None:
        self.tmp = np.empty((rows, cols), np.float32)
        self.col = np.empty((rows, 1), np.float32)

    def softmax(self, x: np.ndarray, out: np.ndarray) -> None:
        np.max(x, axis=1, keepdims=True, out=self.col)
        np.subtract(x, self.col, out=out)
        np.exp(out, out=out)
        np.sum(out, axis=1, keepdims=True, out=self.col)
        np.divide(out, self.col, out=out)

    def layernorm(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float,
                  out: np.ndarray) -> None:
        np.mean(x, axis=1, keepdims=True, out=self.col)
        np.subtract(x, self.col, out=out)
        np.multiply(out, out, out=self.tmp)
        np.mean(self.tmp, axis=1, keepdims=True, out=self.col)
        np.add(self.col, eps, out=self.col)
        np.sqrt(self.col, out=self.col)
        np.divide(out, self.col, out=out)
        np.multiply(out, w, out=out)
        np.add(out, b, out=out)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="opencl:0")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--out", help="also write the markdown table here")
    args = parser.parse_args()
    dev = at.device(args.device)
    on_cpu = dev.properties.get("arch", "").startswith("cpu")
    peer_name = "numpy" if on_cpu else "nvidia"
    peer_dev = None
    if on_cpu:
        peer_dev = next((d for d in at.devices() if d.name == "cpu:0"), None)
    else:
        peer_dev = next((d for d in at.devices() if d.name == "cuda:0"), None)
    rng = np.random.default_rng(0)
    n = 2**24 if on_cpu else 2**26
    rows = cols = 4096
    warps = {} if on_cpu else {"num_warps": 8}
    eps = 1e-5
    results = []

    def sides(kernel_name: str, size: str, nbytes: int, make_run, ref, tol, numpy_run=None):
        """Time the kernel on the OpenCL device, on the anytile peer device and in NumPy."""
        runs = {}
        for label, device in (("opencl", dev), ("anytile " + (peer_dev.name if peer_dev else "-"), peer_dev)):
            if device is None:
                continue
            run, result = make_run(device)
            run()
            check(f"{kernel_name} on {device}", result(), ref, tol)
            runs[label] = (run, device.synchronize)
        if numpy_run is not None:
            check(f"{kernel_name} in NumPy", numpy_run(), ref, tol)
            runs["numpy"] = (numpy_run, lambda: None)
        row = {"kernel": kernel_name, "size": size, "nbytes": nbytes}
        row.update(timed(runs, args.repeat, 3 if on_cpu else 20))
        results.append(row)
        shown = ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in row.items()
                          if k not in ("kernel", "size", "nbytes"))
        print(f"{kernel_name:<12} {size:<10} {shown}", flush=True)

    # vector add
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    z = np.full(n, np.nan, np.float32)
    block = 4096 if on_cpu else 1024

    def add_on(device):
        xa, ya = at.asarray(x, device=device), at.asarray(y, device=device)
        oa = at.asarray(np.full(n, np.nan, np.float32), device=device)
        grid = (at.cdiv(n, block),)
        return (lambda: add_kernel[grid](xa, ya, oa, n, BLOCK=block, **warps)), oa.numpy

    sides("vector add", f"2^{n.bit_length() - 1}", 3 * 4 * n, add_on, x.astype(np.float64) + y,
          1e-6, (lambda: (np.add(x, y, out=z), z)[1]) if on_cpu else None)

    # softmax
    xs = rng.standard_normal((rows, cols), dtype=np.float32)
    peer = NumpyPeer(rows, cols)
    out_np = np.empty_like(xs)

    def softmax_on(device):
        xa = at.asarray(xs, device=device)
        oa = at.asarray(np.full((rows, cols), np.nan, np.float32), device=device)
        return (lambda: softmax_kernel[(rows,)](oa, xa, cols, cols, cols, BLOCK=cols, **warps)), oa.numpy

    sides("softmax", f"{rows}x{cols}", 2 * 4 * rows * cols, softmax_on, softmax_ref(xs), 1e-6,
          (lambda: (peer.softmax(xs, out_np), out_np)[1]) if on_cpu else None)

    # layer norm
    w, b = rng.standard_normal(cols, dtype=np.float32), rng.standard_normal(cols, dtype=np.float32)

    def layernorm_on(device):
        xa, wa, ba = (at.asarray(v, device=device) for v in (xs, w, b))
        ya = at.asarray(np.full((rows, cols), np.nan, np.float32), device=device)
        return (lambda: layernorm_kernel[(rows,)](xa, ya, wa, ba, cols, cols, eps, BLOCK=cols,
                                                  **warps)), ya.numpy

    sides("layer norm", f"{rows}x{cols}", 2 * 4 * rows * cols, layernorm_on,
          layernorm_ref(xs, w, b, eps), 1e-3,
          (lambda: (peer.layernorm(xs, w, b, eps, out_np), out_np)[1]) if on_cpu else None)

    table = render(results, dev, peer_dev, peer_name, on_cpu, args.repeat)
    print("\n" + table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


def render(results: list, dev, peer_dev, peer_name: str, on_cpu: bool, repeat: int) -> str:
    peer_label = "anytile " + peer_dev.name if peer_dev else None
    header = (f"OpenCL benchmarks, {datetime.date.today()}, {dev.name}: {dev.info.description}; "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
              f"numpy {np.__version__}; median of {repeat} batches")
    cols = ["kernel", "size", "opencl", "GB/s"]
    if on_cpu:
        cols += ["numpy", "vs numpy"]
    if peer_label:
        cols += [peer_label, f"vs {peer_dev.name}"]
    lines = [header, "", "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for r in results:
        t = r["opencl"]
        cells = [r["kernel"], r["size"], f"{t * 1e3:.3f} ms", f"{r['nbytes'] / t / 1e9:.1f}"]
        if on_cpu:
            cells += [f"{r['numpy'] * 1e3:.3f} ms", f"{r['numpy'] / t:.2f}x"]
        if peer_label:
            p = r.get(peer_label)
            cells += [f"{p * 1e3:.3f} ms" if p else "n/a", f"{p / t:.2f}x" if p else "n/a"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
