"""Elementwise semantics of the tile IR, in NumPy.

Each ``*_fn`` function takes the static facts of one op (kind, operand type) and returns a
callable on NumPy arrays or NumPy scalars; the executor resolves these once per op at load
time so that running an op is a single call.  The callables never write into their
operands and must be called under ``np.errstate(all="ignore")`` (integer arithmetic wraps).

Choices where the IR leaves the result undefined (documented, so that tests may rely on the
interpreter being deterministic, never on other backends agreeing):

* integer ``div``/``rem`` by zero gives 0; ``INT_MIN / -1`` gives ``INT_MIN``, remainder 0;
* shift amounts outside ``[0, bits)`` give 0 (``shl``, logical ``shr``) or the sign fill
  (arithmetic ``shr``).

``f16``/``bf16`` arithmetic is computed in ``f32`` and rounded once per op; the float math
functions (``exp``, ``sin``, ...) of ``f16``/``bf16``/``f32`` are computed in ``f64`` and
rounded once, so they are correctly rounded in practice.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from ..ir.types import (PointerType, ScalarType, bf16, f16, float8_codes, float8_values,
                        stored_as_code)
from ..ir.types import f32 as F32_TYPE
from ..ir.types import f64 as F64_TYPE

Fn = Callable[..., Any]

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I64 = np.dtype(np.int64)
U64 = np.dtype(np.uint64)
_SMALL_FLOATS = (f16, bf16)


class UnsupportedOp(Exception):
    """An op kind that is not defined on its operand type (the verifier's business)."""


def storage_dtype(t: Any) -> np.dtype:
    """The NumPy dtype holding values of element type ``t`` (pointers are int64 addresses)."""
    return I64 if isinstance(t, PointerType) else t.np


def _in_f32(fn: Fn, t: ScalarType) -> Fn:
    """``fn`` computed in f32 on f16/bf16 operands and rounded once to ``t``."""
    if t not in _SMALL_FLOATS:
        return fn
    out = t.np
    return lambda *xs: fn(*(x.astype(F32) for x in xs)).astype(out)


def _in_f64(fn: Fn, t: ScalarType) -> Fn:
    """``fn`` computed in f64 and rounded once to ``t`` (for the math functions)."""
    if t.name == "f64":
        return fn
    return lambda x: round_f64_to(fn(x.astype(F64)), t)


# ---------------------------------------------------------------------------------------------
# Correctly rounded conversions (round-to-odd keeps two-step roundings exact)
# ---------------------------------------------------------------------------------------------
def _round_to_odd_sum(x: Any, y: Any) -> Any:
    """``x + y`` (f64) rounded to odd: exact sums are kept, inexact ones get an odd last
    bit, so that a later round-to-nearest to <= 51 bits rounds the exact sum only once."""
    x, y = np.asarray(x, F64), np.asarray(y, F64)
    s = x + y
    bp = s - x
    err = (x - (s - bp)) + (y - bp)          # Knuth's TwoSum: s + err == x + y exactly
    fix = (err != 0) & np.isfinite(s) & ((s.view(I64) & 1) == 0)
    if np.any(fix):
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def round_f64_to(x: Any, t: ScalarType) -> Any:
    """f64 values rounded to nearest even in float type ``t`` (one rounding, also for bf16,
    whose own f64 conversion rounds through f32, and for the float8 formats held as codes)."""
    if stored_as_code(t):
        return np.asarray(float8_codes(x, t)).view(t.np)[()]
    if t.name != "bf16":
        return x.astype(t.np)
    x = np.asarray(x, F64)
    r = x.astype(F32)
    wide = r.astype(F64)
    fix = (wide != x) & np.isfinite(wide) & ((r.view(np.int32) & 1) == 0)
    if np.any(fix):                          # round to odd in f32, then to nearest in bf16
        r = np.where(fix, np.nextafter(r, np.where(x > wide, np.inf, -np.inf).astype(F32)), r)
    return r.astype(t.np)[()]


def _int_to_float(src: ScalarType, dst: ScalarType) -> Fn:
    if src.bits <= 32 or dst.name == "f64":
        if dst.name == "bf16":               # exact in f64, then one rounding
            return lambda x: round_f64_to(x.astype(F64), dst)
        return lambda x: x.astype(dst.np)
    wide = U64 if src.is_unsigned else I64
    low_mask = wide.type(0xFFFFFFFF)

    def convert(x: Any) -> Any:
        low = x & low_mask
        high = x - low                       # a multiple of 2^32: exact in f64
        return round_f64_to(_round_to_odd_sum(high.astype(F64), low.astype(F64)), dst)

    return convert


def _float_to_int(dst: ScalarType) -> Fn:
    info = np.iinfo(dst.np)
    hi, lo = dst.np.type(info.max), dst.np.type(info.min)
    # float(info.max) rounds up to 2^bits for 64-bit types, so ">=" saturates exactly
    hi_f, lo_f = float(info.max), float(info.min)

    def convert(x: Any) -> Any:
        v = np.trunc(x.astype(F64))
        nan = np.isnan(v)
        big, small = v >= hi_f, v <= lo_f
        safe = np.where(nan | big | small, 0.0, v).astype(dst.np)
        return np.where(big, hi, np.where(small, lo, np.where(nan, dst.np.type(0), safe)))

    return convert


def cast_fn(src: Any, dst: Any) -> Fn:
    """Value conversion ``src`` -> ``dst`` as ``CastOp`` defines it."""
    if src == dst:
        return lambda x: x
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        out = storage_dtype(dst)
        return lambda x: x.astype(out)
    if stored_as_code(src):            # its exact value (f32 holds each), then cast as an f32
        rest = cast_fn(F32_TYPE, dst)
        return lambda x: rest(float8_values(x, src)[()])
    if stored_as_code(dst) and not src.is_float:
        exact = cast_fn(src, F64_TYPE)  # exact up to 2**53; past that 1.75 (saturated) anyway
        return lambda x: round_f64_to(exact(x), dst)
    if dst.is_bool:
        return lambda x: x != 0
    if src.is_bool:
        return lambda x: x.astype(dst.np)
    if src.is_int and dst.is_int:
        return lambda x: x.astype(dst.np)      # C casts: truncate, extend by source sign
    if src.is_int:
        return _int_to_float(src, dst)
    if dst.is_int:
        return _float_to_int(dst)
    return lambda x: round_f64_to(x.astype(F64), dst)


def bitcast_fn(src: Any, dst: Any) -> Fn:
    out = storage_dtype(dst)
    if storage_dtype(src).itemsize != out.itemsize:
        raise UnsupportedOp(f"bitcast between {src} and {dst} of different widths")

    def reinterpret(x: Any) -> Any:
        arr = np.asarray(x).view(out)
        return arr[()] if arr.ndim == 0 else arr

    return reinterpret


# ---------------------------------------------------------------------------------------------
# Binary, unary, compare
# ---------------------------------------------------------------------------------------------
def _c_div(dtype: np.dtype) -> Fn:
    one, zero = dtype.type(1), dtype.type(0)

    def div(a: Any, b: Any) -> Any:
        bad = (b == 0) | (b == -1)
        safe = np.where(bad, one, b)
        q = (a - np.fmod(a, safe)) // safe   # exact: the numerator is a multiple of safe
        return np.where(b == -1, np.negative(a), np.where(b == 0, zero, q))

    return div


def _c_rem(dtype: np.dtype) -> Fn:
    one, zero = dtype.type(1), dtype.type(0)

    def rem(a: Any, b: Any) -> Any:
        bad = (b == 0) | (b == -1)
        return np.where(bad, zero, np.fmod(a, np.where(bad, one, b)))

    return rem


def _unsigned_div(ufunc: Any, dtype: np.dtype) -> Fn:
    one, zero = dtype.type(1), dtype.type(0)
    return lambda a, b: np.where(b == 0, zero, ufunc(a, np.where(b == 0, one, b)))


def _shift(t: ScalarType, left: bool) -> Fn:
    bits, zero = t.bits, t.np.type(0)
    arithmetic = not left and t.is_signed

    def shift(a: Any, b: Any) -> Any:
        ok = (b >= 0) & (b < bits)
        amount = np.where(ok, b, zero)
        if left:
            return np.where(ok, np.left_shift(a, amount), zero)
        if arithmetic:                       # out of range: the sign fill
            return np.right_shift(a, np.where(ok, amount, t.np.type(bits - 1)))
        return np.where(ok, np.right_shift(a, amount), zero)

    return shift


_BOOL_BINARY: dict[str, Fn] = {
    "add": np.logical_xor, "sub": np.logical_xor, "mul": np.logical_and,
    "div": np.logical_and, "rem": lambda a, b: np.logical_and(a, False),
    "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
    "shl": lambda a, b: np.logical_and(a, np.logical_not(b)),
    "shr": lambda a, b: np.logical_and(a, np.logical_not(b)),
    "min": np.logical_and, "max": np.logical_or,
}


def _zeros_ordered(result: Any, a: Any, b: Any, tie: Fn) -> Any:
    """``result`` where ``a != b``; where they are equal (only +0 and -0 differ then), ``tie``
    of their bits: ``bitwise_and`` gives +0 unless both are -0, ``bitwise_or`` -0 unless both
    are +0."""
    a, b = np.asarray(a), np.asarray(b)
    bits = np.dtype(f"u{a.dtype.itemsize}")
    ordered = np.asarray(tie(a.view(bits), b.view(bits))).view(a.dtype)
    return np.where(a == b, ordered, result)[()]


def _max_num(a: Any, b: Any) -> Any:
    """IEEE 754-2019 maximumNumber: a NaN operand gives the other; max(-0, +0) = +0."""
    return _zeros_ordered(np.fmax(a, b), a, b, np.bitwise_and)


def _min_num(a: Any, b: Any) -> Any:
    """IEEE 754-2019 minimumNumber: a NaN operand gives the other; min(-0, +0) = -0."""
    return _zeros_ordered(np.fmin(a, b), a, b, np.bitwise_or)


def binary_fn(kind: str, t: Any) -> Fn:
    """``lhs <kind> rhs`` on values of type ``t`` (see ``BinaryOp``)."""
    if isinstance(t, PointerType):
        raise UnsupportedOp(f"binary '{kind}' is not defined on pointers")
    if t.is_bool:
        if kind not in _BOOL_BINARY:
            raise UnsupportedOp(f"binary '{kind}' is not defined on i1")
        return _BOOL_BINARY[kind]
    if t.is_float:
        table: dict[str, Fn] = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                                "fdiv": np.true_divide, "rem": np.fmod,
                                "min": _min_num, "max": _max_num}
        if kind == "div":                    # floor of the quotient rounded to t
            quotient, floor = binary_fn("fdiv", t), unary_fn("floor", t)
            return lambda a, b: floor(quotient(a, b))
        if kind not in table:
            raise UnsupportedOp(f"binary '{kind}' is not defined on {t}")
        return _in_f32(table[kind], t)
    dtype = t.np
    int_table: dict[str, Fn] = {
        "add": np.add, "sub": np.subtract, "mul": np.multiply,
        "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
        "min": np.minimum, "max": np.maximum,
        "div": _c_div(dtype) if t.is_signed else _unsigned_div(np.floor_divide, dtype),
        "rem": _c_rem(dtype) if t.is_signed else _unsigned_div(np.remainder, dtype),
        "shl": _shift(t, left=True), "shr": _shift(t, left=False),
    }
    if kind not in int_table:
        raise UnsupportedOp(f"binary '{kind}' is not defined on {t}")
    return int_table[kind]


