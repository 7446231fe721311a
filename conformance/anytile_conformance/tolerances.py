"""The one table of tolerances the conformance suite allows.  Every check names an entry here;
no case declares its own numbers.

How errors are measured:

* **ULPs** are measured against the exact result (computed in float64, or ``long double``
  for f64 results) in units of the last place of the *output* dtype at the exact result's
  magnitude (OpenCL's definition).  A correctly rounded result is within 0.5 ULP.
* **Exact** means bit-identical for memory ops and integers, and equal values (NaN matching
  NaN) for float results that have one correct answer: casts (every conversion rounds to
  nearest even, saturates or truncates as the IR defines), min/max, floor/ceil, compares.
* **Accumulations** (reductions, scans, dot) are bounded as numerical analysis bounds them:
  ``|got - exact| <= (n * u_acc + u_in) * sum|terms| + 1 ulp(out)`` where ``n`` is the number
  of terms, ``u_acc`` the unit roundoff of the accumulator and ``u_in`` the rounding allowed
  on the inputs (tf32).  Any summation order meets it, so backends may tree-reduce.
* **Composite** kernels (softmax, layer norm, fused epilogues) use a relative/absolute pair
  per output dtype, wide enough for a handful of roundings and math calls per element.

The math-function ULP bounds are OpenCL 1.2's full-profile bounds for single and double
precision (section 7.4), except ``sqrt``, which anytile requires correctly rounded.  Half and
bfloat16 math may be computed in f32 and rounded once, so their bound is 1 ULP of the output.
"""
from __future__ import annotations

from dataclasses import dataclass

from .numerics import FLOAT_FORMATS


@dataclass(frozen=True)
class Exact:
    """Bit-exact for memory and integers; value-exact (NaN == NaN) for floats."""

    def describe(self) -> str:
        return "exact"


@dataclass(frozen=True)
class Ulps:
    """At most ``ulps`` units in the last place of the output dtype."""

    ulps: float

    def describe(self) -> str:
        return f"<= {self.ulps:g} ulp"


@dataclass(frozen=True)
class Relative:
    """``|got - exact| <= atol + rtol * |exact|``."""

    rtol: float
    atol: float

    def describe(self) -> str:
        return f"rtol {self.rtol:g}, atol {self.atol:g}"


@dataclass(frozen=True)
class Accumulation:
    """Bound for a sum of ``terms`` values (see the module docstring); ``input_rounding`` is
    the relative error allowed on each input before multiplying (0 for IEEE inputs)."""

    terms: int
    accumulator: str
    input_rounding: float = 0.0

    def describe(self) -> str:
        return (f"(n*u_{self.accumulator} + {self.input_rounding:g}) * sum|terms| + 1 ulp, "
                f"n={self.terms}")

    @property
    def factor(self) -> float:
        return self.terms * FLOAT_FORMATS[self.accumulator].unit_roundoff + self.input_rounding


Tolerance = Exact | Ulps | Relative | Accumulation

EXACT = Exact()

#: elementwise arithmetic, per op kind and output dtype.  f16/bf16 computed in f32 and rounded
#: once is still correctly rounded for + - * / (p32 >= 2p+2), hence 0.5 there.
ARITHMETIC_ULPS: dict[str, dict[str, float]] = {
    "add": {"f16": 0.5, "bf16": 0.5, "f32": 0.5, "f64": 0.5},
    "sub": {"f16": 0.5, "bf16": 0.5, "f32": 0.5, "f64": 0.5},
    "mul": {"f16": 0.5, "bf16": 0.5, "f32": 0.5, "f64": 0.5},
    # OpenCL allows 2.5 ulp for f32 x/y; the f16/bf16 bound covers such a quotient rounded again
    "fdiv": {"f16": 1.0, "bf16": 1.0, "f32": 2.5, "f64": 0.5},
    "fma": {"f16": 0.5, "bf16": 0.5, "f32": 0.5, "f64": 0.5},
    # fmod and floor division are exact operations (one correct result)
    "rem": {"f16": 0.0, "bf16": 0.0, "f32": 0.0, "f64": 0.0},
    "floordiv": {"f16": 0.0, "bf16": 0.0, "f32": 0.0, "f64": 0.0},
}

