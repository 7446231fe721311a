"""Matmuls on the GPU, anytile beside Triton (and torch) in one process.

    python3 benchmarks/gpu_matmul.py [--quick] [--out FILE]     # or: bash benchmarks/gpu.sh matmul

One kernel source per row, compiled by both (Triton's tutorial shapes written our own way):
a grouped-order tiled matmul (fp16 and bf16 into fp32; fp16 out with a fused ReLU; int8 into
int32) and a persistent one (programs loop over tiles ``num_programs`` apart), and both again
reading and writing through tensor descriptors (``--rows tma,tma-persistent``: Hopper's
TMA on both sides; ``AT_TMA=0`` keeps anytile's copies on cp.async, those of pointer loads
too; ``AT_WGMMA=0`` keeps anytile's dots on ``mma.sync``), the tutorial's form with indices wrapped by ``% M`` (``--rows wrapped``), and float8 (e4m3) with
B K-major, by pointers and by descriptors (``--rows fp8,fp8-8192,fp8-tma``; peer
``torch._scaled_mm``), and int8 with B K-major (``--rows int8-kmajor``: ``x @ W.T``, peer
``torch._int_mm`` on the same layout).  Each side
runs the same menu of block configurations and keeps its best (median of ``do_bench``);
results are checked against torch first.  Prints a markdown table (ratio = anytile / Triton
throughput) and each side's best configuration, registers and spills where known.  With
``--paired N`` the two best launches are timed N times more, alternately; ``--clocks`` adds
the SM clock and board power (``nvidia-smi``, sampled on a thread) each side ran at then.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

os.environ.setdefault("ANYTILE_DEVICE", "cuda:0")

import torch
import triton
import triton.language as ttl
from triton.testing import do_bench

import anytile as at
import anytile.language as tl

try:
    from triton.tools.tensor_descriptor import TensorDescriptor as TritonDescriptor
except ImportError:      # a Triton without host descriptors: the descriptor rows fail there
    TritonDescriptor = None


def make(jit, lang):
    """The benchmark's kernels decorated with ``jit`` over the language module ``lang``."""

    def tile_of(pid, M, N, BM: lang.constexpr, BN: lang.constexpr, GROUP: lang.constexpr):
        num_m, num_n = lang.cdiv(M, BM), lang.cdiv(N, BN)
        in_group = GROUP * num_n
        first_m = pid // in_group * GROUP
        rows = lang.minimum(num_m - first_m, GROUP)
        return first_m + (pid % in_group) % rows, (pid % in_group) // rows

    def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm, BM: lang.constexpr, BN: lang.constexpr,
               BK: lang.constexpr, GROUP: lang.constexpr, RELU: lang.constexpr, INT: lang.constexpr):
        pid_m, pid_n = tile_of(lang.program_id(0), M, N, BM, BN, GROUP)
        rm = pid_m * BM + lang.arange(0, BM)
        rn = pid_n * BN + lang.arange(0, BN)
        rk = lang.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :]
        acc = lang.zeros((BM, BN), dtype=lang.int32 if INT else lang.float32)
        for _ in range(0, K, BK):
            acc = lang.dot(lang.load(a_ptrs), lang.load(b_ptrs), acc, out_dtype=acc.dtype)
            a_ptrs += BK
            b_ptrs += BK * sbk
        if RELU:
            acc = lang.maximum(acc, 0.0)
        c_ptrs = c_ptr + rm[:, None] * scm + rn[None, :]
        lang.store(c_ptrs, acc.to(c_ptr.dtype.element_ty))

    def kmajor_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbn, scm, BM: lang.constexpr,
                      BN: lang.constexpr, BK: lang.constexpr, GROUP: lang.constexpr,
                      INT: lang.constexpr):
        # B held K-major (its N x K transpose row-major), as float8 and int8 matmuls keep it
        pid_m, pid_n = tile_of(lang.program_id(0), M, N, BM, BN, GROUP)
        rm = pid_m * BM + lang.arange(0, BM)
        rn = pid_n * BN + lang.arange(0, BN)
        rk = lang.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] + rn[None, :] * sbn
        acc = lang.zeros((BM, BN), dtype=lang.int32 if INT else lang.float32)
        for _ in range(0, K, BK):
            acc = lang.dot(lang.load(a_ptrs), lang.load(b_ptrs), acc, out_dtype=acc.dtype)
            a_ptrs += BK
            b_ptrs += BK
        lang.store(c_ptr + rm[:, None] * scm + rn[None, :], acc.to(c_ptr.dtype.element_ty))

    def tile_product(a_ptr, b_ptr, c_ptr, pid_m, pid_n, K, sam, sbk, scm, BM: lang.constexpr,
                     BN: lang.constexpr, BK: lang.constexpr):
        # one C tile, its addresses computed from k each step (not carried and advanced)
        rm = pid_m * BM + lang.arange(0, BM)
        rn = pid_n * BN + lang.arange(0, BN)
        rk = lang.arange(0, BK)
        acc = lang.zeros((BM, BN), dtype=lang.float32)
        for k in range(0, K, BK):
            a = lang.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :])
            b = lang.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :])
            acc = lang.dot(a, b, acc)
        lang.store(c_ptr + rm[:, None] * scm + rn[None, :], acc.to(c_ptr.dtype.element_ty))

    def indexed_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm, BM: lang.constexpr,
                       BN: lang.constexpr, BK: lang.constexpr, GROUP: lang.constexpr):
        # one tile a program, computed as the persistent kernel computes each of its tiles
        pid_m, pid_n = tile_of(lang.program_id(0), M, N, BM, BN, GROUP)
        tile_product(a_ptr, b_ptr, c_ptr, pid_m, pid_n, K, sam, sbk, scm, BM, BN, BK)

    def kmajor_desc_matmul(a_desc, bt_desc, c_desc, M, N, K, BM: lang.constexpr, BN: lang.constexpr,
                           BK: lang.constexpr, GROUP: lang.constexpr):
        pid_m, pid_n = tile_of(lang.program_id(0), M, N, BM, BN, GROUP)
        acc = lang.zeros((BM, BN), dtype=lang.float32)
        for k in range(0, K, BK):
            acc = lang.dot(a_desc.load([pid_m * BM, k]), bt_desc.load([pid_n * BN, k]).T, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))

    def persistent(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm, BM: lang.constexpr,
                   BN: lang.constexpr, BK: lang.constexpr, GROUP: lang.constexpr):
        tiles = lang.cdiv(M, BM) * lang.cdiv(N, BN)
        for tile in range(lang.program_id(0), tiles, lang.num_programs(0)):
            pid_m, pid_n = tile_of(tile, M, N, BM, BN, GROUP)
            tile_product(a_ptr, b_ptr, c_ptr, pid_m, pid_n, K, sam, sbk, scm, BM, BN, BK)

    def desc_matmul(a_desc, b_desc, c_desc, M, N, K, BM: lang.constexpr, BN: lang.constexpr,
                    BK: lang.constexpr, GROUP: lang.constexpr):
        pid_m, pid_n = tile_of(lang.program_id(0), M, N, BM, BN, GROUP)
        acc = lang.zeros((BM, BN), dtype=lang.float32)
        for k in range(0, K, BK):
            acc = lang.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))

    def desc_persistent(a_desc, b_desc, c_desc, M, N, K, BM: lang.constexpr, BN: lang.constexpr,
                        BK: lang.constexpr, GROUP: lang.constexpr):
        tiles = lang.cdiv(M, BM) * lang.cdiv(N, BN)
        for tile in range(lang.program_id(0), tiles, lang.num_programs(0)):
            pid_m, pid_n = tile_of(tile, M, N, BM, BN, GROUP)
            acc = lang.zeros((BM, BN), dtype=lang.float32)
            for k in range(0, K, BK):
                acc = lang.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
            c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))

    def block_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm, BM: lang.constexpr,
                     BN: lang.constexpr, BK: lang.constexpr, GROUP: lang.constexpr):
        pid_m, pid_n = tile_of(lang.program_id(0), M, N, BM, BN, GROUP)
        a_bp = lang.make_block_ptr(a_ptr, (M, K), (sam, 1), (pid_m * BM, 0), (BM, BK), (1, 0))
        b_bp = lang.make_block_ptr(b_ptr, (K, N), (sbk, 1), (0, pid_n * BN), (BK, BN), (1, 0))
        acc = lang.zeros((BM, BN), dtype=lang.float32)
        for _ in range(0, K, BK):
            acc = lang.dot(lang.load(a_bp, boundary_check=(0, 1)),
                           lang.load(b_bp, boundary_check=(0, 1)), acc)
            a_bp = lang.advance(a_bp, (0, BK))
            b_bp = lang.advance(b_bp, (BK, 0))
        c_bp = lang.make_block_ptr(c_ptr, (M, N), (scm, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
        lang.store(c_bp, acc.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))

    def residual_matmul(a_ptr, b_ptr, r_ptr, c_ptr, M, N, K, sam, sbk, scm, BM: lang.constexpr,
                        BN: lang.constexpr, BK: lang.constexpr, GROUP: lang.constexpr):
        # a fused epilogue reading another tile: C = A @ B + R (R fp16, as C)
        pid_m, pid_n = tile_of(lang.program_id(0), M, N, BM, BN, GROUP)
        rm = pid_m * BM + lang.arange(0, BM)
        rn = pid_n * BN + lang.arange(0, BN)
        rk = lang.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :]
        acc = lang.zeros((BM, BN), dtype=lang.float32)
        for _ in range(0, K, BK):
            acc = lang.dot(lang.load(a_ptrs), lang.load(b_ptrs), acc)
            a_ptrs += BK
            b_ptrs += BK * sbk
        acc += lang.load(r_ptr + rm[:, None] * scm + rn[None, :])
        lang.store(c_ptr + rm[:, None] * scm + rn[None, :], acc.to(c_ptr.dtype.element_ty))

    def wrapped_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm, BM: lang.constexpr,
                       BN: lang.constexpr, BK: lang.constexpr, GROUP: lang.constexpr):
        # as Triton's matmul tutorial writes it: row and column indices wrapped around the
        # matrix (% M, % N) instead of masked, the K tail masked, C stored masked
        pid_m, pid_n = tile_of(lang.program_id(0), M, N, BM, BN, GROUP)
        rm = (pid_m * BM + lang.arange(0, BM)) % M
        rn = (pid_n * BN + lang.arange(0, BN)) % N
        rk = lang.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :]
        acc = lang.zeros((BM, BN), dtype=lang.float32)
        for k in range(0, lang.cdiv(K, BK)):
            a = lang.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
            b = lang.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
            acc = lang.dot(a, b, acc)
            a_ptrs += BK
            b_ptrs += BK * sbk
        cm = pid_m * BM + lang.arange(0, BM)
        cn = pid_n * BN + lang.arange(0, BN)
        lang.store(c_ptr + cm[:, None] * scm + cn[None, :], acc.to(c_ptr.dtype.element_ty),
                   mask=(cm[:, None] < M) & (cn[None, :] < N))

    tile_of = jit(tile_of)
    tile_product = jit(tile_product)
    return (jit(matmul), jit(persistent), jit(desc_matmul), jit(desc_persistent), jit(block_matmul),
            jit(kmajor_matmul), jit(kmajor_desc_matmul), jit(indexed_matmul), jit(residual_matmul),
            jit(wrapped_matmul))


