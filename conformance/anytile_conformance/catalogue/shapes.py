"""Shape ops: broadcasting with ``[:, None]``, ``expand_dims``, ``broadcast_to``, ``reshape``
(row-major), ``trans``/``permute`` (2-D and 3-D), ``tl.full``/``tl.zeros``, ``arange`` with
a non-zero start.  All exact."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from .. import tolerances
from ..case import family
from ..numerics import ALL_DTYPES
from ..tolerances import EXACT


@at.jit
def outer_kernel(x_ptr, y_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M))
    y = tl.load(y_ptr + tl.arange(0, N))
    z = x[:, None] + tl.expand_dims(y, 0)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], z)


@family("shapes", quick=dict(dtype=["i32"], shape=[(4, 16)]),
        full=dict(dtype=ALL_DTYPES, shape=[(1, 8), (4, 16), (32, 2)]))
def broadcast_outer(ctx, dtype, shape):
    """``x[:, None] + expand_dims(y, 0)`` broadcasts both operands to M x N."""
    m, n = shape
    x, y = ctx.random((m,), dtype, -40, 40), ctx.random((n,), dtype, -40, 40)
    if dtype.startswith("u"):
        x, y = ctx.random((m,), dtype, 1, 80), ctx.random((n,), dtype, 1, 80)
    out = ctx.output((m, n), dtype)
    ctx.launch(outer_kernel, (1,), ctx.input(x), ctx.input(y), out, M=m, N=n)
    expected = x.astype(np.float64)[:, None] + y.astype(np.float64)[None, :]
    ctx.check("outer sum", out, expected, dtype, tolerances.arithmetic("add", dtype))


@at.jit
def reshape_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M * N))
    y = tl.reshape(x, (M, N))
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], y)


@family("shapes", quick=dict(shape=[(4, 8)]), full=dict(shape=[(1, 16), (4, 8), (16, 2), (8, 8)]))
def reshape(ctx, shape):
    """``tl.reshape`` keeps row-major element order."""
    m, n = shape
    x = ctx.random((m * n,), "f32")
    out = ctx.output((m, n), "f32")
    ctx.launch(reshape_kernel, (1,), ctx.input(x), out, M=m, N=n)
    ctx.check("reshape", out, x.reshape(m, n), "f32", EXACT)


@at.jit
def trans_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    y = tl.trans(x)
    tl.store(out_ptr + tl.arange(0, N)[:, None] * M + tl.arange(0, M)[None, :], y)


@family("shapes", quick=dict(dtype=["f16"], shape=[(8, 4)]),
        full=dict(dtype=ALL_DTYPES, shape=[(8, 4), (16, 16), (1, 8)]))
def transpose_tile(ctx, dtype, shape):
    """``tl.trans`` of a 2-D tile."""
    m, n = shape
    x = ctx.random((m, n), dtype)
    out = ctx.output((n, m), dtype)
    ctx.launch(trans_kernel, (1,), ctx.input(x), out, M=m, N=n)
    ctx.check("trans", out, x.T, dtype, EXACT)


@at.jit
def permute3_kernel(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + a * (B * C) + b * C + c)
    y = tl.permute(x, (2, 0, 1))
    ca = tl.arange(0, C)[:, None, None]
    aa = tl.arange(0, A)[None, :, None]
    ba = tl.arange(0, B)[None, None, :]
    tl.store(out_ptr + ca * (A * B) + aa * B + ba, y)


@family("shapes", quick=dict(shape=[(2, 4, 8)]), full=dict(shape=[(2, 4, 8), (8, 2, 2), (1, 4, 4)]))
def permute_3d(ctx, shape):
    """``tl.permute`` of a 3-D tile: result dim i is source dim order[i]."""
    a, b, c = shape
    x = ctx.random(shape, "i32")
    out = ctx.output((c, a, b), "i32")
    ctx.launch(permute3_kernel, (1,), ctx.input(x), out, A=a, B=b, C=c)
    ctx.check("permute (2, 0, 1)", out, np.transpose(x, (2, 0, 1)), "i32", EXACT)


@at.jit
def fill_kernel(out_ptr, base, VALUE: tl.constexpr, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(3, 3 + BLOCK) - 3
    full = tl.full((BLOCK,), VALUE, DTYPE)
    zeros = tl.zeros((BLOCK,), DTYPE)
    ramp = (tl.arange(3, 3 + BLOCK) + base).to(DTYPE)
    tl.store(out_ptr + offs, full + zeros + ramp)


@family("shapes", quick=dict(dtype=["f32", "i64"]), full=dict(dtype=ALL_DTYPES))
def full_zeros_arange(ctx, dtype):
    """``tl.full``, ``tl.zeros`` and ``tl.arange(start, end)`` with a non-zero start."""
    block, base, value = 16, 5, 7
    out = ctx.output((block,), dtype)
    ctx.launch(fill_kernel, (1,), out, base, VALUE=value, DTYPE=ctx.tl_dtype(dtype), BLOCK=block)
    expected = np.arange(3, 3 + block) + base + value    # small: exact in every dtype
    ctx.check("full + zeros + arange", out, expected, dtype, EXACT)


@at.jit
def broadcast_to_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))[None, :]
    y = tl.broadcast_to(x, (M, N))
    s = tl.load(x_ptr)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], y * s)


@family("shapes", quick=dict(dtype=["f32"]), full=dict(dtype=["f32", "i16", "f64"]))
def broadcast_to(ctx, dtype):
    """``tl.broadcast_to`` and a scalar operand broadcast against a tile."""
    m, n = 4, 8
    x = ctx.random((n,), dtype, -10, 10)
    out = ctx.output((m, n), dtype)
    ctx.launch(broadcast_to_kernel, (1,), ctx.input(x), out, M=m, N=n)
    expected = np.broadcast_to(x.astype(np.float64) * float(x[0]), (m, n))
    ctx.check("broadcast_to", out, expected, dtype, tolerances.arithmetic("mul", dtype))