_HALF_MATH = 1.0
#: math functions in ULPs (OpenCL 1.2 full profile for f32/f64; sqrt correctly rounded)
MATH_ULPS: dict[str, dict[str, float]] = {
    "exp": {"f32": 3, "f64": 3, "f16": _HALF_MATH, "bf16": _HALF_MATH},
    "exp2": {"f32": 3, "f64": 3, "f16": _HALF_MATH, "bf16": _HALF_MATH},
    "log": {"f32": 3, "f64": 3, "f16": _HALF_MATH, "bf16": _HALF_MATH},
    "log2": {"f32": 3, "f64": 3, "f16": _HALF_MATH, "bf16": _HALF_MATH},
    "sqrt": {"f32": 0.5, "f64": 0.5, "f16": 0.5, "bf16": 0.5},
    "rsqrt": {"f32": 2, "f64": 2, "f16": _HALF_MATH, "bf16": _HALF_MATH},
    "sin": {"f32": 4, "f64": 4, "f16": _HALF_MATH, "bf16": _HALF_MATH},
    "cos": {"f32": 4, "f64": 4, "f16": _HALF_MATH, "bf16": _HALF_MATH},
    "tanh": {"f32": 5, "f64": 5, "f16": _HALF_MATH, "bf16": _HALF_MATH},
    "erf": {"f32": 16, "f64": 16, "f16": _HALF_MATH, "bf16": _HALF_MATH},
    "floor": {"f32": 0, "f64": 0, "f16": 0, "bf16": 0},
    "ceil": {"f32": 0, "f64": 0, "f16": 0, "bf16": 0},
}

#: whole kernels made of several roundings and math calls per output element
COMPOSITE: dict[str, Relative] = {
    "f16": Relative(rtol=1e-2, atol=1e-3),
    "bf16": Relative(rtol=4e-2, atol=1e-2),
    "f32": Relative(rtol=2e-5, atol=1e-6),
    "f64": Relative(rtol=1e-12, atol=1e-14),
}

#: relative rounding allowed on f32 ``tl.dot`` inputs per ``input_precision``
DOT_INPUT_ROUNDING: dict[str, float] = {
    "ieee": 0.0,
    "tf32": 2.0 ** -10,      # both factors rounded to 10 mantissa bits: 2 * 2^-11
    "tf32x3": 2.0 ** -20,    # the split product recovers ~21 bits
    "bf16x3": 2.0 ** -14,    # two bf16 parts a factor, the smallest cross product dropped
    "bf16x6": 2.0 ** -20,    # three bf16 parts a factor
}


def arithmetic(op: str, dtype: str) -> Tolerance:
    """Tolerance of one elementwise arithmetic ``op`` producing ``dtype``."""
    if dtype not in FLOAT_FORMATS:
        return EXACT
    return Ulps(ARITHMETIC_ULPS[op][dtype])


def math_function(fn: str, dtype: str) -> Tolerance:
    """Tolerance of math function ``fn`` (``tl.exp``...) producing ``dtype``."""
    return Ulps(MATH_ULPS[fn][dtype])


def composite(dtype: str) -> Tolerance:
    """Tolerance of a whole kernel's float output of ``dtype``; exact for integers."""
    return COMPOSITE[dtype] if dtype in COMPOSITE else EXACT


def accumulation(terms: int, accumulator: str, input_precision: str = "ieee") -> Tolerance:
    """Tolerance of a reduction, scan or dot over ``terms`` values accumulated in
    ``accumulator``; exact for integer accumulators (wrapping sums have one answer)."""
    if accumulator not in FLOAT_FORMATS:
        return EXACT
    return Accumulation(terms, accumulator, DOT_INPUT_ROUNDING[input_precision])


def table_rows() -> list[tuple[str, str, str]]:
    """The whole table as ``(what, dtype, bound)`` rows, for the README and ``--tolerances``."""
    rows = [("memory ops, integer results, compares, min/max", "all", "exact")]
    for op, per in ARITHMETIC_ULPS.items():
        rows += [(f"arithmetic {op}", d, f"{u:g} ulp") for d, u in per.items()]
    for fn, per in MATH_ULPS.items():
        rows += [(f"math {fn}", d, f"{u:g} ulp") for d, u in per.items()]
    rows += [("composite kernels", d, t.describe()) for d, t in COMPOSITE.items()]
    rows += [(f"dot/reduce/scan ({p})", "float acc", f"(n*u_acc + {r:g}) * sum|terms| + 1 ulp")
             for p, r in DOT_INPUT_ROUNDING.items()]
    return rows
