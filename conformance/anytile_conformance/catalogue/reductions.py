"""Reductions and scans: sum/max/min/argmax/argmin over every axis with and without
``keep_dims``, ties resolved to the smallest index, custom combine functions, cumulative
sums and products forwards and in reverse."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from .. import tolerances
from ..case import family
from ..numerics import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, as_pyint, wrap_int
from ..tolerances import EXACT
from .common import wide


@at.jit
def reduce_kernel(x_ptr, out_ptr, m, n, OP: tl.constexpr, AXIS: tl.constexpr,
                  KEEP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * n + rn[None, :])
    if OP == "sum":
        r = tl.sum(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "max":
        r = tl.max(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "min":
        r = tl.min(x, axis=AXIS, keep_dims=KEEP)
    elif OP == "argmax":
        r = tl.argmax(x, axis=AXIS, keep_dims=KEEP)
    else:
        r = tl.argmin(x, axis=AXIS, keep_dims=KEEP)
    if AXIS == 0:
        if KEEP:
            tl.store(out_ptr + rn[None, :], r)
        else:
            tl.store(out_ptr + rn, r)
    elif AXIS == 1:
        if KEEP:
            tl.store(out_ptr + rm[:, None], r)
        else:
            tl.store(out_ptr + rm, r)
    else:
        tl.store(out_ptr, r)


REDUCE_OPS = ("sum", "max", "min", "argmax", "argmin")


def _reduce_reference(op: str, x: np.ndarray, axis, dtype: str):
    if op in ("argmax", "argmin"):     # NumPy returns the first occurrence: the smallest index
        idx = (np.argmax if op == "argmax" else np.argmin)(x.astype(np.float64) if dtype in FLOAT_DTYPES else x,
                                                          axis=axis)
        return np.asarray(idx).astype(np.int32), "i32", EXACT, None
    if op in ("max", "min"):
        return (x.max if op == "max" else x.min)(axis=axis), dtype, EXACT, None
    if dtype in INT_DTYPES:
        return wrap_int(as_pyint(x).sum(axis=axis), dtype), dtype, EXACT, None
    w = wide(x, dtype)
    terms = x.size if axis is None else x.shape[axis]
    return w.sum(axis=axis), dtype, tolerances.accumulation(terms, dtype), np.abs(w).sum(axis=axis)


@family("reductions",
        quick=dict(op=REDUCE_OPS, dtype=["f32", "i32"], axis=[0, 1, None], keep_dims=[False]),
        full=dict(dtype=ALL_DTYPES, keep_dims=[False, True]),
        where=lambda op, dtype, axis, keep_dims: not (axis is None and keep_dims))
def reduce(ctx, op, dtype, axis, keep_dims):
    """One reduction of a 2-D tile along ``axis`` (``None``: all elements).  Integer inputs
    come from a small range so argmax/argmin meet ties and must pick the smallest index."""
    m, n = 8, 16
    x = ctx.random((m, n), dtype, -6, 6) if op.startswith("arg") else ctx.random((m, n), dtype)
    expected, out_dtype, tol, magnitude = _reduce_reference(op, x, axis, dtype)
    size = 1 if axis is None else (n if axis == 0 else m)
    out = ctx.output((size,), out_dtype)
    ctx.launch(reduce_kernel, (1,), ctx.input(x), out, m, n, OP=op, AXIS=axis, KEEP=keep_dims,
               BM=m, BN=n)
    ctx.check(f"{op}(axis={axis})", out, np.reshape(expected, (size,)), out_dtype, tol,
              None if magnitude is None else np.reshape(magnitude, (size,)))


@family("reductions",
        quick=dict(op=["argmax", "argmin"], nans=["one"], axis=[1]),
        full=dict(op=["argmax", "argmin"], nans=["one", "several", "all"], axis=[0, 1, None]))
def arg_reduce_with_nan(ctx, op, nans, axis):
    """argmax/argmin of f32 tiles holding NaNs: a NaN wins over every number, and among NaNs
    (as among equal values) the smallest index, so any reduction order gives the first NaN."""
    m, n = 8, 16
    x = ctx.random((m, n), "f32", -6, 6)
    count = {"one": 1, "several": m * n // 5, "all": m * n}[nans]
    x.reshape(-1)[ctx.rng.choice(m * n, size=count, replace=False)] = np.nan
    # the inputs are finite, so an infinity stands for a NaN; NumPy takes the first occurrence
    keyed = np.where(np.isnan(x), np.inf if op == "argmax" else -np.inf, x.astype(np.float64))
    expected = np.asarray((np.argmax if op == "argmax" else np.argmin)(keyed, axis=axis)).astype(np.int32)
    size = 1 if axis is None else (n if axis == 0 else m)
    out = ctx.output((size,), "i32")
    ctx.launch(reduce_kernel, (1,), ctx.input(x), out, m, n, OP=op, AXIS=axis, KEEP=False,
               BM=m, BN=n)
    ctx.check(f"{op}(axis={axis}) with {nans} NaN", out, np.reshape(expected, (size,)), "i32", EXACT)


@at.jit
def bf16_scan_kernel(x_ptr, out_ptr, OP: tl.constexpr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    if OP == "cumsum":
        y = tl.cumsum(x, axis=0)
    else:
        y = tl.cumprod(x, axis=0)
    tl.static_assert(y.dtype == tl.float32)
    tl.store(out_ptr + tl.arange(0, BLOCK), y)


@family("reductions", quick=dict(op=["cumsum"]), full=dict(op=["cumsum", "cumprod"]),
        needs=["bf16"])
def bf16_scan_in_f32(ctx, op):
    """cumsum and cumprod of bf16 run and return f32, as Triton's: a running sum of 256 bf16
    values matches f32 arithmetic, not bf16's."""
    block = 256
    x = ctx.random((block,), "bf16", 0.5, 1.5)
    out = ctx.output((block,), "f32")
    ctx.launch(bf16_scan_kernel, (1,), ctx.input(x), out, OP=op, BLOCK=block)
    wide = x.astype(np.float64)
    exact = np.cumsum(wide) if op == "cumsum" else np.cumprod(wide)
    # the inputs are positive: each running value is its own magnitude
    ctx.check(op, out, exact, "f32", tolerances.accumulation(block, "f32"), np.abs(exact))


