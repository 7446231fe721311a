"""Comparisons (signed, unsigned, float with NaN), bitwise ops, shifts and ``tl.where``."""
from __future__ import annotations

import numpy as np

import anytile as at
import anytile.language as tl

from ..case import family
from ..numerics import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, as_pyint, bits_of, np_dtype, wrap_int
from ..tolerances import EXACT


@at.jit
def compare_kernel(x_ptr, y_ptr, out_ptr, PRED: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    if PRED == "eq":
        c = x == y
    elif PRED == "ne":
        c = x != y
    elif PRED == "lt":
        c = x < y
    elif PRED == "le":
        c = x <= y
    elif PRED == "gt":
        c = x > y
    else:
        c = x >= y
    tl.store(out_ptr + offs, c.to(tl.int32))


PREDICATES = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
              "gt": np.greater, "ge": np.greater_equal}


@family("compare-bitwise",
        quick=dict(pred=list(PREDICATES), dtype=["i32", "u32", "f32"]),
        full=dict(dtype=ALL_DTYPES))
def compare(ctx, pred, dtype):
    """Every predicate, with some equal pairs, and NaNs for floats (ordered compares are false
    on NaN, ``!=`` is true); unsigned values above the signed range compare unsigned."""
    block = 64
    x = ctx.random((block,), dtype)
    y = ctx.random((block,), dtype)
    y[::3] = x[::3]
    if dtype in FLOAT_DTYPES:
        x[1::7] = np.nan
        y[2::7] = np.nan
    out = ctx.output((block,), "i32")
    ctx.launch(compare_kernel, (1,), ctx.input(x), ctx.input(y), out, PRED=pred, BLOCK=block)
    if dtype in FLOAT_DTYPES:   # NumPy compares bfloat16 through float64 exactly
        x, y = x.astype(np.float64), y.astype(np.float64)
    ref = PREDICATES[pred](x, y)
    ctx.check(f"x {pred} y", out, ref.astype(np.int32), "i32", EXACT)


@at.jit
def bitwise_kernel(x_ptr, y_ptr, out_ptr, OP: tl.constexpr, BITS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    if OP == "and":
        z = x & y
    elif OP == "or":
        z = x | y
    elif OP == "xor":
        z = x ^ y
    elif OP == "shl":
        z = x << (y & (BITS - 1))
    else:
        z = x >> (y & (BITS - 1))
    tl.store(out_ptr + offs, z)


@family("compare-bitwise",
        quick=dict(op=["and", "or", "xor", "shl", "shr"], dtype=["i32", "u8"]),
        full=dict(dtype=INT_DTYPES))
def bitwise(ctx, op, dtype):
    """Bitwise ops; shifts by in-range amounts, ``>>`` arithmetic for signed, logical for
    unsigned."""
    block = 64
    bits = bits_of(dtype)
    x = ctx.random((block,), dtype)
    y = ctx.random((block,), dtype)
    out = ctx.output((block,), dtype)
    ctx.launch(bitwise_kernel, (1,), ctx.input(x), ctx.input(y), out, OP=op, BITS=bits, BLOCK=block)
    a, b = as_pyint(x), as_pyint(y)
    amount = np.array([int(v) & (bits - 1) for v in b.ravel()], dtype=object)
    ref = {"and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
           "shl": lambda: a << amount, "shr": lambda: a >> amount}[op]()
    ctx.check(f"x {op} y", out, wrap_int(ref, dtype), dtype, EXACT)


@at.jit
def mixed_shift_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) >> tl.load(y_ptr + offs))


@family("compare-bitwise",
        quick=dict(types=[("i8", "u16", "u16")]),
        full=dict(types=[("i8", "u16", "u16"), ("i16", "u16", "u16"), ("i32", "u32", "u32"),
                         ("i8", "u32", "u32"), ("u8", "i32", "i32"), ("u16", "i32", "i32")]))
def mixed_signedness_shift(ctx, types):
    """``x >> y`` of a signed and an unsigned operand: the result has the promoted type (the
    unsigned one when it is at least as wide), but the shift follows ``x``'s own signedness:
    arithmetic for a signed ``x`` (Triton: int8 -8 >> uint16 1 is 65532), logical otherwise."""
    x_type, y_type, out_type = types
    block = 64
    x = ctx.random((block,), x_type)
    y = np.array([int(v) % bits_of(x_type) for v in as_pyint(ctx.random((block,), y_type)).ravel()])
    out = ctx.output((block,), out_type)
    ctx.launch(mixed_shift_kernel, (1,), ctx.input(x), ctx.input(y.astype(np_dtype(y_type))),
               out, BLOCK=block)
    shifted = np.array([v >> int(s) for v, s in zip(as_pyint(x).ravel(), y)], dtype=object)
    ctx.check("x >> y", out, wrap_int(shifted, out_type), out_type, EXACT)


@at.jit
def where_kernel(c_ptr, x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    c = tl.load(c_ptr + offs) > 0
    x = tl.load(x_ptr + offs)
    scalar_y = tl.load(y_ptr)
    both = (x > 0) & c | ~c & (x < 0)
    z = tl.where(both, x, scalar_y)
    tl.store(out_ptr + offs, z)


@family("compare-bitwise", quick=dict(dtype=["f32", "i16"]), full=dict(dtype=ALL_DTYPES),
        where=lambda dtype: not dtype.startswith("u"))
def where_and_logic(ctx, dtype):
    """``tl.where`` with a boolean tile built by ``& | ~`` on ``i1``, and a scalar branch."""
    block = 64
    c = ctx.random((block,), "i32", -5, 5)
    x = ctx.random((block,), dtype, -100, 100)
    y = ctx.random((1,), dtype, -100, 100)
    out = ctx.output((block,), dtype)
    ctx.launch(where_kernel, (1,), ctx.input(c), ctx.input(x), ctx.input(y), out, BLOCK=block)
    cond = c > 0
    both = ((x > 0) & cond) | (~cond & (x < 0))
    ctx.check("where", out, np.where(both, x, y[0]), dtype, EXACT)
