"""anytile's NVIDIA backend next to Triton and torch on one GPU.  Run through benchmarks/gpu.sh.

Each benchmark checks anytile's (and Triton's) result against torch first, then times with
``triton.testing.do_bench`` (median).  A failure is recorded in its row and the others go on.
The markdown table goes to ``--out`` (and is printed last)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("ANYTILE_DEVICE", "cuda:0")  # torch tensors carry no anytile device

import torch
import triton
import triton.language as ttl
from triton.testing import do_bench

import anytile as at
from kernels import ANYTILE, make_kernels  # noqa: E402  (this folder is sys.path[0])
import anytile.language as tl

# the same kernel sources for both sides (Triton's matmul is its own tuned, grouped kernel)
at_add, at_softmax, at_layernorm, at_matmul = ANYTILE.add, ANYTILE.softmax, ANYTILE.layernorm, ANYTILE.matmul
_TRITON = make_kernels(triton.jit, ttl)
tr_add, tr_softmax, tr_layernorm = _TRITON.add, _TRITON.softmax, _TRITON.layernorm

ROWS: list = []  # Row objects of this process
# ANYTILE_BENCH_SMALL=1: tiny sizes, to smoke-test this script on any device (not a benchmark)
SMALL = os.environ.get("ANYTILE_BENCH_SMALL") == "1"
DETAILS: list[str] = []


def bench(fn) -> float:
    """Median milliseconds of ``fn``."""
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


class Row:
    """One benchmark's line: each side is measured on its own, so one side failing (a wrong
    result, an exception) leaves the others."""

    def __init__(self, name: str, unit: str, convert) -> None:
        self.name, self.unit, self.convert = name, unit, convert
        self.values: dict[str, float] = {}
        self.notes: list[str] = []
        ROWS.append(self)

    def measure(self, side: str, run, verify=None, timer=None) -> None:
        """``run()`` once, ``verify()`` (raises when wrong), then time ``run`` (``timer``:
        default median ms through do_bench, converted to the row's unit)."""
        try:
            run()
            torch.cuda.synchronize()
            if verify is not None:
                verify()
            self.values[side] = timer(run) if timer else self.convert(bench(run))
        except Exception as exc:  # keep going: one broken side must not hide the others
            self.notes.append(f"{side} FAILED: {type(exc).__name__}: {str(exc)[:200]}")
            DETAILS.append(f"## {self.name} / {side}\n```\n{traceback.format_exc()}\n```")

    def as_dict(self) -> dict:
        return {"name": self.name, "unit": self.unit, "ours": self.values.get("anytile"),
                "triton": self.values.get("triton"), "torch": self.values.get("torch"),
                "note": "; ".join(self.notes)}


def check(name: str, got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float) -> None:
    if not torch.allclose(got.float(), want.float(), rtol=rtol, atol=atol):
        err = (got.float() - want.float()).abs().nan_to_num(float("inf")).max().item()
        raise AssertionError(f"{name}: wrong result (max abs error {err:.3e})")


def checker(name: str, got: torch.Tensor, want, rtol: float, atol: float):
    """A ``verify`` for ``Row.measure``: ``got`` against ``want()``; poisons ``got`` first."""
    got.fill_(float("nan"))
    return lambda: check(name, got, want(), rtol, atol)


# -- vector add -----------------------------------------------------------------------------------
def bench_add() -> None:
    n = 1 << (12 if SMALL else 26)
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    row = Row("vector add fp32 2^26", "GB/s", lambda ms: 3 * 4 * n / ms / 1e6)
    ref = lambda: x + y  # noqa: E731
    row.measure("anytile", lambda: at_add[grid](x, y, out, n, BLOCK=1024), checker("anytile", out, ref, 0, 0))
    row.measure("triton", lambda: tr_add[grid](x, y, out, n, BLOCK=1024), checker("triton", out, ref, 0, 0))
    row.measure("torch", lambda: torch.add(x, y, out=out))


# -- softmax --------------------------------------------------------------------------------------
def softmax_warps(block: int) -> int:
    return 16 if block >= 16384 else 8 if block >= 2048 else 4


def bench_softmax(rows: int, cols: int) -> None:
    if SMALL:
        rows, cols = max(rows // 256, 4), max(cols // 64, 16)
    x = torch.randn(rows, cols, device="cuda")
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    nw = softmax_warps(block)
    row = Row(f"softmax fp32 {rows}x{cols}", "GB/s", lambda ms: 2 * 4 * rows * cols / ms / 1e6)
    row.notes.append(f"num_warps={nw}")
    ref = lambda: torch.softmax(x, dim=1)  # noqa: E731
    row.measure("anytile", lambda: at_softmax[(rows,)](out, x, cols, cols, cols, BLOCK=block, num_warps=nw),
                checker("anytile", out, ref, 1e-5, 1e-7))
    row.measure("triton", lambda: tr_softmax[(rows,)](out, x, cols, cols, cols, BLOCK=block, num_warps=nw),
                checker("triton", out, ref, 1e-5, 1e-7))
    row.measure("torch", lambda: torch.softmax(x, dim=1))


# -- matmul ---------------------------------------------------------------------------------------
# Both matmuls assume unit inner strides.
@triton.jit
def tr_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm,
              BM: ttl.constexpr, BN: ttl.constexpr, BK: ttl.constexpr, GROUP: ttl.constexpr):
    pid = ttl.program_id(0)
    num_m, num_n = ttl.cdiv(M, BM), ttl.cdiv(N, BN)
    group = pid // (GROUP * num_n)
    first_m = group * GROUP
    size_m = min(num_m - first_m, GROUP)
    pid_m = first_m + (pid % size_m)
    pid_n = (pid % (GROUP * num_n)) // size_m
    rm = pid_m * BM + ttl.arange(0, BM)
    rn = pid_n * BN + ttl.arange(0, BN)
    rk = ttl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :]
    acc = ttl.zeros((BM, BN), dtype=ttl.float32)
    for _ in range(0, K, BK):
        acc = ttl.dot(ttl.load(a_ptrs), ttl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK * sbk
    ttl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc)