AT = make(at.jit, tl)
TR = make(triton.jit, ttl)
CONFIGS = [(128, 256, 64, 8, 3), (128, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 32, 4, 3),
           (64, 256, 32, 4, 4)]
FP8_CONFIGS = [(128, 256, 128, 8, 3), (128, 128, 128, 8, 3), (128, 256, 64, 8, 4), (128, 128, 128, 4, 4),
               (64, 128, 128, 4, 4)]
INT8_CONFIGS = [(128, 256, 128, 8, 3), (128, 128, 128, 8, 3), (128, 128, 64, 4, 4), (64, 128, 64, 4, 4)]


def _descriptors(side, a, b, c, bm, bn, bk):
    """The three descriptor arguments of the descriptor rows, for ``side``."""
    make = at.TensorDescriptor if side == "anytile" else TritonDescriptor
    return (make(a, list(a.shape), list(a.stride()), [bm, bk]),
            make(b, list(b.shape), list(b.stride()), [bk, bn]),
            make(c, list(c.shape), list(c.stride()), [bm, bn]))


class Clocks:
    """The GPU's SM clock and board power, read from ``nvidia-smi`` every ~50 ms on a thread
    (``--clocks``): ``during(window)`` gives the median clock and mean power over the samples
    taken between two ``time.monotonic()`` readings, so two kernels timed in turn can be told
    apart by the clocks they ran at, which the profiler's locked clocks hide."""

    def __init__(self) -> None:
        self.samples: list = []
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            try:
                text = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                                       "--format=csv,noheader,nounits", "-i", "0"],
                                      capture_output=True, text=True, timeout=5).stdout
                mhz, watts = (float(x) for x in text.strip().split(","))
                self.samples.append((time.monotonic(), mhz, watts))
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
            time.sleep(0.05)

    def during(self, windows: list) -> str:
        got = [(m, w) for t, m, w in self.samples if any(a <= t <= b for a, b in windows)]
        if not got:
            return "no samples"
        mhz = sorted(m for m, _ in got)[len(got) // 2]
        return f"{mhz:.0f} MHz, {sum(w for _, w in got) / len(got):.0f} W ({len(got)} samples)"


#: the sampler when ``--clocks`` is given
CLOCKS = None


def run_row(name, size, dtype, out_dtype, relu=False, persistent=False, configs=CONFIGS, quick=False,
            descriptors=False, block_pointers=False, indexed_addresses=False, b_kmajor=False,
            residual=False, wrapped=False, paired=0):
    """The best configuration of each side and torch's figure; with ``paired``, the two best
    launches then timed that many times more, alternately, for the ratio's median and range
    (the host's clocks drift between one side's sweep and the other's)."""
    M = N = K = size
    gen = torch.Generator(device="cuda").manual_seed(size)
    float8 = dtype == torch.float8_e4m3fn
    kmajor = float8 or b_kmajor
    if kmajor:
        # B kept K-major (``bt`` is N x K), as Triton's and cuBLAS's float8 and int8 matmuls
        # want it and as ``x @ W.T`` holds it
        if dtype == torch.int8:
            a = torch.randint(-8, 8, (M, K), device="cuda", dtype=torch.int8, generator=gen)
            bt = torch.randint(-8, 8, (N, K), device="cuda", dtype=torch.int8, generator=gen)
        else:
            a = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
            bt = torch.randn(N, K, device="cuda", generator=gen).to(dtype)
        b = bt.T
        one = torch.ones((), device="cuda")
        if dtype == torch.int8:
            ref = torch._int_mm(a, b)
            peer = ("torch._int_mm", lambda: torch._int_mm(a, b))
        elif float8:
            ref = a.float() @ b.float()
            peer = ("torch._scaled_mm", lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                                                 out_dtype=out_dtype))
        else:
            ref = a.float() @ b.float()
            peer = ("torch", lambda: a @ b)
    elif dtype == torch.int8:
        a = torch.randint(-8, 8, (M, K), device="cuda", dtype=torch.int8, generator=gen)
        b = torch.randint(-8, 8, (K, N), device="cuda", dtype=torch.int8, generator=gen)
        ref = torch._int_mm(a, b)
        peer = ("torch._int_mm", lambda: torch._int_mm(a, b))
    else:
        a = torch.randn(M, K, device="cuda", dtype=dtype, generator=gen)
        b = torch.randn(K, N, device="cuda", dtype=dtype, generator=gen)
        ref = a.float() @ b.float()
        if relu:
            ref = ref.relu()
        peer = ("torch", lambda: torch.relu(a @ b) if relu else a @ b)
        if residual:
            r = torch.randn(M, N, device="cuda", dtype=out_dtype, generator=gen)
            ref = ref + r.float()
            peer = ("torch.addmm", lambda: torch.addmm(r, a, b))
    c = torch.empty(M, N, device="cuda", dtype=out_dtype)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flops = 2 * M * N * K
    out = {"row": name, "size": size}
    extra = {name: False for name, var in (("tma", "AT_TMA"), ("wgmma", "AT_WGMMA"))
             if os.environ.get(var, "1") != "1"}

    def launch_of(side, kernels, cfg):
        """The launch of ``cfg`` on ``side`` (a closure of its own arguments)."""
        matmul, persist, desc_matmul, desc_persist, block_matmul, kmajor_kernel, kmajor_desc, indexed, \
            residual_kernel, wrapped_kernel = kernels
        bm, bn, bk, w, s = cfg
        options = extra if side == "anytile" else {}
        if kmajor and descriptors:
            make = at.TensorDescriptor if side == "anytile" else TritonDescriptor
            ad, btd, cd = (make(x, list(x.shape), list(x.stride()), blk) for x, blk in
                           ((a, [bm, bk]), (bt, [bn, bk]), (c, [bm, bn])))
            grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            launch = lambda: kmajor_desc[grid](ad, btd, cd, M, N, K, BM=bm, BN=bn, BK=bk,  # noqa: E731
                                               GROUP=8, num_warps=w, num_stages=s, **options)
        elif kmajor:
            grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            launch = lambda: kmajor_kernel[grid](a, bt, c, M, N, K, K, K, N, BM=bm, BN=bn, BK=bk,  # noqa: E731
                                                 GROUP=8, INT=dtype == torch.int8, num_warps=w,
                                                 num_stages=s, **options)
        elif descriptors:
            ad, bd, cd = _descriptors(side, a, b, c, bm, bn, bk)
            kernel = desc_persist if persistent else desc_matmul
            grid = (min(sms, triton.cdiv(M, bm) * triton.cdiv(N, bn)),) if persistent else \
                (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            launch = lambda: kernel[grid](ad, bd, cd, M, N, K, BM=bm, BN=bn, BK=bk,  # noqa: E731
                                          GROUP=8, num_warps=w, num_stages=s, **options)
        elif block_pointers:
            grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            launch = lambda: block_matmul[grid](a, b, c, M, N, K, K, N, N, BM=bm, BN=bn,  # noqa: E731
                                                BK=bk, GROUP=8, num_warps=w, num_stages=s,
                                                **options)
        elif indexed_addresses:
            grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            launch = lambda: indexed[grid](a, b, c, M, N, K, K, N, N, BM=bm, BN=bn, BK=bk,  # noqa: E731
                                           GROUP=8, num_warps=w, num_stages=s, **options)
        elif wrapped:
            grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            launch = lambda: wrapped_kernel[grid](a, b, c, M, N, K, K, N, N, BM=bm, BN=bn,  # noqa: E731
                                                  BK=bk, GROUP=8, num_warps=w, num_stages=s,
                                                  **options)
        elif residual:
            grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            launch = lambda: residual_kernel[grid](a, b, r, c, M, N, K, K, N, N, BM=bm, BN=bn,  # noqa: E731
                                                   BK=bk, GROUP=8, num_warps=w, num_stages=s)
        elif persistent:
            grid = (min(sms, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
            launch = lambda: persist[grid](a, b, c, M, N, K, K, N, N, BM=bm, BN=bn, BK=bk,  # noqa: E731
                                           GROUP=8, num_warps=w, num_stages=s, **options)
        else:
            grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            launch = lambda: matmul[grid](a, b, c, M, N, K, K, N, N, BM=bm, BN=bn, BK=bk,  # noqa: E731
                                          GROUP=8, RELU=relu, INT=dtype == torch.int8,
                                          num_warps=w, num_stages=s, **options)
        return launch

    for side, kernels in (("anytile", AT), ("triton", TR)):
        best = None
        for cfg in configs[:2] if quick else configs:
            launch = launch_of(side, kernels, cfg)
            try:
                c.zero_()
                t0 = time.perf_counter()
                compiled = launch()
                torch.cuda.synchronize()
                compile_s = time.perf_counter() - t0
                if dtype == torch.int8:
                    ok = torch.equal(c, ref)
                elif float8:
                    # sums of 4096 float8 products, accumulated with fewer bits than f32 on
                    # sm_90 (both compilers' default, as cuBLAS's), rounded to fp16
                    ok = (c.float() - ref).abs().max().item() <= 1e-2 * ref.abs().max().item()
                else:
                    ok = torch.allclose(c.float(), ref, rtol=2e-2, atol=5e-2)
                if not ok:
                    print(f"  {side} {cfg}: WRONG RESULT (max err {(c.float() - ref.float()).abs().max().item():.3g})")
                    continue
                tflops = flops / do_bench(launch, return_mode="median") / 1e9
            except Exception as exc:  # a config one side cannot run
                cause = f" (caused by {exc.__cause__!r})"[:300] if exc.__cause__ is not None else ""
                print(f"  {side} {cfg}: {type(exc).__name__}: "
                      f"{' | '.join(str(exc).strip().splitlines()[-3:])[:400]}{cause}")
                continue
            print(f"  {side} {cfg}: {tflops:.0f} TFLOP/s (first call {compile_s:.2f} s, "
                  f"{_registers(compiled)})")
            if best is None or tflops > best[0]:
                best = (tflops, cfg)
        out[side] = best
    out["peer"] = (peer[0], flops / do_bench(peer[1], return_mode="median") / 1e9)
    if paired and out["anytile"] and out["triton"]:
        ours, theirs = launch_of("anytile", AT, out["anytile"][1]), launch_of("triton", TR, out["triton"][1])
        windows: dict = {"anytile": [], "triton": []}

        def timed(side, launch):
            start = time.monotonic()
            ms = do_bench(launch, return_mode="median")
            windows[side].append((start, time.monotonic()))
            return ms
        out["paired"] = sorted(timed("triton", theirs) / timed("anytile", ours) for _ in range(paired))
        if CLOCKS is not None:
            out["clocks"] = {side: CLOCKS.during(w) for side, w in windows.items()}
    return out


def _registers(compiled) -> str:
    """Registers and spilled bytes a thread of a compiled kernel (either side's) uses."""
    meta = getattr(compiled, "metadata", None)
    if isinstance(getattr(compiled, "n_regs", None), int):       # Triton's CompiledKernel
        return f"{compiled.n_regs} registers, {compiled.n_spills} spilled"
    try:
        return f"{meta['registers']} registers, {meta.get('spills', 0)} bytes spilled"
    except Exception:
        return "registers unknown"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="two configurations a side")
    parser.add_argument("--out")
    parser.add_argument("--rows", default="fp16,fp16-8192,bf16,relu,persistent,int8")
    parser.add_argument("--clocks", action="store_true",
                        help="with --paired: the SM clock and power each side's timings ran at")
    parser.add_argument("--paired", type=int, default=0,
                        help="time the two best launches this many times more, alternately")
    args = parser.parse_args()
    if args.clocks:
        global CLOCKS
        CLOCKS = Clocks()
    q = {"quick": args.quick, "paired": args.paired}
    rows = {
        "fp16": lambda: run_row("fp16 -> fp32", 4096, torch.float16, torch.float32, **q),
        "fp16-8192": lambda: run_row("fp16 -> fp32", 8192, torch.float16, torch.float32, **q),
        "bf16": lambda: run_row("bf16 -> fp32", 4096, torch.bfloat16, torch.float32, **q),
        "relu": lambda: run_row("fp16, fused ReLU, fp16 out", 4096, torch.float16, torch.float16,
                                relu=True, **q),
        "persistent": lambda: run_row("fp16 persistent (tiles num_programs apart)", 8192,
                                      torch.float16, torch.float16, persistent=True, **q),
        "indexed": lambda: run_row("fp16, addresses from k each step (the persistent kernel's inner loop)",
                                   8192, torch.float16, torch.float16, indexed_addresses=True,
                                   **q),
        "wrapped": lambda: run_row("fp16, indices wrapped (% M) and K tail masked as Triton's tutorial, "
                                   "fp16 out", 4096, torch.float16, torch.float16, wrapped=True, **q),
        "residual": lambda: run_row("fp16, fused residual (+ R, fp16), fp16 out", 4096, torch.float16,
                                    torch.float16, residual=True, **q),
        "int8": lambda: run_row("int8 -> int32", 4096, torch.int8, torch.int32, configs=INT8_CONFIGS,
                                **q),
        "int8-kmajor": lambda: run_row("int8 -> int32, B K-major (x @ W.T)", 4096, torch.int8,
                                       torch.int32, configs=INT8_CONFIGS, b_kmajor=True, **q),
        "tma": lambda: run_row("fp16 descriptors (TMA), fp16 out", 4096, torch.float16, torch.float16,
                               descriptors=True, **q),
        "tma-8192": lambda: run_row("fp16 descriptors (TMA), fp16 out", 8192, torch.float16,
                                    torch.float16, descriptors=True, **q),
        "block-ptr": lambda: run_row("fp16 block pointers (tl.advance), fp16 out", 4096, torch.float16,
                                     torch.float16, block_pointers=True, **q),
        "fp16-kmajor": lambda: run_row("fp16, B K-major (x @ W.T), fp16 out", 4096, torch.float16,
                                       torch.float16, b_kmajor=True, **q),
        "fp8": lambda: run_row("fp8 e4m3 (B K-major), fp16 out", 4096, torch.float8_e4m3fn,
                               torch.float16, configs=FP8_CONFIGS, **q),
        "fp8-8192": lambda: run_row("fp8 e4m3 (B K-major), fp16 out", 8192, torch.float8_e4m3fn,
                                    torch.float16, configs=FP8_CONFIGS, **q),
        "fp8-tma": lambda: run_row("fp8 e4m3 descriptors (B K-major, `.T`), fp16 out", 4096,
                                   torch.float8_e4m3fn, torch.float16, configs=FP8_CONFIGS,
                                   descriptors=True, **q),
        "tma-persistent": lambda: run_row("fp16 descriptors (TMA), persistent", 8192, torch.float16,
                                          torch.float16, persistent=True, descriptors=True,
                                          **q),
    }
    results = []
    for key in args.rows.split(","):
        print(f"== {key}", flush=True)
        results.append(rows[key]())
    lines = [f"{torch.cuda.get_device_name(0)}, Triton {triton.__version__}, torch {torch.__version__}",
             "", "| matmul | size | anytile TFLOP/s (config) | Triton TFLOP/s (config) | torch | anytile / Triton |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        def cell(best):
            return "failed" if best is None else f"{best[0]:.0f} ({'x'.join(map(str, best[1][:3]))} w{best[1][3]} s{best[1][4]})"
        ratio = f"{r['anytile'][0] / r['triton'][0]:.2f}" if r["anytile"] and r["triton"] else "-"
        if "paired" in r:
            p = r["paired"]
            ratio += f"; paired x{len(p)}: {p[len(p) // 2]:.2f} ({p[0]:.2f}-{p[-1]:.2f})"
        lines.append(f"| {r['row']} | {r['size']}^3 | {cell(r['anytile'])} | {cell(r['triton'])} | "
                     f"{r['peer'][1]:.0f} ({r['peer'][0]}) | {ratio} |")
    clocked = [r for r in results if "clocks" in r]
    if clocked:
        lines += ["", "SM clock (median) and board power (mean) during the paired timings:", ""]
        lines += [f"* {r['row']} {r['size']}^3: anytile {r['clocks']['anytile']}; Triton {r['clocks']['triton']}"
                  for r in clocked]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
