"""Exact numerics the oracle needs: dtype facts, correct rounding, ULP distances, poison.

Dtypes are named as in the IR (``f32``, ``bf16``, ``i8``, ``u64``...).  Float references are
computed in float64 (or ``np.longdouble`` for f64 results) and rounded here, exactly, to the
output format; integer references are computed on Python ints and wrapped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import ml_dtypes
import numpy as np

FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")
SIGNED_DTYPES = ("i8", "i16", "i32", "i64")
UNSIGNED_DTYPES = ("u8", "u16", "u32", "u64")
INT_DTYPES = SIGNED_DTYPES + UNSIGNED_DTYPES
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES

NUMPY_DTYPES: dict[str, np.dtype] = {
    "i1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
}

#: the ``anytile.language`` attribute naming each dtype (``tl.float32``...)
TL_NAMES = {"i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
            "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
            "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}

#: the capability a dtype needs (keys of ``anytile.backend.CAPABILITIES``)
DTYPE_CAPABILITY = {"f64": "fp64", "f16": "fp16", "bf16": "bf16"}


def capabilities_for(*dtypes: str) -> set[str]:
    """The capabilities a case using ``dtypes`` needs."""
    return {DTYPE_CAPABILITY[d] for d in dtypes if d in DTYPE_CAPABILITY}


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-754 binary format: ``precision`` bits including the implicit one."""

    precision: int
    emin: int
    emax: int

    @property
    def max_finite(self) -> float:
        return float((2.0 - 2.0 ** (1 - self.precision)) * 2.0 ** self.emax)

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -self.precision


FLOAT_FORMATS = {"f16": FloatFormat(11, -14, 15), "bf16": FloatFormat(8, -126, 127),
                 "f32": FloatFormat(24, -126, 127), "f64": FloatFormat(53, -1022, 1023)}


def np_dtype(name: str) -> np.dtype:
    return NUMPY_DTYPES[name]


def is_float(name: str) -> bool:
    return name in FLOAT_DTYPES


def is_signed(name: str) -> bool:
    return name in SIGNED_DTYPES


def bits_of(name: str) -> int:
    return 1 if name == "i1" else np_dtype(name).itemsize * 8


def int_range(name: str) -> tuple[int, int]:
    """The inclusive range of integer dtype ``name``."""
    bits = bits_of(name)
    if name in SIGNED_DTYPES:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def wrap_int(values, name: str) -> np.ndarray:
    """Python-int results (any object array or sequence) wrapped modulo 2^bits into ``name``."""
    bits = bits_of(name)
    lo, _ = int_range(name)
    flat = [((int(v) - lo) % (1 << bits)) + lo for v in np.asarray(values, dtype=object).ravel()]
    return np.array(flat, dtype=np_dtype(name)).reshape(np.shape(values))


def as_pyint(array: np.ndarray) -> np.ndarray:
    """An object array of exact Python ints (so arithmetic never wraps)."""
    return np.array([int(v) for v in np.asarray(array).ravel()], dtype=object).reshape(np.shape(array))


def wide_float(name: str):
    """The NumPy type references for ``name`` are computed in: longdouble for f64."""
    return np.longdouble if name == "f64" else np.float64


def round_to_format(exact: np.ndarray, name: str) -> np.ndarray:
    """``exact`` (float64 or longdouble) rounded to nearest-even in float format ``name``,
    with gradual underflow and overflow to infinity; returned in the same wide type."""
    fmt = FLOAT_FORMATS[name]
    x = np.asarray(exact)
    finite = np.isfinite(x) & (x != 0)
    safe = np.where(finite, x, 1)
    _, e = np.frexp(safe)
    quantum_exp = np.maximum(e.astype(np.int64) - 1, fmt.emin) - (fmt.precision - 1)
    rounded = np.ldexp(np.rint(np.ldexp(safe, -quantum_exp)), quantum_exp)
    rounded = np.where(np.abs(rounded) > fmt.max_finite, np.copysign(np.inf, safe), rounded)
    return np.where(finite, rounded, x)


