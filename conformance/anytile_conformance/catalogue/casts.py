"""Casts: int <-> int (truncate/extend by source signedness), int -> float and float -> float
(round to nearest even, fp16/bf16 included, overflow to inf), float -> int (truncate toward
zero, saturate, NaN -> 0), to/from ``i1``, and bitcasts."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from ..case import family
from ..numerics import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, as_pyint, capabilities_for,
                        int_range, np_dtype, round_to_format, wrap_int)
from ..tolerances import EXACT


@at.jit
def cast_kernel(x_ptr, out_ptr, n, DST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x.to(DST), mask=mask)


def cast_reference(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """The IR's cast semantics, computed exactly (long double holds every 64-bit integer)."""
    if dst == "i1":
        return (x.astype(np.float64) != 0) if src in FLOAT_DTYPES else (as_pyint(x) != 0)
    if src == "i1":
        return x.astype(np.int64).astype(np_dtype(dst))
    if dst in FLOAT_DTYPES:
        exact = x.astype(np.float64).astype(np.longdouble) if src in FLOAT_DTYPES else \
            np.array([np.longdouble(int(v)) for v in x.ravel()]).reshape(x.shape)
        return round_to_format(exact, dst).astype(np_dtype(dst))
    if src in INT_DTYPES:
        return wrap_int(as_pyint(x), dst)
    lo, hi = int_range(dst)
    values = []
    for v in x.astype(np.float64).ravel():
        if np.isnan(v):
            values.append(0)
        elif np.isinf(v):
            values.append(hi if v > 0 else lo)
        else:
            values.append(min(max(int(np.trunc(v)), lo), hi))
    return np.array(values, dtype=object).reshape(x.shape).astype(np_dtype(dst))


def cast_inputs(ctx, src: str, dst: str, n: int) -> np.ndarray:
    """Inputs that probe the interesting part of a src -> dst conversion: out-of-range values,
    fractions and NaN/inf for float -> int; values between representable ones for rounding."""
    if src in FLOAT_DTYPES and dst in INT_DTYPES:
        lo, hi = int_range(dst)
        span = float(min(hi, 6e4 if src == "f16" else hi))
        x = ctx.random((n,), src, -1.5 * span, 1.5 * span)
        x[:6] = np.array([np.nan, np.inf, -np.inf, -0.75, 0.75, -1.5]).astype(np_dtype(src))
        return x
    if src in FLOAT_DTYPES:
        x = ctx.random((n,), src, -1e5, 1e5) if src != "f16" else ctx.random((n,), src)
        x[:4] = np.array([np.nan, np.inf, -np.inf, 1 + 2.0 ** -12]).astype(np_dtype(src))
        if src in ("f32", "f64") and dst in ("f16", "bf16"):
            x[4:8] = np.array([7e4, -1e39 if src == "f64" else -3e38, 1e-6, 2.0 ** -20])
        return x
    return ctx.random((n,), src)


CAST_QUICK = [("f32", "i32"), ("f32", "u8"), ("f32", "f16"), ("f32", "bf16"), ("i64", "f32"),
              ("i32", "i8"), ("i8", "i64"), ("u32", "i64"), ("f16", "f32"), ("f32", "i1"),
              ("i1", "f32"), ("f64", "i64")]
CAST_FULL = [(s, d) for s in ALL_DTYPES + ("i1",) for d in ALL_DTYPES + ("i1",) if s != d]


@family("casts", quick=dict(pair=CAST_QUICK), full=dict(pair=CAST_FULL),
        needs=lambda p: capabilities_for(*p["pair"]))
def cast(ctx, pair):
    """``x.to(dst)`` for one (src, dst) pair."""
    src, dst = pair
    n, block = 100, 64
    x = cast_inputs(ctx, src, dst, n)
    out = ctx.output((n,), dst)
    ctx.launch(cast_kernel, (-(-n // block),), ctx.input(x), out, n, DST=ctx.tl_dtype(dst),
               BLOCK=block)
    ctx.check(f"{src} -> {dst}", out, cast_reference(x, src, dst), dst, EXACT)


@at.jit
def bitcast_kernel(x_ptr, out_ptr, DST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(DST, bitcast=True))


BITCASTS = [("f32", "i32"), ("i32", "f32"), ("f16", "i16"), ("bf16", "u16"), ("f64", "u64")]


@family("casts", quick=dict(pair=BITCASTS[:2]), full=dict(pair=BITCASTS),
        needs=lambda p: capabilities_for(*p["pair"]))
def bitcast(ctx, pair):
    """``x.to(dst, bitcast=True)`` keeps the bits."""
    src, dst = pair
    block = 32
    x = ctx.random((block,), src)
    out = ctx.output((block,), dst)
    ctx.launch(bitcast_kernel, (1,), ctx.input(x), out, DST=ctx.tl_dtype(dst), BLOCK=block)
    got = out.numpy()
    if dst in FLOAT_DTYPES:     # compare the integer bits so that NaN payloads count
        ctx.check(f"bitcast {src} -> {dst}", got.view(np_dtype(src)), x, src, EXACT)
    else:
        ctx.check(f"bitcast {src} -> {dst}", got, x.view(np_dtype(dst)), dst, EXACT)


ROUNDING_CASES = [("f32", "f16"), ("f32", "bf16"), ("f64", "f32")]


@family("casts", quick=dict(pair=ROUNDING_CASES[:2]), full=dict(pair=ROUNDING_CASES),
        needs=lambda p: capabilities_for(*p["pair"]))
def round_to_nearest_even(ctx, pair):
    """Values exactly halfway between two representable results round to the even one;
    values just above or below halfway round to the nearest (a truncating cast fails)."""
    src, dst = pair
    block = 64
    base = ctx.random((block,), dst, 1, 2).astype(np.float64)
    ulp = 2.0 ** -{"f16": 10, "bf16": 7, "f32": 23}[dst]
    offsets = np.tile([0.5, 0.5 + ulp / 64, 0.5 - ulp / 64, 1.5], block // 4) * ulp
    x = (base + offsets).astype(np_dtype(src))
    out = ctx.output((block,), dst)
    ctx.launch(cast_kernel, (1,), ctx.input(x), out, block, DST=ctx.tl_dtype(dst), BLOCK=block)
    ctx.check(f"{src} -> {dst} rounding", out, cast_reference(x, src, dst), dst, EXACT)