def best_of(row: Row, side: str, runs: dict, verify) -> None:
    """Measure each of ``runs`` (label -> launch) in ``row``, note each figure, and keep the
    best as ``side``'s value."""
    best = None
    for label, run in runs.items():
        row.measure(label, run, verify)
        got = row.values.pop(label, None)
        if got is not None:
            row.notes.append(f"{label}: {got:.0f}")
            best = max(best or 0.0, got)
    if best is not None:
        row.values[side] = best


def bench_matmul() -> None:
    M = N = K = 128 if SMALL else 4096
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty((M, N), device="cuda")
    row = Row("matmul fp16->fp32 4096^3", "TFLOP/s", lambda ms: 2 * M * N * K / ms / 1e9)
    ref = lambda: a.float() @ b.float()  # noqa: E731
    # anytile: the best of four tile shapes (AT_CONFIGS="BMxBNxBK/warps,..." overrides)
    configs = os.environ.get("AT_CONFIGS", "128x128x32/4,128x128x64/4,128x128x64/8,128x256x64/8").split(",")
    runs = {}
    for text in configs:
        shape, warps = text.split("/")
        bm, bn, bk = (int(v) for v in shape.split("x"))
        runs[f"anytile {text}"] = lambda bm=bm, bn=bn, bk=bk, w=int(warps): at_matmul[(M // bm, N // bn)](
            a, b, c, M, N, K, K, N, N, BM=bm, BN=bn, BK=bk, num_warps=w)
    best_of(row, "anytile", runs, checker("anytile", c, ref, 1e-2, 1e-1))
    row.notes.append("Triton: best of 128x128x64 and 128x256x64, w8 s3 (group-M order); torch: cuBLAS, fp16 out")
    runs = {f"triton 128x{bn}x64/8": lambda bn=bn: tr_matmul[(triton.cdiv(M, 128) * triton.cdiv(N, bn),)](
        a, b, c, M, N, K, K, N, N, BM=128, BN=bn, BK=64, GROUP=8, num_warps=8, num_stages=3)
        for bn in (128, 256)}
    best_of(row, "triton", runs, checker("triton", c, ref, 1e-2, 1e-1))
    row.measure("torch", lambda: torch.matmul(a, b))


# -- layer norm -----------------------------------------------------------------------------------
def bench_layernorm() -> None:
    R, N = (8, 256) if SMALL else (4096, 4096)
    x = torch.randn(R, N, device="cuda")
    w, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    y = torch.empty_like(x)
    row = Row("layer norm fwd fp32 4096x4096", "GB/s", lambda ms: 2 * 4 * R * N / ms / 1e6)
    ref = lambda: torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)  # noqa: E731
    row.measure("anytile", lambda: at_layernorm[(R,)](x, y, w, b, N, N, 1e-5, BLOCK=N, num_warps=8),
                checker("anytile", y, ref, 1e-4, 1e-4))
    row.measure("triton", lambda: tr_layernorm[(R,)](x, y, w, b, N, N, 1e-5, BLOCK=N, num_warps=8),
                checker("triton", y, ref, 1e-4, 1e-4))
    row.measure("torch", lambda: torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5))


