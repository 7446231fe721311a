"""Math functions against the ULP table, over domains that keep results normal and finite,
plus the special values every IEEE implementation agrees on (inf, NaN, zeros), and tiles
that mix huge and tiny arguments (an implementation may pick one method for a whole vector)."""
from __future__ import annotations

import math

import numpy as np

import anytile as at
import anytile.language as tl

from .. import tolerances
from ..case import family
from ..numerics import FLOAT_DTYPES, FLOAT_FORMATS, np_dtype
from .common import wide


@at.jit
def math_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1)
    if FN == "exp":
        y = tl.exp(x)
    elif FN == "exp2":
        y = tl.exp2(x)
    elif FN == "log":
        y = tl.log(x)
    elif FN == "log2":
        y = tl.log2(x)
    elif FN == "sqrt":
        y = tl.sqrt(x)
    elif FN == "rsqrt":
        y = tl.rsqrt(x)
    elif FN == "sin":
        y = tl.sin(x)
    elif FN == "cos":
        y = tl.cos(x)
    elif FN == "tanh":
        y = tl.tanh(x)
    elif FN == "erf":
        y = tl.erf(x)
    elif FN == "floor":
        y = tl.floor(x)
    else:
        y = tl.ceil(x)
    tl.store(out_ptr + offs, y, mask=mask)


def _reference(fn: str, x: np.ndarray) -> np.ndarray:
    if fn == "erf":
        return np.array([math.erf(float(v)) for v in x.ravel()], dtype=x.dtype).reshape(x.shape)
    table = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
             "rsqrt": lambda v: 1 / np.sqrt(v), "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
             "floor": np.floor, "ceil": np.ceil}
    return table[fn](x)


#: (low, high, log-uniform) sampling domain per function and dtype: results stay normal/finite
#: (a backend may flush single-precision denormal results to zero, as OpenCL's full profile
#: and Triton's NVIDIA ``exp2`` do, so they are not asked for)
_DOMAINS = {
    "exp": {"f16": (-9.0, 10.0), "bf16": (-80.0, 80.0), "f32": (-80.0, 80.0), "f64": (-700.0, 700.0)},
    "exp2": {"f16": (-13.0, 15.0), "bf16": (-120.0, 120.0), "f32": (-120.0, 120.0), "f64": (-1000.0, 1000.0)},
    "sin": {"f16": (-60.0, 60.0), "bf16": (-100.0, 100.0), "f32": (-100.0, 100.0), "f64": (-100.0, 100.0)},
    "tanh": {d: (-9.0, 9.0) for d in FLOAT_DTYPES},
    "erf": {d: (-4.0, 4.0) for d in FLOAT_DTYPES},
    "floor": {d: (-1000.0, 1000.0) for d in FLOAT_DTYPES},
}
_DOMAINS["cos"] = _DOMAINS["sin"]
_DOMAINS["ceil"] = _DOMAINS["floor"]
_POSITIVE = {"f16": (1e-4, 6e4), "bf16": (1e-30, 1e30), "f32": (1e-30, 1e30), "f64": (1e-300, 1e300)}


def sample_domain(rng: np.random.Generator, fn: str, dtype: str, n: int) -> np.ndarray:
    """Random inputs for ``fn`` in ``dtype`` (log-uniform for log/sqrt/rsqrt)."""
    if fn in ("log", "log2", "sqrt", "rsqrt"):
        lo, hi = _POSITIVE[dtype]
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), size=n))
    else:
        lo, hi = _DOMAINS[fn][dtype]
        x = rng.uniform(lo, hi, size=n)
    x = x.astype(np_dtype(dtype))
    return np.where(x == 0, np.asarray(0.5, dtype=x.dtype), x).astype(x.dtype)


MATH_FUNCTIONS = tuple(tolerances.MATH_ULPS)


@family("math",
        quick=dict(fn=MATH_FUNCTIONS, dtype=["f32"], n=[256]),
        full=dict(dtype=FLOAT_DTYPES, n=[256, 4096]))
