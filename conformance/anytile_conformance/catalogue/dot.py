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