# -- launch overhead ------------------------------------------------------------------------------
def per_launch_us(fn, count: int = 2000) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(count):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / count * 1e6


def bench_launch() -> None:
    x = torch.randn(16, device="cuda")
    out = torch.empty_like(x)
    row = Row("launch overhead, tiny kernel", "us/launch", None)
    row.notes.append("lower is better")
    ref = lambda: x + x  # noqa: E731
    row.measure("anytile", lambda: at_add[(1,)](x, x, out, 16, BLOCK=128), checker("anytile", out, ref, 0, 0),
                timer=per_launch_us)
    row.measure("triton", lambda: tr_add[(1,)](x, x, out, 16, BLOCK=128), checker("triton", out, ref, 0, 0),
                timer=per_launch_us)
    row.measure("torch", lambda: torch.add(x, x, out=out), timer=per_launch_us)
    try:  # the backend's own share: one prepared launch through NvidiaBackend.launch
        from anytile.backend import KernelArg, PointerArg
        dev = at.device("cuda:0")
        xa, outa = at.asarray(x.cpu().numpy(), device=dev), at.empty(16, device=dev)
        compiled = at_add[(1,)](xa, xa, outa, 16, BLOCK=128)
        loaded = dev.backend.load(compiled, dev.info)
        args = [KernelArg(t, PointerArg(a.buffer) if hasattr(t, "pointee") else 16)
                for (_, t), a in zip(compiled.signature, (xa, xa, outa, None))]
        raw = per_launch_us(lambda: dev.backend.launch(loaded, (1, 1, 1), args, dev.info, 0))
        row.notes.append(f"anytile NvidiaBackend.launch alone: {raw:.1f} us")
    except Exception as exc:
        row.notes.append(f"backend-only launch FAILED: {type(exc).__name__}: {exc}")


# -- cold compile ---------------------------------------------------------------------------------
COLD_SOURCE = '''
@DECO
def fresh_add_{tag}(x_ptr, y_ptr, out_ptr, n, BLOCK: LANG.constexpr):
    offs = LANG.program_id(0) * BLOCK + LANG.arange(0, BLOCK)
    mask = offs < n
    LANG.store(out_ptr + offs, LANG.load(x_ptr + offs, mask=mask) + 4.0 * LANG.load(y_ptr + offs, mask=mask), mask=mask)
'''


