"""anytile's NVIDIA backend next to Triton and torch on one GPU.  Run through benchmarks/gpu.sh.

Each benchmark checks anytile's (and Triton's) result against torch first, then times with
``triton.testing.do_bench`` (median).  A failure is recorded in its row and the others go on.
The markdown table goes to ``--out`` (and is printed last)."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import triton
import triton.language as ttl
from triton.testing import do_bench

import anytile as at
import anytile.language as tl

ROWS: list[dict] = []
DETAILS: list[str] = []


def bench(fn) -> float:
    """Median milliseconds of ``fn``."""
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def record(name: str, unit: str, ours=None, triton_=None, torch_=None, note: str = "") -> None:
    ROWS.append({"name": name, "unit": unit, "ours": ours, "triton": triton_, "torch": torch_,
                 "note": note})


def guarded(name: str):
    def wrap(fn):
        def run(*args):
            started = time.perf_counter()
            try:
                fn(*args)
            except Exception as exc:  # keep going: one broken benchmark must not hide the rest
                record(name, "-", note=f"FAILED: {type(exc).__name__}: {str(exc)[:300]}")
                DETAILS.append(f"## {name}\n```\n{traceback.format_exc()}\n```")
            DETAILS.append(f"{name}: {time.perf_counter() - started:.1f} s")
        return run
    return wrap


def check(name: str, got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float) -> None:
    if not torch.allclose(got.float(), want.float(), rtol=rtol, atol=atol):
        err = (got.float() - want.float()).abs().max().item()
        raise AssertionError(f"{name}: wrong result (max abs error {err:.3e})")


# -- vector add -----------------------------------------------------------------------------------
@at.jit
def at_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def tr_add(x_ptr, y_ptr, out_ptr, n, BLOCK: ttl.constexpr):
    offs = ttl.program_id(0) * BLOCK + ttl.arange(0, BLOCK)
    mask = offs < n
    ttl.store(out_ptr + offs, ttl.load(x_ptr + offs, mask=mask) + ttl.load(y_ptr + offs, mask=mask), mask=mask)


@guarded("vector add fp32 2^26")
def bench_add() -> None:
    n = 1 << 26
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out, out_t = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    grid = (triton.cdiv(n, 1024),)
    at_add[grid](x, y, out, n, BLOCK=1024)
    tr_add[grid](x, y, out_t, n, BLOCK=1024)
    check("anytile add", out, x + y, 0, 0)
    check("triton add", out_t, x + y, 0, 0)
    gbs = lambda ms: 3 * 4 * n / ms / 1e6  # noqa: E731
    record("vector add fp32 2^26", "GB/s",
           gbs(bench(lambda: at_add[grid](x, y, out, n, BLOCK=1024))),
           gbs(bench(lambda: tr_add[grid](x, y, out_t, n, BLOCK=1024))),
           gbs(bench(lambda: torch.add(x, y, out=out_t))))


# -- softmax --------------------------------------------------------------------------------------
@at.jit
def at_softmax(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=mask)


@triton.jit
def tr_softmax(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: ttl.constexpr):
    row = ttl.program_id(0)
    cols = ttl.arange(0, BLOCK)
    mask = cols < n_cols
    x = ttl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - ttl.max(x, axis=0)
    num = ttl.exp(x)
    ttl.store(out_ptr + row * out_stride + cols, num / ttl.sum(num, axis=0), mask=mask)


def softmax_warps(block: int) -> int:
    return 16 if block >= 16384 else 8 if block >= 2048 else 4


def bench_softmax(rows: int, cols: int) -> None:
    @guarded(f"softmax fp32 {rows}x{cols}")
    def run() -> None:
        x = torch.randn(rows, cols, device="cuda")
        out, out_t = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
        block = triton.next_power_of_2(cols)
        nw = softmax_warps(block)

        def ours():
            at_softmax[(rows,)](out, x, cols, cols, cols, BLOCK=block, num_warps=nw)

        def theirs():
            tr_softmax[(rows,)](out_t, x, cols, cols, cols, BLOCK=block, num_warps=nw)
        ours()
        theirs()
        ref = torch.softmax(x, dim=1)
        check("anytile softmax", out, ref, 1e-5, 1e-7)
        check("triton softmax", out_t, ref, 1e-5, 1e-7)
        gbs = lambda ms: 2 * 4 * rows * cols / ms / 1e6  # noqa: E731
        record(f"softmax fp32 {rows}x{cols}", "GB/s", gbs(bench(ours)), gbs(bench(theirs)),
               gbs(bench(lambda: torch.softmax(x, dim=1))), note=f"num_warps={nw}")
    run()


# -- matmul ---------------------------------------------------------------------------------------
# Both matmuls assume unit inner strides (Triton specialises an argument equal to 1; anytile
# does not, so a stride of 1 passed at run time would hide the contiguity from both).
@at.jit
def at_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc)


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


@guarded("matmul fp16->fp32 4096^3")
def bench_matmul() -> None:
    M = N = K = 4096
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c, c_t = torch.full((M, N), float("nan"), device="cuda"), torch.full((M, N), float("nan"), device="cuda")
    cfg = dict(BM=int(os.environ.get("AT_BM", 128)), BN=int(os.environ.get("AT_BN", 128)),
               BK=int(os.environ.get("AT_BK", 32)))
    nw = int(os.environ.get("AT_WARPS", 8))

    def ours():
        at_matmul[(M // cfg["BM"], N // cfg["BN"])](a, b, c, M, N, K, K, N, N, **cfg, num_warps=nw)

    def theirs():
        tr_matmul[(triton.cdiv(M, 128) * triton.cdiv(N, 128),)](
            a, b, c_t, M, N, K, K, N, N, BM=128, BN=128, BK=64, GROUP=8, num_warps=8, num_stages=3)
    ref = a.float() @ b.float()
    ours()
    theirs()
    check("anytile matmul", c, ref, 1e-2, 1e-1)
    check("triton matmul", c_t, ref, 1e-2, 1e-1)
    tflops = lambda ms: 2 * M * N * K / ms / 1e9  # noqa: E731
    record("matmul fp16->fp32 4096^3", "TFLOP/s", tflops(bench(ours)), tflops(bench(theirs)),
           tflops(bench(lambda: torch.matmul(a, b))),
           note=f"ours {cfg}, num_warps={nw}; torch output fp16")


# -- layer norm -----------------------------------------------------------------------------------
@at.jit
def at_layernorm(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(diff * diff, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, diff * rstd * w + b, mask=mask)


@triton.jit
def tr_layernorm(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK: ttl.constexpr):
    row = ttl.program_id(0)
    cols = ttl.arange(0, BLOCK)
    mask = cols < N
    x = ttl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    mean = ttl.sum(x, axis=0) / N
    diff = ttl.where(mask, x - mean, 0.0)
    rstd = 1 / ttl.sqrt(ttl.sum(diff * diff, axis=0) / N + eps)
    w = ttl.load(w_ptr + cols, mask=mask)
    b = ttl.load(b_ptr + cols, mask=mask)
    ttl.store(y_ptr + row * stride + cols, diff * rstd * w + b, mask=mask)


@guarded("layer norm fwd fp32 4096x4096")
def bench_layernorm() -> None:
    R = N = 4096
    x = torch.randn(R, N, device="cuda")
    w, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    y, y_t = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))

    def ours():
        at_layernorm[(R,)](x, y, w, b, N, N, 1e-5, BLOCK=N, num_warps=8)

    def theirs():
        tr_layernorm[(R,)](x, y_t, w, b, N, N, 1e-5, BLOCK=N, num_warps=8)
    ours()
    theirs()
    ref = torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)
    check("anytile layernorm", y, ref, 1e-4, 1e-4)
    check("triton layernorm", y_t, ref, 1e-4, 1e-4)
    gbs = lambda ms: 2 * 4 * R * N / ms / 1e6  # noqa: E731
    record("layer norm fwd fp32 4096x4096", "GB/s", gbs(bench(ours)), gbs(bench(theirs)),
           gbs(bench(lambda: torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5))))


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


@guarded("launch overhead, tiny kernel")
def bench_launch() -> None:
    x = torch.randn(16, device="cuda")
    out = torch.empty_like(x)
    ours = per_launch_us(lambda: at_add[(1,)](x, x, out, 16, BLOCK=128))
    theirs = per_launch_us(lambda: tr_add[(1,)](x, x, out, 16, BLOCK=128))
    torch_us = per_launch_us(lambda: torch.add(x, x, out=out))
    check("anytile tiny add", out, x + x, 0, 0)
    # the backend's own share: one prepared launch through NvidiaBackend.launch
    dev = at.device("cuda:0")
    xa, outa = at.asarray(x.cpu().numpy(), device=dev), at.empty(16, device=dev)
    compiled = at_add[(1,)](xa, xa, outa, 16, BLOCK=128)
    from anytile.backend import KernelArg, PointerArg
    loaded = dev.backend.load(compiled, dev.info)
    args = [KernelArg(t, PointerArg(a.buffer) if hasattr(t, "pointee") else 16)
            for (name, t), a in zip(compiled.signature, (xa, xa, outa, None))]
    raw = per_launch_us(lambda: dev.backend.launch(loaded, (1, 1, 1), args, dev.info, 0))
    record("launch overhead, tiny kernel", "us/launch", ours, theirs, torch_us,
           note=f"lower is better; anytile backend.launch alone: {raw:.1f} us")


# -- cold compile ---------------------------------------------------------------------------------
COLD_SOURCE = '''
@DECO
def fresh_add_{tag}(x_ptr, y_ptr, out_ptr, n, BLOCK: LANG.constexpr):
    offs = LANG.program_id(0) * BLOCK + LANG.arange(0, BLOCK)
    mask = offs < n
    LANG.store(out_ptr + offs, LANG.load(x_ptr + offs, mask=mask) + {k} * LANG.load(y_ptr + offs, mask=mask), mask=mask)
'''


def fresh_kernel(deco, lang, tag: str, directory: Path):
    """A new kernel from a new file (no cache can know it)."""
    path = directory / f"fresh_{tag}.py"
    path.write_text(f"import {deco.__module__.split('.')[0]}\n" + COLD_SOURCE.format(tag=tag, k=len(tag))
                    .replace("DECO", "deco").replace("LANG", "lang"))
    namespace = {"deco": deco, "lang": lang}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace[f"fresh_add_{tag}"]


@guarded("first call of a new vector-add kernel")
def bench_cold() -> None:
    x = torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRITON_CACHE_DIR"] = tmp
        tag = str(int(time.time() * 1000) % 100000)
        ours_fn = fresh_kernel(at.jit, tl, "at" + tag, Path(tmp))
        theirs_fn = fresh_kernel(triton.jit, ttl, "tr" + tag, Path(tmp))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ours_fn[(4,)](x, x, out, 4096, BLOCK=1024)
        torch.cuda.synchronize()
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        theirs_fn[(4,)](x, x, out, 4096, BLOCK=1024)
        torch.cuda.synchronize()
        theirs = time.perf_counter() - t0
    record("first call of a new vector-add kernel", "s", ours, theirs, None, note="lower is better")


def table() -> str:
    lines = ["| benchmark | unit | anytile | Triton 3.6 | torch | anytile / Triton | note |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in ROWS:
        fmt = lambda v: "-" if v is None else f"{v:.3g}" if v < 10 else f"{v:.0f}"  # noqa: E731
        ratio = f"{r['ours'] / r['triton']:.2f}" if r["ours"] and r["triton"] else "-"
        lines.append(f"| {r['name']} | {r['unit']} | {fmt(r['ours'])} | {fmt(r['triton'])} | "
                     f"{fmt(r['torch'])} | {ratio} | {r['note']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="gpu_bench.md")
    parser.add_argument("--only", default="", help="comma-separated benchmark names to run")
    args = parser.parse_args()
    torch.manual_seed(0)
    benches = {"add": bench_add, "softmax1": lambda: bench_softmax(4096, 4096),
               "softmax2": lambda: bench_softmax(16384, 1024), "softmax3": lambda: bench_softmax(1024, 16384),
               "matmul": bench_matmul, "layernorm": bench_layernorm, "launch": bench_launch,
               "cold": bench_cold}
    chosen = [b for b in args.only.split(",") if b] or list(benches)
    # cold first: nothing of ours is compiled yet in this process
    for name in sorted(chosen, key=lambda n: n != "cold"):
        benches[name]()
    text = (f"# anytile vs Triton on {torch.cuda.get_device_name()}\n\n{table()}\n\n"
            f"Throughputs: higher is better unless noted.  Median of triton.testing.do_bench.\n")
    Path(args.out).write_text(text + "\n<details>\n\n" + "\n\n".join(DETAILS) + "\n</details>\n")
    print(text)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