def ulp_of(exact: np.ndarray, name: str) -> np.ndarray:
    """The spacing of format ``name`` at the magnitude of ``exact`` (OpenCL's definition:
    for ``2^e <= |x| < 2^(e+1)`` it is ``2^(e-p+1)``; subnormal spacing below ``2^emin``,
    which is also the spacing at zero)."""
    fmt = FLOAT_FORMATS[name]
    x = np.asarray(exact)
    safe = np.where(np.isfinite(x) & (x != 0), x, 2.0 ** fmt.emin)
    _, e = np.frexp(safe)
    quantum_exp = np.maximum(e.astype(np.int64) - 1, fmt.emin) - (fmt.precision - 1)
    return np.ldexp(np.ones_like(safe), quantum_exp)


def ulp_error(got: np.ndarray, exact: np.ndarray, name: str) -> np.ndarray:
    """Per element, ``|got - exact|`` in ULPs of ``name`` at ``exact``.  NaN vs NaN and
    equal infinities are 0; an infinity where the rounded reference is finite (or the
    reverse) is ``inf``."""
    wide = wide_float(name)
    g = np.asarray(got).astype(wide)
    x = np.asarray(exact).astype(wide)
    rounded = round_to_format(x, name)
    both_nan = np.isnan(g) & np.isnan(x)
    same_inf = np.isinf(g) & np.isinf(rounded) & (np.sign(g) == np.sign(rounded))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(g - x) / ulp_of(x, name)
    err = np.where(np.isnan(err) | np.isinf(g) | np.isinf(rounded), np.inf, err)
    return np.where(both_nan | same_inf, 0.0, err).astype(np.float64)


# -- poison ----------------------------------------------------------------------------------
#: bit patterns written into outputs before a kernel runs: quiet NaNs with a payload no
#: arithmetic produces, and for integers a value random inputs almost never hit
POISON_BITS = {"f16": 0x7E5A, "bf16": 0x7FDA, "f32": 0x7FC0DEAD, "f64": 0x7FF8DEADBEEFDEAD,
               "i1": 1, "i8": -91, "i16": -23131, "i32": -1515870811,
               "i64": -6510615555426900571, "u8": 0xA5, "u16": 0xA5A5, "u32": 0xA5A5A5A5,
               "u64": 0xA5A5A5A5A5A5A5A5}
_UINT_OF = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def poison(shape, name: str) -> np.ndarray:
    """A host array of ``shape`` filled with ``name``'s poison pattern."""
    if name in FLOAT_DTYPES:
        raw = np.full(shape, POISON_BITS[name], dtype=_UINT_OF[np_dtype(name).itemsize])
        return raw.view(np_dtype(name))
    return np.full(shape, POISON_BITS[name], dtype=np_dtype(name))


def is_poison(values: np.ndarray, name: str) -> np.ndarray:
    """Where ``values`` still hold the poison pattern (an element the kernel never wrote)."""
    v = np.asarray(values)
    if name in FLOAT_DTYPES:
        return v.view(_UINT_OF[v.dtype.itemsize]) == POISON_BITS[name]
    return v == POISON_BITS[name]


# -- random inputs ---------------------------------------------------------------------------
def random_array(rng: np.random.Generator, shape, name: str, low: Optional[float] = None,
                 high: Optional[float] = None, nonzero: bool = True) -> np.ndarray:
    """Random values of dtype ``name`` in ``[low, high)`` (defaults: a moderate range that
    exercises signs and several binades), never zero unless ``nonzero`` is False."""
    shape = tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    if name in FLOAT_DTYPES:
        lo = -4.0 if low is None else low
        hi = 4.0 if high is None else high
        x = rng.uniform(lo, hi, size=shape)
        with np.errstate(over="ignore"):     # ranges past the format's max become inf on purpose
            out = x.astype(np_dtype(name))
        if nonzero:
            tiny = np.asarray(max(abs(lo), abs(hi)) * 1e-3 + 1e-3).astype(np_dtype(name))
            out = np.where(out == 0, tiny, out).astype(np_dtype(name))
        return out
    if name == "i1":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    dlo, dhi = int_range(name)
    lo = dlo if low is None else max(dlo, int(low))
    hi = dhi if high is None else min(dhi, int(high) - 1)
    x = rng.integers(lo, hi, size=shape, dtype=np.int64 if name != "u64" else np.uint64,
                     endpoint=True)
    out = x.astype(np_dtype(name))
    if nonzero:
        replacement = 1 if hi >= 1 else -1
        out = np.where(out == 0, replacement, out).astype(np_dtype(name))
    return out