def fresh_kernel(deco, lang, tag: str, directory: Path):
    """A new kernel from a new file (no cache can know it)."""
    path = directory / f"fresh_{tag}.py"
    path.write_text(COLD_SOURCE.format(tag=tag).replace("DECO", "deco").replace("LANG", "lang"))
    namespace = {"deco": deco, "lang": lang, "__name__": f"fresh_{tag}", "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace[f"fresh_add_{tag}"]


def bench_cold() -> None:
    x = torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    row = Row("first call of a new vector-add kernel", "s", None)
    row.notes.append("lower is better; fresh process, empty Triton and anytile caches")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRITON_CACHE_DIR"] = tmp
        os.environ["ANYTILE_CACHE_DIR"] = tmp + "/anytile"
        tag = str(int(time.time() * 1000) % 100000)
        for side, deco, lang in (("anytile", at.jit, tl), ("triton", triton.jit, ttl)):
            fn = fresh_kernel(deco, lang, side[:2] + tag, Path(tmp))

            def first_call(fn=fn) -> float:
                torch.cuda.synchronize()
                started = time.perf_counter()
                fn[(4,)](x, x, out, 4096, BLOCK=1024)
                torch.cuda.synchronize()
                return time.perf_counter() - started
            try:
                row.values[side] = first_call()
                check(side, out, x + 4 * x, 1e-6, 1e-6)
            except Exception as exc:
                row.values.pop(side, None)
                row.notes.append(f"{side} FAILED: {type(exc).__name__}: {str(exc)[:200]}")


def table(rows: list[dict]) -> str:
    lines = ["| benchmark | unit | anytile | Triton 3.6 | torch | anytile / Triton | note |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        fmt = lambda v: "-" if v is None else f"{v:.3g}" if v < 100 else f"{v:.0f}"  # noqa: E731
        ratio = f"{r['ours'] / r['triton']:.2f}" if r["ours"] and r["triton"] else "-"
        lines.append(f"| {r['name']} | {r['unit']} | {fmt(r['ours'])} | {fmt(r['triton'])} | "
                     f"{fmt(r['torch'])} | {ratio} | {r['note']} |")
    return "\n".join(lines)


BENCHES = {"cold": bench_cold, "add": bench_add, "softmax1": lambda: bench_softmax(4096, 4096),
           "softmax2": lambda: bench_softmax(16384, 1024), "softmax3": lambda: bench_softmax(1024, 16384),
           "matmul": bench_matmul, "layernorm": bench_layernorm, "launch": bench_launch}


def run_here(names: list[str], rows_path: str) -> None:
    """Run ``names`` in this process and save their rows as JSON."""
    torch.manual_seed(0)
    for name in names:
        started = time.perf_counter()
        try:
            BENCHES[name]()
        except Exception as exc:
            Row(name, "-", None).notes.append(f"FAILED: {type(exc).__name__}: {str(exc)[:200]}")
            DETAILS.append(f"## {name}\n```\n{traceback.format_exc()}\n```")
        DETAILS.append(f"{name}: {time.perf_counter() - started:.1f} s")
    Path(rows_path).write_text(json.dumps({"rows": [r.as_dict() for r in ROWS], "details": DETAILS}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="gpu_bench.md")
    parser.add_argument("--only", default="", help="comma-separated names: " + ",".join(BENCHES))
    parser.add_argument("--timeout", type=float, default=75, help="seconds per benchmark")
    parser.add_argument("--rows", default="", help=argparse.SUPPRESS)  # internal: child mode
    args = parser.parse_args()
    chosen = [b for b in args.only.split(",") if b] or list(BENCHES)
    if args.rows:
        run_here(chosen, args.rows)
        return
    rows: list[dict] = []
    details: list[str] = []
    device = torch.cuda.get_device_name()

    def write() -> str:
        text = (f"# anytile vs Triton on {device}\n\n{table(rows)}\n\n"
                f"Throughputs: higher is better unless noted.  Median of triton.testing.do_bench; "
                f"each benchmark in its own process (a CUDA fault cannot spoil the others).\n")
        Path(args.out).write_text(text + "\n<details>\n\n" + "\n\n".join(details) + "\n</details>\n")
        return text
    for name in chosen:
        with tempfile.TemporaryDirectory() as tmp:
            rows_path = os.path.join(tmp, "rows.json")
            why = ""
            try:
                proc = subprocess.run([sys.executable, __file__, "--only", name, "--rows", rows_path],
                                      timeout=args.timeout, capture_output=True, text=True)
                why = f"exit status {proc.returncode}: {proc.stderr.strip()[-300:]}"
            except subprocess.TimeoutExpired:
                why = f"timed out after {args.timeout:.0f} s"
            if os.path.exists(rows_path):
                data = json.loads(Path(rows_path).read_text())
                rows.extend(data["rows"])
                details.extend(data["details"])
            else:
                rows.append({"name": name, "unit": "-", "ours": None, "triton": None, "torch": None,
                             "note": f"FAILED: {why}".replace("\n", " ").replace("|", "/")})
        print(f"{name}: done", flush=True)
        write()  # a timeout later still leaves every finished row
    print(write())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