def _erf(x: Any) -> Any:
    return np.asarray(_ERF_UFUNC(x), dtype=F64)[()]


_ERF_UFUNC = np.frompyfunc(math.erf, 1, 1)

_FLOAT_MATH: dict[str, Fn] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "floor": np.floor,
    "ceil": np.ceil, "erf": _erf, "tanh": np.tanh,
}


def unary_fn(kind: str, t: Any) -> Fn:
    """``kind(src)`` on values of type ``t`` (see ``UnaryOp``)."""
    if isinstance(t, PointerType):
        raise UnsupportedOp(f"unary '{kind}' is not defined on pointers")
    if stored_as_code(t) and kind in ("neg", "abs"):     # the sign is the code's top bit
        flip = (lambda c: c ^ 0x80) if kind == "neg" else (lambda c: c & 0x7F)
        return lambda x: flip(np.asarray(x).view(np.uint8)).view(t.np)[()]
    if stored_as_code(t) and kind in _FLOAT_MATH:
        math_fn = _FLOAT_MATH[kind]
        return lambda x: round_f64_to(math_fn(float8_values(x, t).astype(F64)), t)
    if t.is_float:
        if kind == "neg":
            return _in_f32(np.negative, t)
        if kind == "abs":
            return _in_f32(np.abs, t)
        if kind in _FLOAT_MATH:
            return _in_f64(_FLOAT_MATH[kind], t)
        raise UnsupportedOp(f"unary '{kind}' is not defined on {t}")
    if t.is_bool:
        table: dict[str, Fn] = {"neg": lambda x: x, "abs": lambda x: x, "not": np.logical_not}
    else:
        table = {"neg": np.negative, "not": np.invert,
                 "abs": np.abs if t.is_signed else (lambda x: x)}   # abs(INT_MIN) wraps
    if kind not in table:
        raise UnsupportedOp(f"unary '{kind}' is not defined on {t}")
    return table[kind]