@at.jit
def masked_rowsum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * n + offs, mask=offs < n, other=0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x, axis=0))


@family("reductions", quick=dict(dtype=["f32"], n=[33]), full=dict(dtype=ALL_DTYPES, n=[1, 33, 1000]))
def masked_sum(ctx, dtype, n):
    """A sum over a block larger than the data, the rest masked to 0."""
    rows = 3
    x = ctx.random((rows, n), dtype)
    block = 1 << max(0, (n - 1).bit_length())
    out = ctx.output((rows,), dtype)
    ctx.launch(masked_rowsum_kernel, (rows,), ctx.input(x), out, n, BLOCK=block)
    expected, _, tol, magnitude = _reduce_reference("sum", x, 1, dtype)
    ctx.check("masked sum", out, expected, dtype, tol, magnitude)


@at.jit
def _product_combine(a, b):
    return a * b


@at.jit
def custom_reduce_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr, tl.reduce(x, 0, _product_combine))


@family("reductions", quick=dict(dtype=["i32"]), full=dict(dtype=["i32", "u8", "f32", "f64"]))
def custom_combine(ctx, dtype):
    """``tl.reduce`` with a user ``@jit`` combine function (a wrapping product)."""
    block = 32
    x = ctx.random((block,), dtype, -3, 4) if dtype in INT_DTYPES else ctx.random((block,), dtype, 0.5, 1.5)
    out = ctx.output((1,), dtype)
    ctx.launch(custom_reduce_kernel, (1,), ctx.input(x), out, BLOCK=block)
    if dtype in INT_DTYPES:
        ctx.check("product", out, wrap_int([np.prod(as_pyint(x))], dtype), dtype, EXACT)
    else:
        ctx.check("product", out, [np.prod(wide(x, dtype))], dtype, tolerances.composite(dtype))