def math_function(ctx, fn, dtype, n):
    """``tl.<fn>`` on random inputs of its domain, within the table's ULP bound."""
    block = 128
    x = sample_domain(ctx.rng, fn, dtype, n)
    out = ctx.output((n,), dtype)
    ctx.launch(math_kernel, (-(-n // block),), ctx.input(x), out, n, FN=fn, BLOCK=block)
    ctx.check(f"{fn}(x)", out, _reference(fn, wide(x, dtype)), dtype,
              tolerances.math_function(fn, dtype))


#: inputs with one correct IEEE answer for every function
SPECIAL_INPUTS = {
    "exp": [-np.inf, np.inf, np.nan, 0.0],
    "exp2": [-np.inf, np.inf, np.nan, 0.0, 3.0],
    "log": [0.0, np.inf, -1.0, np.nan, 1.0],
    "log2": [0.0, np.inf, -1.0, np.nan, 1.0, 8.0],
    "sqrt": [0.0, np.inf, -1.0, np.nan, 4.0],
    "rsqrt": [np.inf, -1.0, np.nan],
    "sin": [np.inf, np.nan, 0.0],
    "cos": [np.inf, np.nan, 0.0],
    "tanh": [np.inf, -np.inf, np.nan, 0.0],
    "erf": [np.inf, -np.inf, np.nan, 0.0],
    "floor": [np.inf, -np.inf, np.nan, -0.5, 2.0],
    "ceil": [np.inf, -np.inf, np.nan, -0.5, 2.0],
}


@family("math", quick=dict(fn=MATH_FUNCTIONS, dtype=["f32"]), full=dict(dtype=FLOAT_DTYPES))
def math_special_values(ctx, fn, dtype):
    """IEEE special cases: exp(-inf) = 0, log(0) = -inf, sqrt(-1) = NaN, sin(inf) = NaN...
    Infinities, NaNs and zeros must match exactly; finite results (log2(8) = 3) get the
    function's ULP bound like any other."""
    values = np.array(SPECIAL_INPUTS[fn], dtype=np.float64)
    x = values.astype(np_dtype(dtype))
    out = ctx.output((x.size,), dtype)
    ctx.launch(math_kernel, (1,), ctx.input(x), out, x.size, FN=fn, BLOCK=8)
    with np.errstate(all="ignore"):
        ref = _reference(fn, values)
    ctx.check(f"{fn}(special)", out, ref, dtype, tolerances.math_function(fn, dtype))


def _mixed_values(fn: str, dtype: str) -> tuple[list[float], list[float]]:
    """(huge, others) arguments of ``fn`` in ``dtype``: huge ones at the ends of its domain
    (and past them where the result is defined: exp's overflow to inf), others tiny, near 1,
    negative, subnormal and special.  No correct result is subnormal (a backend may flush
    those to zero); a subnormal argument is asked only where its result is normal."""
    fmt = FLOAT_FORMATS[dtype]
    big, tiny = fmt.max_finite, 2.0 ** fmt.emin
    sub = tiny / 8                                       # subnormal in every format
    half_ulp = 2.0 ** -(fmt.precision + 1)               # 1 + half_ulp rounds to 1
    inf, nan = math.inf, math.nan
    spread = [big, -big ** 0.5, big ** 0.25, -big ** 0.2, big ** 0.15, -big ** 0.1]
    if fn in ("sin", "cos"):
        others = [tiny, -3 * tiny, tiny ** 0.5, -tiny ** 0.25, half_ulp, 0.5, -2.0, 3.0,
                  inf, -inf, nan, 0.0, -0.0] + ([sub, -sub] if fn == "cos" else [])
        return spread, others
    if fn in ("exp", "exp2"):
        top = math.log(big) if fn == "exp" else math.log2(big)
        low = math.log(tiny) if fn == "exp" else float(fmt.emin)
        huge = [0.98 * top, 0.98 * low, 1.5 * top, 4 * low, big, -big]
        return huge, [tiny, -tiny, sub, -sub, half_ulp, 0.5, -1.5, inf, -inf, nan, 0.0]
    if fn in ("log", "log2"):
        huge = [big, big ** 0.5, big ** 0.75, big / 3, -big]
        others = [tiny, sub, 3.5 * tiny, half_ulp, 1 + 8 * half_ulp, 1.0, 0.0, -0.0, -1.0,
                  inf, nan]
        return huge, others
    if fn in ("sqrt", "rsqrt"):
        huge = [big, big / 7, big ** 0.5, -big]
        others = [tiny, sub, 3 * sub, tiny ** 0.5, 2.0, 0.0, -0.0, -tiny, inf, nan]
        return huge, others
    if fn in ("tanh", "erf"):
        return [big, -big, big ** 0.5, -big ** 0.25], \
            [tiny, -tiny, half_ulp, tiny ** 0.5, 0.5, -2.0, inf, -inf, nan, 0.0]
    # floor, ceil
    integral = 2.0 ** fmt.precision + 2
    near = -(2.0 ** (fmt.precision - 2) + 0.5)           # a half-integer near the limit
    huge = [big, -big, integral, near, big ** 0.5]
    others = [tiny, -tiny, sub, -sub, 0.5, -0.5, -0.0, 1 - half_ulp * 2, -(1 - half_ulp * 2),
              inf, -inf, nan]
    return huge, others


def mixed_inputs(fn: str, dtype: str, n: int) -> np.ndarray:
    """``n`` arguments of ``fn`` in ``dtype``: a huge one in every even lane, the others
    between them, so that every vector of two or more lanes holds huge and tiny ones."""
    huge, others = _mixed_values(fn, dtype)
    with np.errstate(over="ignore"):
        values = [huge[i // 2 % len(huge)] if i % 2 == 0 else others[i // 2 % len(others)]
                  for i in range(n)]
        return np.array(values, dtype=np.float64).astype(np_dtype(dtype))


@family("math", quick=dict(fn=MATH_FUNCTIONS, dtype=["f32"]), full=dict(dtype=FLOAT_DTYPES))
def math_mixed_magnitudes(ctx, fn, dtype):
    """``tl.<fn>`` on one tile mixing huge, tiny, negative, subnormal and special arguments
    (a driver's vector builtin may choose one method for every lane), within the table's
    ULP bound; infinities, NaNs and zeros exactly."""
    n = 64
    x = mixed_inputs(fn, dtype, n)
    out = ctx.output((n,), dtype)
    ctx.launch(math_kernel, (1,), ctx.input(x), out, n, FN=fn, BLOCK=n)
    with np.errstate(all="ignore"):
        ref = _reference(fn, wide(x, dtype))
    ctx.check(f"{fn}(mixed magnitudes)", out, ref, dtype, tolerances.math_function(fn, dtype))
