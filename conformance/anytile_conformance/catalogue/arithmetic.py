"""Arithmetic and type promotion: + - * / // % min max on every dtype (wrapping integers, C
division), unary ops, fma, umulhi, and the promotion rules of mixed operands."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

import anytile as at
import anytile.language as tl

from .. import tolerances
from ..case import CaseFailure, family
from ..numerics import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, as_pyint, capabilities_for,
                        int_range, np_dtype, round_to_format, wrap_int)
from .common import FULL_WARPS, QUICK_WARPS, cdiv, grid_of_rank, programs_in, wide


@at.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if OP == "add":
        z = x + y
    elif OP == "sub":
        z = x - y
    elif OP == "mul":
        z = x * y
    elif OP == "fdiv":
        z = x / y
    elif OP == "div":
        z = x // y
    elif OP == "rem":
        z = x % y
    elif OP == "min":
        z = tl.minimum(x, y)
    else:
        z = tl.maximum(x, y)
    tl.store(out_ptr + offs, z, mask=mask)


def _int_reference(op: str, x: np.ndarray, y: np.ndarray, dtype: str) -> np.ndarray:
    a, b = as_pyint(x), as_pyint(y)
    if op in ("div", "rem"):
        quotient = np.array([abs(p) // abs(q) * (1 if (p < 0) == (q < 0) else -1)
                             for p, q in zip(a.ravel(), b.ravel())], dtype=object).reshape(a.shape)
        return wrap_int(quotient if op == "div" else a - b * quotient, dtype)
    table = {"add": a + b, "sub": a - b, "mul": a * b}
    if op in table:
        return wrap_int(table[op], dtype)
    return np.minimum(x, y) if op == "min" else np.maximum(x, y)


def _float_reference(op: str, x: np.ndarray, y: np.ndarray, dtype: str) -> np.ndarray:
    a, b = wide(x, dtype), wide(y, dtype)
    table = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
             "fdiv": lambda: a / b, "rem": lambda: np.fmod(a, b),
             "min": lambda: np.minimum(a, b), "max": lambda: np.maximum(a, b)}
    return table[op]()


BINARY_OPS = ("add", "sub", "mul", "fdiv", "div", "rem", "min", "max")


def _binary_applies(op: str, dtype: str, **_: object) -> bool:
    if op == "fdiv":
        return dtype in FLOAT_DTYPES
    if op == "div":    # float // is floor(x / y) of a rounded quotient: not a portable contract
        return dtype in INT_DTYPES
    return True


@family("arithmetic",
        quick=dict(op=BINARY_OPS, dtype=["i32", "f32", "bf16"], warps=QUICK_WARPS, grid_rank=[1]),
        full=dict(dtype=ALL_DTYPES, warps=FULL_WARPS, grid_rank=[1, 2, 3]),
        where=_binary_applies)
def binary(ctx, op, dtype, warps, grid_rank):
    """One binary operator on two random tiles of one dtype (integers over their full range,
    so wrapping is exercised)."""
    n, block = 200, 64
    grid = grid_of_rank(cdiv(n, block), grid_rank)
    x = ctx.random((n,), dtype)
    y = ctx.random((n,), dtype)
    if dtype in INT_DTYPES and op in ("div", "rem"):
        lo, _ = int_range(dtype)
        x = np.where(x == lo, lo + 1, x).astype(x.dtype)   # INT_MIN // -1 overflows (undefined)
    out = ctx.output((programs_in(grid) * block,), dtype)
    ctx.launch(binary_kernel, grid, ctx.input(x), ctx.input(y), out, n, OP=op, BLOCK=block,
               num_warps=warps)
    got = out.numpy()[:n]
    if dtype in INT_DTYPES:
        ctx.check(f"x {op} y", got, _int_reference(op, x, y, dtype), dtype, tolerances.EXACT)
    else:
        tol = tolerances.EXACT if op in ("min", "max") else tolerances.arithmetic(op, dtype)
        ctx.check(f"x {op} y", got, _float_reference(op, x, y, dtype), dtype, tol)


@family("arithmetic", quick=dict(dtype=["f32"]), full=dict(dtype=FLOAT_DTYPES))
def min_max_nan(ctx, dtype):
    """``tl.minimum``/``tl.maximum`` return the other operand when exactly one is NaN."""
    n = 64
    x = ctx.random((n,), dtype)
    y = ctx.random((n,), dtype)
    x[::4] = np.nan
    y[1::4] = np.nan
    for op, ref in (("min", np.fmin), ("max", np.fmax)):
        out = ctx.output((n,), dtype)
        ctx.launch(binary_kernel, (1,), ctx.input(x), ctx.input(y), out, n, OP=op, BLOCK=n)
        ctx.check(f"{op} with NaN", out, ref(wide(x, dtype), wide(y, dtype)), dtype,
                  tolerances.EXACT)


@at.jit
def min_max_rows_kernel(x_ptr, max_rows_ptr, min_rows_ptr, max_cols_ptr, min_cols_ptr,
                        ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.arange(0, ROWS)
    cols = tl.arange(0, COLS)
    x = tl.load(x_ptr + rows[:, None] * COLS + cols[None, :])
    tl.store(max_rows_ptr + rows, tl.max(x, axis=1))
    tl.store(min_rows_ptr + rows, tl.min(x, axis=1))
    tl.store(max_cols_ptr + cols, tl.max(x, axis=0))
    tl.store(min_cols_ptr + cols, tl.min(x, axis=0))


def _signed_zero_reference(op: str, values: np.ndarray, axis: int) -> np.ndarray:
    """max/min along ``axis`` with -0 < +0 (IEEE 754-2019 maximumNumber/minimumNumber)."""
    plain = np.max(values, axis=axis) if op == "max" else np.min(values, axis=axis)
    positive_zero = (values == 0) & ~np.signbit(values)
    negative_zero = (values == 0) & np.signbit(values)
    if op == "max":
        zero = np.where(positive_zero.any(axis=axis), 0.0, -0.0)
    else:
        zero = np.where(negative_zero.any(axis=axis), -0.0, 0.0)
    return np.where(plain == 0, zero, plain)


def _check_signs(ctx, label: str, got, expected: np.ndarray, dtype: str) -> None:
    """Fail unless every zero of ``got`` has ``expected``'s sign (values: ``ctx.check``)."""
    host = wide(got.numpy(), dtype)
    wrong = (host == 0) & (np.signbit(host) != np.signbit(expected))
    if wrong.any():
        i = int(np.flatnonzero(wrong.ravel())[0])
        raise CaseFailure(f"{label}: {int(wrong.sum())} zero(s) of the wrong sign, first at "
                          f"{i}: got {host.ravel()[i]}, expected {expected.ravel()[i]}\n"
                          f"    (case seed {ctx.seed})")