@at.jit
def _last_nonzero(a, b):
    return tl.where(b != 0, b, a)


@at.jit
def ordered_reduce_kernel(x_ptr, out_ptr, AXIS: tl.constexpr, BM: tl.constexpr,
                          BN: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :])
    n_out: tl.constexpr = BN if AXIS == 0 else BM
    tl.store(out_ptr + tl.arange(0, n_out), tl.reduce(x, AXIS, _last_nonzero))


@family("reductions", quick=dict(dtype=["i32"], axis=[0, 1]),
        full=dict(dtype=["i32", "u8", "i64", "f32", "f16"], axis=[0, 1]))
def index_order_combine(ctx, dtype, axis):
    """``tl.reduce`` with an associative combine that is not commutative ("the last non-zero
    value"): elements are combined in index order, on every backend and layout."""
    bm, bn = 8, 64
    x = ctx.random((bm, bn), dtype, 1, 100)
    keep = np.random.default_rng(bm * bn + axis).random((bm, bn)) < 0.3
    x = np.where(keep, x, np.zeros_like(x))
    out = ctx.output((bn if axis == 0 else bm,), dtype)
    ctx.launch(ordered_reduce_kernel, (1,), ctx.input(x), out, AXIS=axis, BM=bm, BN=bn)
    moved = np.moveaxis(x, axis, -1)
    expected = np.zeros(moved.shape[:-1], x.dtype)
    for i, row in enumerate(moved):
        found = row[row != 0]
        expected[i] = found[-1] if len(found) else 0
    ctx.check("last non-zero", out, expected, dtype, EXACT)


@at.jit
def scan_kernel(x_ptr, out_ptr, OP: tl.constexpr, AXIS: tl.constexpr, REVERSE: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr):
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + offs)
    if OP == "cumsum":
        y = tl.cumsum(x, axis=AXIS, reverse=REVERSE)
    else:
        y = tl.cumprod(x, axis=AXIS, reverse=REVERSE)
    tl.store(out_ptr + offs, y)


def _scan_reference(op: str, x: np.ndarray, axis: int, reverse: bool, dtype: str):
    flip = (lambda a: np.flip(a, axis=axis)) if reverse else (lambda a: a)
    if dtype in INT_DTYPES:
        v = flip(as_pyint(x))
        acc = np.cumsum(v, axis=axis) if op == "cumsum" else np.cumprod(v, axis=axis)
        return wrap_int(flip(acc), dtype), EXACT, None
    w = flip(wide(x, dtype))
    if op == "cumsum":
        return (flip(np.cumsum(w, axis=axis)), tolerances.accumulation(x.shape[axis], dtype),
                flip(np.cumsum(np.abs(w), axis=axis)))
    return flip(np.cumprod(w, axis=axis)), tolerances.composite(dtype), None


@family("reductions",
        quick=dict(op=["cumsum", "cumprod"], dtype=["f32", "i32"], axis=[0, 1], reverse=[False, True]),
        full=dict(dtype=ALL_DTYPES),
        where=lambda op, dtype, axis, reverse: not (op == "cumprod" and dtype in ("f16", "bf16")))
def scan(ctx, op, dtype, axis, reverse):
    """Inclusive scans along each axis of a 2-D tile, forwards and backwards."""
    m, n = 4, 16
    x = ctx.random((m, n), dtype, 0.8, 1.25) if op == "cumprod" and dtype in FLOAT_DTYPES \
        else ctx.random((m, n), dtype)
    out = ctx.output((m, n), dtype)
    ctx.launch(scan_kernel, (1,), ctx.input(x), out, OP=op, AXIS=axis, REVERSE=reverse, BM=m, BN=n)
    expected, tol, magnitude = _scan_reference(op, x, axis, reverse, dtype)
    ctx.check(f"{op}(axis={axis}, reverse={reverse})", out, expected, dtype, tol, magnitude)
