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



# -- float8 ----------------------------------------------------------------------------------
_FLOAT8 = {"f8e4m3": ("float8e4nv", "float8_e4m3fn"), "f8e5m2": ("float8e5", "float8_e5m2")}


@at.jit
def float8_kernel(codes_ptr, wide_ptr, src_ptr, narrow_ptr, n, F8: tl.constexpr,
                  WIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    codes = tl.load(codes_ptr + offs, mask=mask)
    tl.store(wide_ptr + offs, codes.to(F8, bitcast=True).to(WIDE), mask=mask)
    x = tl.load(src_ptr + offs, mask=mask)
    tl.store(narrow_ptr + offs, x.to(F8).to(tl.uint8, bitcast=True), mask=mask)


def _float8_sources(rng: np.random.Generator, fmt: str) -> np.ndarray:
    """Values at every scale the format covers, and the edges: the largest finite value,
    the halfway points past it, subnormals and their halfway points, infinities, NaN."""
    largest, tiny = (448.0, 2.0 ** -9) if fmt == "f8e4m3" else (57344.0, 2.0 ** -16)
    edges = [largest, largest * 1.0357, largest * 1.0715, largest * 1.5, 1e30, np.inf, -np.inf,
             np.nan, 0.0, -0.0, tiny, tiny / 2, tiny * 1.5, tiny * 2.5, tiny / 4, -tiny * 1.5]
    scaled = rng.standard_normal(1024 - len(edges)) * 2.0 ** rng.integers(-20, 17, 1024 - len(edges))
    return np.concatenate([scaled, edges]).astype(np.float32)


@family("casts", quick=dict(fmt=list(_FLOAT8), wide=["f32"]),
        full=dict(fmt=list(_FLOAT8), wide=["f32", "f16", "bf16"]),
        needs=lambda p: capabilities_for(p["wide"]) | {"fp8"})
def float8(ctx, fmt, wide):
    """float8 (e4m3fn, e5m2) codes decoded to ``wide`` exactly, and f32 values rounded to
    float8 (nearest even; past the largest finite value: inf for e5m2, NaN for e4m3)."""
    import ml_dtypes
    tl_name, ml_name = _FLOAT8[fmt]
    ml = getattr(ml_dtypes, ml_name)
    codes = np.arange(256, dtype=np.uint8)
    src = _float8_sources(ctx.rng, fmt)
    n = src.size
    codes = np.resize(codes, n)
    wide_out = ctx.output((n,), wide)
    narrow_out = ctx.output((n,), "u8")
    ctx.launch(float8_kernel, (n // 256,), ctx.input(codes), wide_out, ctx.input(src), narrow_out,
               n, F8=getattr(tl, tl_name), WIDE=ctx.tl_dtype(wide), BLOCK=256)
    ctx.check(f"{fmt} -> {wide}", wide_out, codes.view(ml).astype(np_dtype(wide)), wide, EXACT)
    decoded = narrow_out.numpy().view(ml).astype(np.float32)
    ctx.check(f"f32 -> {fmt}", decoded, src.astype(ml).astype(np.float32), "f32", EXACT)


@at.jit
def float8_dot_kernel(a_ptr, b_ptr, c_ptr, F8: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :]).to(F8, bitcast=True)
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :]).to(F8, bitcast=True)
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], tl.dot(a, b))


@family("dot", quick=dict(fmt=["f8e4m3"]), full=dict(fmt=list(_FLOAT8)), needs=lambda p: {"fp8"})
def float8_dot(ctx, fmt):
    """``tl.dot`` of float8 tiles: exact products summed in f32."""
    import ml_dtypes
    from .. import tolerances
    tl_name, ml_name = _FLOAT8[fmt]
    ml = getattr(ml_dtypes, ml_name)
    n = 32
    a = ctx.rng.standard_normal((n, n)).astype(ml)
    b = ctx.rng.standard_normal((n, n)).astype(ml)
    out = ctx.output((n, n), "f32")
    ctx.launch(float8_dot_kernel, (1,), ctx.input(a.view(np.uint8)), ctx.input(b.view(np.uint8)),
               out, F8=getattr(tl, tl_name), N=n)
    wa, wb = a.astype(np.float64), b.astype(np.float64)
    ctx.check(f"dot of {fmt}", out, wa @ wb, "f32", tolerances.accumulation(n, "f32"),
              np.abs(wa) @ np.abs(wb))