_COMPARE: dict[str, Fn] = {"eq": np.equal, "ne": np.not_equal, "lt": np.less,
                           "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}


def compare_fn(pred: str, t: Any) -> Fn:
    """The ``i1`` comparison ``lhs <pred> rhs`` (ordered for floats except ``ne``)."""
    if pred not in _COMPARE:
        raise UnsupportedOp(f"unknown comparison '{pred}'")
    fn = _COMPARE[pred]
    if isinstance(t, ScalarType) and t in _SMALL_FLOATS:
        return lambda a, b: fn(a.astype(F32), b.astype(F32))
    return fn


def select(cond: Any, a: Any, b: Any) -> Any:
    out = np.where(cond, a, b)
    return out[()] if out.ndim == 0 else out


# ---------------------------------------------------------------------------------------------
# fma and umulhi
# ---------------------------------------------------------------------------------------------
def _fma_f64(a: Any, b: Any, c: Any) -> Any:
    """Exact ``a * b + c`` rounded once, element by element through rationals (rare op)."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    a, b, c = (np.broadcast_to(np.asarray(x, F64), shape).reshape(-1) for x in (a, b, c))
    naive = a * b + c
    out = naive.copy()
    for i in np.flatnonzero(np.isfinite(a) & np.isfinite(b) & np.isfinite(c)):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        if exact != 0:                       # exact zeros keep the sign a*b+c gives them
            try:
                out[i] = float(exact)
            except OverflowError:
                out[i] = math.inf if exact > 0 else -math.inf
    return out.reshape(shape)[()]


def fma_fn(t: ScalarType) -> Fn:
    """``a * b + c`` with one rounding: exact f64 products and a round-to-odd sum for
    narrower types, rationals for f64."""
    if not t.is_float:
        raise UnsupportedOp(f"fma is not defined on {t}")
    if t.name == "f64":
        return _fma_f64

    def fma(a: Any, b: Any, c: Any) -> Any:
        product = a.astype(F64) * b.astype(F64)        # exact for <= 24-bit significands
        out = round_f64_to(_round_to_odd_sum(product, c.astype(F64)), t)
        return out[()] if np.ndim(out) == 0 else out

    return fma


def umulhi_fn(t: ScalarType) -> Fn:
    """The high ``bits`` of the double-width product (signedness from ``t``)."""
    if not t.is_int or t.is_bool:
        raise UnsupportedOp(f"umulhi is not defined on {t}")
    if t.bits <= 32:
        wide = I64 if t.is_signed else U64
        shift = wide.type(t.bits)
        return lambda a, b: ((a.astype(wide) * b.astype(wide)) >> shift).astype(t.np)
    mask, s32 = np.uint64(0xFFFFFFFF), np.uint64(32)

    def unsigned_high(a: Any, b: Any) -> Any:
        a_lo, a_hi, b_lo, b_hi = a & mask, a >> s32, b & mask, b >> s32
        cross1, cross2 = a_lo * b_hi, a_hi * b_lo
        middle = ((a_lo * b_lo) >> s32) + (cross1 & mask) + (cross2 & mask)
        return a_hi * b_hi + (cross1 >> s32) + (cross2 >> s32) + (middle >> s32)

    if t.is_unsigned:
        return unsigned_high

    def signed_high(a: Any, b: Any) -> Any:
        ua, ub = np.asarray(a).view(U64), np.asarray(b).view(U64)
        high = unsigned_high(ua, ub)
        high = high - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
        out = np.asarray(high).view(I64)
        return out[()] if out.ndim == 0 else out

    return signed_high
