"""Math functions against the ULP table, over domains that keep results normal and finite,
plus the special values every IEEE implementation agrees on (inf, NaN, zeros)."""
from __future__ import annotations

import math

import numpy as np

import anytile as at
import anytile.language as tl

from .. import tolerances
from ..case import family
from ..numerics import FLOAT_DTYPES, np_dtype
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
