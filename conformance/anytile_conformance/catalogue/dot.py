"""``tl.dot``: input dtypes, accumulator dtypes and initial values, shapes, and the f32
``input_precision`` options, bounded as the accumulation rule of the tolerance table says."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from .. import tolerances
from ..case import family
from ..numerics import as_pyint, capabilities_for, wrap_int
from ..tolerances import EXACT
from .common import wide


@at.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               PRECISION: tl.constexpr, ACC: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    if PRECISION == "default":
        r = tl.dot(a, b, acc, out_dtype=ACC)
    else:
        r = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], r)


#: (input dtype, accumulator dtype, input_precision)
DOT_TYPES = [("f16", "f32", "default"), ("bf16", "f32", "default"), ("f32", "f32", "ieee"),
             ("f32", "f32", "tf32"), ("f32", "f32", "tf32x3"), ("f32", "f32", "bf16x3"),
             ("f32", "f32", "bf16x6"), ("i8", "i32", "default"),
             ("f64", "f64", "default"), ("f16", "f16", "default")]
DOT_SHAPES = [(16, 16, 16), (32, 16, 64), (16, 64, 32), (64, 64, 64)]


def _dot_needs(params: dict) -> set[str]:
    in_dtype, acc_dtype, _ = params["types"]
    needs = capabilities_for(in_dtype, acc_dtype)
    return needs | ({"dot_int8"} if in_dtype == "i8" else set())


@family("dot",
        quick=dict(types=[("f16", "f32", "default"), ("f32", "f32", "ieee"), ("f32", "f32", "tf32"),
                          ("i8", "i32", "default")], shape=[(16, 16, 16)]),
        full=dict(types=DOT_TYPES, shape=DOT_SHAPES), needs=_dot_needs)
def dot(ctx, types, shape):
    """``acc + a @ b`` for one (input, accumulator, precision) triple and one M x N x K."""
    in_dtype, acc_dtype, precision = types
    m, n, k = shape
    if in_dtype == "i8":
        a, b = ctx.random((m, k), "i8"), ctx.random((k, n), "i8")
        c = ctx.random((m, n), "i32", -1000, 1000)
    else:
        a, b = ctx.random((m, k), in_dtype, -2, 2), ctx.random((k, n), in_dtype, -2, 2)
        c = ctx.random((m, n), acc_dtype, -2, 2)
    out = ctx.output((m, n), acc_dtype)
    ctx.launch(dot_kernel, (1,), ctx.input(a), ctx.input(b), ctx.input(c), out, M=m, N=n, K=k,
               PRECISION=precision, ACC=ctx.tl_dtype(acc_dtype))
    if in_dtype == "i8":
        exact = as_pyint(a).dot(as_pyint(b)) + as_pyint(c)
        ctx.check("dot", out, wrap_int(exact, "i32"), "i32", EXACT)
        return
    aw, bw, cw = wide(a, acc_dtype), wide(b, acc_dtype), wide(c, acc_dtype)
    # the default precision for f32 inputs may be tf32 (as in Triton); other inputs are exact
    default = "tf32" if in_dtype == "f32" else "ieee"
    tol = tolerances.accumulation(k + 1, acc_dtype, default if precision == "default" else precision)
    ctx.check("dot", out, aw @ bw + cw, acc_dtype, tol, np.abs(aw) @ np.abs(bw) + np.abs(cw))


@at.jit
def dot_k_loop_kernel(a_ptr, b_ptr, out_ptr, k_total, M: tl.constexpr, N: tl.constexpr,
                      BK: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, BK)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for k0 in range(0, k_total, BK):
        mask_k = (k0 + rk) < k_total
        a = tl.load(a_ptr + rm[:, None] * k_total + (k0 + rk)[None, :], mask=mask_k[None, :], other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=mask_k[:, None], other=0.0)
        acc += tl.dot(a, b)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc)


@family("dot", quick=dict(k_total=[40]), full=dict(k_total=[16, 40, 100]), needs=["fp16"])
def dot_k_loop(ctx, k_total):
    """A K loop with a masked tail accumulating f16 products into an f32 tile."""
    m, n, bk = 16, 16, 16
    a, b = ctx.random((m, k_total), "f16", -2, 2), ctx.random((k_total, n), "f16", -2, 2)
    out = ctx.output((m, n), "f32")
    ctx.launch(dot_k_loop_kernel, (1,), ctx.input(a), ctx.input(b), out, k_total, M=m, N=n, BK=bk)
    aw, bw = wide(a, "f32"), wide(b, "f32")
    ctx.check("K-loop dot", out, aw @ bw, "f32", tolerances.accumulation(k_total, "f32"),
              np.abs(aw) @ np.abs(bw))



@at.jit
def tiled_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, B_ALONG_K: tl.constexpr, ACC: tl.constexpr,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # A is M x K row-major; B is K x N, stored N x K (read along K) or K x N (read along N)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, K, BK):
        in_k = (k + rk) < K
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=in_k[None, :], other=0)
        if B_ALONG_K:
            b = tl.load(b_ptr + (k + rk)[:, None] + rn[None, :] * K, mask=in_k[:, None], other=0)
        else:
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=in_k[:, None], other=0)
        acc = tl.dot(a, b, acc, out_dtype=ACC)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


#: (input dtype, accumulator dtype) of the tiled matmuls
TILED_TYPES = [("f16", "f32"), ("bf16", "f32"), ("i8", "i32")]


def _tiled_needs(params: dict) -> set[str]:
    in_dtype, acc_dtype = params["types"]
    return capabilities_for(in_dtype, acc_dtype) | ({"dot_int8"} if in_dtype == "i8" else set())


#: (BM, BN, BK, warps) of the tiled matmuls: the pipelined path at 64 x 64, and tiles of 128 x 256
#: on eight warps, where a backend may copy operands read through plain pointers as whole
#: boxes (NVIDIA's TMA on sm_90, from 128 x 256 up) and by thread where a box is not exactly the
#: tile (here: the masked K tail, a row stride shorter than two steps)
TILED_SHAPES = {"64x64": (64, 64, 32, 4), "128x256": (128, 256, 64, 8)}


@family("dot",
        quick=dict(types=[("f16", "f32"), ("i8", "i32")], b_along_k=[True], stages=[2, 3],
                   tile=["64x64"]),
        full=dict(types=TILED_TYPES, b_along_k=[False, True], stages=[2, 3],
                  tile=list(TILED_SHAPES)), needs=_tiled_needs)
def tiled_matmul(ctx, types, b_along_k, stages, tile):
    """A grid of tiles (``TILED_SHAPES``: 64 x 64 on four warps over 128 x 128, or 128 x 256 on
    eight over 256 x 256) with a K loop and a masked tail (K = 112), ``stages`` pipeline
    stages, B held N x K (read along K, as ``x @ W.T``) or K x N: the tile sizes and loops
    where GPU backends take their pipelined matrix-unit paths (shared-memory rings of two to
    four slots, asynchronous copies, copies of whole boxes, MMAs in flight), which the
    single-tile ``dot`` cases do not reach.  (Which dots a backend pipelines is its own
    choice: NVIDIA's sm_90 pipelines int8 only with B read along K, and keeps other int8
    operands in registers, as AMD's lowering does.)"""
    in_dtype, acc_dtype = types
    bm, bn, bk, warps = TILED_SHAPES[tile]
    m, n, k = 2 * bm, max(bn, 128), 112
    if in_dtype == "i8":
        a, b = ctx.random((m, k), "i8"), ctx.random((k, n), "i8")
    else:
        a, b = ctx.random((m, k), in_dtype, -2, 2), ctx.random((k, n), in_dtype, -2, 2)
    out = ctx.output((m, n), acc_dtype)
    b_stored = np.ascontiguousarray(b.T) if b_along_k else b
    ctx.launch(tiled_matmul_kernel, (m // bm, n // bn), ctx.input(a), ctx.input(b_stored), out,
               m, n, k, B_ALONG_K=b_along_k, ACC=ctx.tl_dtype(acc_dtype), BM=bm, BN=bn, BK=bk,
               num_warps=warps, num_stages=stages)
    if in_dtype == "i8":
        ctx.check("tiled matmul", out, wrap_int(as_pyint(a).dot(as_pyint(b)), "i32"), "i32", EXACT)
        return
    aw, bw = wide(a, acc_dtype), wide(b, acc_dtype)
    ctx.check("tiled matmul", out, aw @ bw, acc_dtype, tolerances.accumulation(k, acc_dtype),
              np.abs(aw) @ np.abs(bw))