@family("arithmetic", quick=dict(dtype=["f32"]), full=dict(dtype=FLOAT_DTYPES))
def min_max_signed_zeros(ctx, dtype):
    """``tl.maximum``/``tl.minimum`` and the ``tl.max``/``tl.min`` reductions order -0 below
    +0, whatever the operands' order: max(-0, +0) = +0, min(-0, +0) = -0 (IEEE 754-2019
    maximumNumber/minimumNumber; a NaN operand still gives the other)."""
    n = 64
    x = ctx.random((n,), dtype)
    y = ctx.random((n,), dtype)
    pairs = [(-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (0.0, 0.0), (np.nan, -0.0), (-0.0, np.nan),
             (np.nan, 0.0), (0.0, np.nan)]
    where = ctx.rng.permutation(n)[:3 * len(pairs)]
    for k, i in enumerate(where):
        x[i], y[i] = pairs[k % len(pairs)]
    a, b = wide(x, dtype), wide(y, dtype)
    ties = {"max": np.where(a == b, np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0), 0.0),
            "min": np.where(a == b, np.where(np.signbit(a) | np.signbit(b), -0.0, 0.0), 0.0)}
    for op, ref in (("min", np.fmin), ("max", np.fmax)):
        expected = np.where((a == b) & (a == 0), ties[op], ref(a, b))
        out = ctx.output((n,), dtype)
        ctx.launch(binary_kernel, (1,), ctx.input(x), ctx.input(y), out, n, OP=op, BLOCK=n)
        ctx.check(f"{op} of signed zeros", out, expected, dtype, tolerances.EXACT)
        _check_signs(ctx, f"{op} of signed zeros", out, expected, dtype)

    rows, cols = 8, 16
    signs = ctx.rng.random((rows, cols)) < 0.5
    grid = np.where(signs, -0.0, 0.0)
    grid[0], grid[1] = -0.0, 0.0                      # all -0, all +0
    grid[2, :cols // 2] = -ctx.random((cols // 2,), dtype, 1.0, 4.0)   # zeros and negatives
    grid[3, :cols // 2] = ctx.random((cols // 2,), dtype, 1.0, 4.0)    # zeros and positives
    grid[:, 0] = -0.0                                 # a column of -0 and one of +0
    grid[:, 1] = 0.0
    x = grid.astype(np_dtype(dtype))
    outs = [ctx.output((rows,), dtype), ctx.output((rows,), dtype),
            ctx.output((cols,), dtype), ctx.output((cols,), dtype)]
    ctx.launch(min_max_rows_kernel, (1,), ctx.input(x), *outs, ROWS=rows, COLS=cols)
    a = wide(x, dtype)
    for out, op, axis in zip(outs, ("max", "min", "max", "min"), (1, 1, 0, 0)):
        expected = _signed_zero_reference(op, a, axis)
        label = f"tl.{op} along axis {axis} of signed zeros"
        ctx.check(label, out, expected, dtype, tolerances.EXACT)
        _check_signs(ctx, label, out, expected, dtype)


@at.jit
def unary_kernel(x_ptr, out_ptr, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if OP == "neg":
        y = -x
    elif OP == "abs":
        y = tl.abs(x)
    else:
        y = ~x
    tl.store(out_ptr + offs, y)


@family("arithmetic",
        quick=dict(op=["neg", "abs", "not"], dtype=["i8", "f32"]),
        full=dict(dtype=ALL_DTYPES),
        where=lambda op, dtype: not (op == "not" and dtype in FLOAT_DTYPES))
def unary(ctx, op, dtype):
    """Negation, absolute value (abs(INT_MIN) wraps to INT_MIN) and bitwise not."""
    block = 64
    x = ctx.random((block,), dtype)
    if dtype in INT_DTYPES:
        x[0] = int_range(dtype)[0]
    out = ctx.output((block,), dtype)
    ctx.launch(unary_kernel, (1,), ctx.input(x), out, OP=op, BLOCK=block)
    if dtype in INT_DTYPES:
        a = as_pyint(x)
        lo, hi = int_range(dtype)
        ref = {"neg": -a, "abs": np.abs(a), "not": (hi - a) if lo == 0 else (-a - 1)}[op]
        ctx.check(op, out, wrap_int(ref, dtype), dtype, tolerances.EXACT)
    else:
        ref = {"neg": -wide(x, dtype), "abs": np.abs(wide(x, dtype))}[op]
        ctx.check(op, out, ref, dtype, tolerances.EXACT)


@at.jit
def fma_kernel(a_ptr, b_ptr, c_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    r = tl.fma(tl.load(a_ptr + offs), tl.load(b_ptr + offs), tl.load(c_ptr + offs))
    tl.store(out_ptr + offs, r)


@family("arithmetic", quick=dict(dtype=["f32"]), full=dict(dtype=FLOAT_DTYPES))
def fma(ctx, dtype):
    """``tl.fma`` rounds ``a * b + c`` once; the inputs make a separate rounding visible."""
    block = 128
    a = ctx.random((block,), dtype, 1, 2)
    b = ctx.random((block,), dtype, 1, 2)
    c = -(a.astype(np.float64) * b.astype(np.float64)).astype(np_dtype(dtype))  # ~ -(a*b) rounded
    out = ctx.output((block,), dtype)
    ctx.launch(fma_kernel, (1,), ctx.input(a), ctx.input(b), ctx.input(c), out, BLOCK=block)
    exact = [float(Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)))
             for p, q, r in zip(a.tolist(), b.tolist(), c.tolist())]    # one rounding, to f64
    ctx.check("fma", out, np.array(exact), dtype, tolerances.arithmetic("fma", dtype))


@at.jit
def umulhi_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.umulhi(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


@family("arithmetic", quick=dict(dtype=["u32"]), full=dict(dtype=["u32", "i32"]))
def umulhi(ctx, dtype):
    """The high 32 bits of the 64-bit product."""
    block = 64
    x, y = ctx.random((block,), dtype), ctx.random((block,), dtype)
    out = ctx.output((block,), dtype)
    ctx.launch(umulhi_kernel, (1,), ctx.input(x), ctx.input(y), out, BLOCK=block)
    ctx.check("umulhi", out, wrap_int(as_pyint(x) * as_pyint(y) >> 32, dtype), dtype,
              tolerances.EXACT)


@at.jit
def promote_kernel(x_ptr, y_ptr, out_ptr, OUT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    z = tl.load(x_ptr + offs) + tl.load(y_ptr + offs)
    tl.static_assert(z.dtype == OUT)
    tl.store(out_ptr + offs, z)


#: (lhs, rhs) -> the dtype of ``lhs + rhs`` (Triton's rules)
PROMOTIONS = {("i8", "i32"): "i32", ("i32", "i64"): "i64", ("u8", "i8"): "u8",
              ("i16", "u8"): "i16", ("u32", "i32"): "u32", ("i32", "f32"): "f32",
              ("i64", "f16"): "f16", ("f16", "f32"): "f32", ("f16", "bf16"): "f32",
              ("bf16", "f32"): "f32", ("f32", "f64"): "f64", ("i1", "i32"): "i32",
              ("u16", "u64"): "u64", ("i8", "bf16"): "bf16"}
QUICK_PROMOTIONS = [("i8", "i32"), ("u8", "i8"), ("i32", "f32"), ("f16", "bf16")]


def _small(ctx, dtype: str) -> np.ndarray:
    """Random small values (exact in every dtype of the promotion table)."""
    if dtype == "i1":
        return ctx.random((32,), dtype)
    return ctx.random((32,), dtype, 1 if dtype.startswith("u") else -50, 50)


@family("arithmetic", quick=dict(pair=QUICK_PROMOTIONS), full=dict(pair=list(PROMOTIONS)),
        needs=lambda p: capabilities_for(*p["pair"], PROMOTIONS[p["pair"]]))
def promotion(ctx, pair):
    """Mixed-dtype operands promote as Triton does; the sum is computed in the result type."""
    lhs, rhs = pair
    out_dtype = PROMOTIONS[pair]
    block = 32
    x, y = _small(ctx, lhs), _small(ctx, rhs)
    out = ctx.output((block,), out_dtype)
    ctx.launch(promote_kernel, (1,), ctx.input(x), ctx.input(y), out,
               OUT=ctx.tl_dtype(out_dtype), BLOCK=block)
    if out_dtype in FLOAT_DTYPES:
        xs = round_to_format(wide(x.astype(np.float64), out_dtype), out_dtype)
        ys = round_to_format(wide(y.astype(np.float64), out_dtype), out_dtype)
        ctx.check(f"{lhs} + {rhs}", out, xs + ys, out_dtype, tolerances.arithmetic("add", out_dtype))
    else:
        ctx.check(f"{lhs} + {rhs}", out, wrap_int(as_pyint(x) + as_pyint(y), out_dtype), out_dtype,
                  tolerances.EXACT)


@at.jit
def scalar_promote_kernel(x_ptr, out_ptr, S: tl.constexpr, OUT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    z = tl.load(x_ptr + offs) * S
    tl.static_assert(z.dtype == OUT)
    tl.store(out_ptr + offs, z)


SCALAR_PROMOTIONS = [("i8", 3, "i8"), ("i32", 2.5, "f32"), ("f16", 1.5, "f16"), ("u8", 2, "u8"),
                     ("bf16", 3, "bf16")]


@family("arithmetic", quick=dict(case=SCALAR_PROMOTIONS[:2]), full=dict(case=SCALAR_PROMOTIONS),
        needs=lambda p: capabilities_for(p["case"][0]))
def scalar_promotion(ctx, case):
    """A Python number combined with a tile takes the tile's dtype when it is of the same kind
    (int with int, float with float); an int tile times a float literal becomes f32."""
    dtype, scalar, out_dtype = case
    block = 32
    x = ctx.random((block,), dtype, 1, 40)
    out = ctx.output((block,), out_dtype)
    ctx.launch(scalar_promote_kernel, (1,), ctx.input(x), out, S=scalar,
               OUT=ctx.tl_dtype(out_dtype), BLOCK=block)
    if out_dtype in FLOAT_DTYPES:
        ctx.check("x * S", out, wide(x.astype(np.float64), out_dtype) * scalar, out_dtype,
                  tolerances.arithmetic("mul", out_dtype))
    else:
        ctx.check("x * S", out, wrap_int(as_pyint(x) * scalar, out_dtype), out_dtype,
                  tolerances.EXACT)
