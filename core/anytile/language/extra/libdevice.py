"""CUDA's libdevice as Triton kernels call it (``tl.extra.libdevice``, also under ``.cuda``
and ``.hip``), every function built from portable IR so it runs on every backend.

Each function keeps libdevice's name and meaning.  Ones with a direct IR op map onto it;
the rest are exact rearrangements (``trunc``, ``isnan``), the classic accurate formulas
(``log1p``, ``expm1``), or formulas with their error bound in ulp in the docstring, checked
against NumPy, SciPy or mpmath on every device by tests/language/test_libdevice*.py.  f16 and
bf16 inputs are computed in f32 and rounded once.  Beside this module: ``_ieee`` (bit
functions, conversions and arithmetic in each rounding mode), ``_elementary`` (pow, exp10,
fmod, sinpi, exponent access, norms, the ``fast_`` variants) and ``_special`` (Bessel,
error-function family, gamma), all on ``_formula``'s machinery."""
from __future__ import annotations

from typing import Any

from ...ir import types as irt
from ...ir.builder import Builder
from .. import math as _math
from .. import semantic
from .. import standard as _standard
from ..objects import builtin, int16, int32, int64, tensor
from ._formula import (_F, _LN2, _PI, _TAN_PI_8, _float, _formula, _is_f64, _poly, _result,
                       _unary, _where)

__all__ = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "erf",
           "floor", "ceil", "trunc", "fabs", "abs", "fma", "fmin", "fmax", "isnan", "isinf",
           "finitef", "log1p", "expm1", "div_rn", "fast_expf", "fast_logf", "fast_dividef",
           "umulhi", "mulhi", "atan", "atan2", "asin", "acos", "sinh", "cosh", "asinh",
           "acosh", "atanh", "cbrt", "hypot", "log10", "copysign", "signbit", "rint",
           "nearbyint", "round", "ldexp"]

exp = fast_expf = _math.exp
exp2 = _math.exp2
log = fast_logf = _math.log
log2 = _math.log2
sqrt = _math.sqrt
rsqrt = _math.rsqrt
sin = _math.sin
cos = _math.cos
tanh = _math.tanh
erf = _math.erf
floor = _math.floor
ceil = _math.ceil
fabs = abs = _math.abs
fma = _math.fma
umulhi = mulhi = _math.umulhi
div_rn = fast_dividef = _math.div_rn
fmin = _standard.minimum
fmax = _standard.maximum


@builtin
def tan(x: Any, _builder: Builder = None) -> tensor:
    """The tangent, elementwise."""
    t = _float(x, "tan", _builder)
    return semantic.truediv(_unary("sin", t, _builder), _unary("cos", t, _builder), _builder)


@builtin
def trunc(x: Any, _builder: Builder = None) -> tensor:
    """``x`` rounded toward zero, elementwise."""
    t = _float(x, "trunc", _builder)
    return semantic.where(semantic.less_than(t, 0.0, _builder), _unary("ceil", t, _builder),
                          _unary("floor", t, _builder), _builder)


@builtin
def isnan(x: Any, _builder: Builder = None) -> tensor:
    """True where ``x`` is NaN."""
    t = _float(x, "isnan", _builder)
    return semantic.not_equal(t, t, _builder)


@builtin
def isinf(x: Any, _builder: Builder = None) -> tensor:
    """True where ``x`` is +inf or -inf."""
    t = _float(x, "isinf", _builder)
    return semantic.equal(_unary("abs", t, _builder), float("inf"), _builder)


@builtin
def finitef(x: Any, _builder: Builder = None) -> tensor:
    """True where ``x`` is neither infinite nor NaN."""
    t = _float(x, "finitef", _builder)
    return semantic.less_than(_unary("abs", t, _builder), float("inf"), _builder)


@builtin
def log1p(x: Any, _builder: Builder = None) -> tensor:
    """``log(1 + x)``, accurate for tiny ``x`` (Goldberg's correction)."""
    b = _builder
    t = _float(x, "log1p", b)
    with b.strict_arithmetic():     # the correction needs u = fl(1 + x): never fused
        return _log1p_corrected(t, b)


def _log1p_corrected(t: tensor, b: Builder) -> tensor:
    u = semantic.add(t, 1.0, b)
    um1 = semantic.sub(u, 1.0, b)
    # log(u) * x / (u - 1) cancels the rounding error made when forming u = 1 + x
    corrected = semantic.truediv(semantic.mul(_unary("log", u, b), t, b), um1, b)
    exact_one = semantic.equal(um1, 0.0, b)
    huge = semantic.equal(u, float("inf"), b)
    return semantic.where(exact_one, t, semantic.where(huge, u, corrected, b), b)


@builtin
def expm1(x: Any, _builder: Builder = None) -> tensor:
    """``exp(x) - 1``, accurate for tiny ``x`` (Kahan's correction)."""
    b = _builder
    t = _float(x, "expm1", b)
    with b.strict_arithmetic():     # the correction needs u - 1 rounded once: never fused
        return _expm1_corrected(t, b)


def _expm1_corrected(t: tensor, b: Builder) -> tensor:
    u = _unary("exp", t, b)
    um1 = semantic.sub(u, 1.0, b)
    # (u - 1) * x / log(u) cancels the rounding error of u = exp(x) near 0
    corrected = semantic.truediv(semantic.mul(um1, t, b), _unary("log", u, b), b)
    plain = semantic.logical_or(semantic.equal(um1, -1.0, b),
                                semantic.equal(u, float("inf"), b), b)
    return semantic.where(semantic.equal(u, 1.0, b), t,
                          semantic.where(plain, um1, corrected, b), b)


def __getattr__(name: str) -> Any:
    raise AttributeError(f"libdevice.{name}: libdevice has no function of that name (anytile "
                         f"provides all of Triton's: {', '.join(sorted(__all__))})")


def _atan_unit(a: _F) -> _F:
    """``atan(a)`` for ``0 <= a <= 1`` (and NaN): the Taylor series of atan around 0 on
    ``|u| <= tan(pi/8)`` after ``atan(a) = pi/4 + atan((a - 1) / (a + 1))`` for larger ``a``;
    9 terms leave a truncation error below 1e-8 (f32), 21 below 1e-18 (f64)."""
    mid = a > _TAN_PI_8
    u = _where(mid, (a - 1.0) / (a + 1.0), a)
    terms = 21 if _is_f64(a) else 9
    series = _poly(u * u, [(-1.0) ** k / (2 * k + 1) for k in range(terms)]) * u
    return _where(mid, series + _PI / 4, series)


def _atan_nonneg(a: _F) -> _F:
    big = a > 1.0
    r = _atan_unit(_where(big, 1.0 / a, a))
    return _where(big, _PI / 2 - r, r)


def _signed(x: _F, r: _F) -> _F:
    return _where(x < 0.0, -r, r)


@builtin
def atan(x: Any, _builder: Builder = None) -> tensor:
    """The arc tangent, elementwise (within 4 ulp)."""
    (f,), out = _formula("atan", x, b=_builder)
    return _result(_signed(f, _atan_nonneg(f.call("abs"))), out)


def _atan2(y: _F, x: _F) -> _F:
    ax, ay = x.call("abs"), y.call("abs")
    mx, mn = _where(ax > ay, ax, ay), _where(ax > ay, ay, ax)
    a = _where(mx.eq(0.0), 0.0, mn / mx)
    a = _where(ax.isinf() & ay.isinf(), 1.0, a)
    r = _atan_unit(a)
    r = _where(ay > ax, _PI / 2 - r, r)
    r = _where(x < 0.0, _PI - r, r)
    return _where(x.isnan() | y.isnan(), float("nan"), _signed(y, r))


@builtin
def atan2(y: Any, x: Any, _builder: Builder = None) -> tensor:
    """The angle of the point ``(x, y)``, in ``[-pi, pi]``, elementwise (within 6 ulp).  The
    sign of a zero ``x`` is not looked at: ``atan2(0, -0)`` is 0."""
    (fy, fx), out = _formula("atan2", y, x, b=_builder)
    return _result(_atan2(fy, fx), out)


@builtin
def asin(x: Any, _builder: Builder = None) -> tensor:
    """The arc sine, elementwise (within 4 ulp; NaN outside [-1, 1])."""
    (f,), out = _formula("asin", x, b=_builder)
    return _result(_atan2(f, ((1.0 - f) * (1.0 + f)).call("sqrt")), out)


@builtin
def acos(x: Any, _builder: Builder = None) -> tensor:
    """The arc cosine, elementwise (within 4 ulp; NaN outside [-1, 1])."""
    (f,), out = _formula("acos", x, b=_builder)
    return _result(_atan2(((1.0 - f) * (1.0 + f)).call("sqrt"), f), out)


def _expm1(a: _F) -> _F:
    return _F(expm1(a.t, _builder=a.b), a.b)


def _log1p(a: _F) -> _F:
    return _F(log1p(a.t, _builder=a.b), a.b)


@builtin
def sinh(x: Any, _builder: Builder = None) -> tensor:
    """The hyperbolic sine, elementwise (within 8 ulp)."""
    (f,), out = _formula("sinh", x, b=_builder)
    a = f.call("abs")
    u = _expm1(_where(a < 1.0, a, 0.0))
    small = (u + u / (u + 1.0)) * 0.5                  # no cancellation near 0
    h = (a * 0.5).call("exp")                          # e^a as h * h: finite up to sinh's limit
    large = (h * 0.5) * h - 0.5 / (h * h)
    return _result(_signed(f, _where(a < 1.0, small, large)), out)


@builtin
def cosh(x: Any, _builder: Builder = None) -> tensor:
    """The hyperbolic cosine, elementwise (within 8 ulp)."""
    (f,), out = _formula("cosh", x, b=_builder)
    h = (f.call("abs") * 0.5).call("exp")
    return _result((h * 0.5) * h + 0.5 / (h * h), out)


def _huge(f: _F) -> float:
    return 2.0 ** 28 if not _is_f64(f) else 2.0 ** 60   # a*a + 1 == a*a beyond sqrt(1/eps)


@builtin
def asinh(x: Any, _builder: Builder = None) -> tensor:
    """The inverse hyperbolic sine, elementwise (within 4 ulp)."""
    (f,), out = _formula("asinh", x, b=_builder)
    a = f.call("abs")
    big = a > _huge(f)
    s = _where(big, 1.0, a)
    near = _log1p(s + s * s / (1.0 + (1.0 + s * s).call("sqrt")))
    far = a.call("log") + _LN2
    return _result(_signed(f, _where(big, far, near)), out)


@builtin
def acosh(x: Any, _builder: Builder = None) -> tensor:
    """The inverse hyperbolic cosine, elementwise (within 4 ulp; NaN below 1)."""
    (f,), out = _formula("acosh", x, b=_builder)
    big = f > _huge(f)
    s = _where(big, 1.0, f)
    near = _log1p((s - 1.0) + ((s - 1.0) * (s + 1.0)).call("sqrt"))
    return _result(_where(big, f.call("log") + _LN2, near), out)


@builtin
def atanh(x: Any, _builder: Builder = None) -> tensor:
    """The inverse hyperbolic tangent, elementwise (within 4 ulp; NaN outside [-1, 1])."""
    (f,), out = _formula("atanh", x, b=_builder)
    a = f.call("abs")
    return _result(_signed(f, _log1p(2.0 * a / (1.0 - a)) * 0.5), out)


@builtin
def cbrt(x: Any, _builder: Builder = None) -> tensor:
    """The cube root, elementwise (within 2 ulp): ``2 ** (log2|x| / 3)`` refined by one
    Newton step."""
    (f,), out = _formula("cbrt", x, b=_builder)
    a = f.call("abs")
    s, tiny = (54, 2.0 ** -1022) if _is_f64(f) else (24, 2.0 ** -126)
    sub = a < tiny                                     # subnormal: scaled by 2**(3s), exactly
    a = _where(sub, a * 2.0 ** (3 * s), a)
    y = (a.call("log2") / 3.0).call("exp2")
    y = y - (y * y * y - a) / (3.0 * y * y)
    y = _where(sub, y * 2.0 ** -s, y)
    a = f.call("abs")
    return _result(_where(a.eq(0.0) | a.isinf() | a.isnan(), f, _signed(f, y)), out)


@builtin
def hypot(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """``sqrt(x*x + y*y)`` without overflow or underflow in between, elementwise (within 4
    ulp; infinite where either is infinite)."""
    (fx, fy), out = _formula("hypot", x, y, b=_builder)
    ax, ay = fx.call("abs"), fy.call("abs")
    mx, mn = _where(ax > ay, ax, ay), _where(ax > ay, ay, ax)
    r = _where(mx.eq(0.0), 0.0, mn / mx)
    h = mx * (1.0 + r * r).call("sqrt")
    h = _where(ax.isnan() | ay.isnan(), float("nan"), h)
    return _result(_where(ax.isinf() | ay.isinf(), float("inf"), h), out)


@builtin
def log10(x: Any, _builder: Builder = None) -> tensor:
    """The base-10 logarithm, elementwise (within 3 ulp)."""
    (f,), out = _formula("log10", x, b=_builder)
    return _result(f.call("log2") * 0.30102999566398120, out)


@builtin
def copysign(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """``|x|`` with the sign bit of ``y``, elementwise."""
    (fx, fy), out = _formula("copysign", x, y, b=_builder)
    return _result(_where(_F(signbit(fy.t, _builder=_builder), _builder).eq(1),
                          -fx.call("abs"), fx.call("abs")), out)


@builtin
def signbit(x: Any, _builder: Builder = None) -> tensor:
    """1 where the sign bit of ``x`` is set (negative numbers, -0.0, negative NaNs), else 0,
    as ``int32``."""
    t = _float(x, "signbit", _builder)
    bits = irt.elem_type(t.type).bits
    as_int = semantic.bitcast(t, {16: int16, 32: int32, 64: int64}[bits], _builder)
    return semantic.cast(semantic.less_than(as_int, 0, _builder), int32, _builder)


@builtin
def rint(x: Any, _builder: Builder = None) -> tensor:
    """``x`` rounded to the nearest integer, ties to even, elementwise."""
    (f,), out = _formula("rint", x, b=_builder)
    a = f.call("abs")
    magic = 2.0 ** 52 if _is_f64(f) else 2.0 ** 23
    r = _where(a < magic, (a + magic) - magic, a)      # adding 2^p rounds to an integer
    return _result(_where(f.isnan(), f, _signed(f, r)), out)


nearbyint = rint


@builtin
def round(x: Any, _builder: Builder = None) -> tensor:
    """``x`` rounded to the nearest integer, ties away from zero, elementwise."""
    (f,), out = _formula("round", x, b=_builder)
    a = f.call("abs")
    t = a.call("floor")
    r = _where(a - t >= 0.5, t + 1.0, t)
    return _result(_where(f.isnan(), f, _signed(f, r)), out)


@builtin
def ldexp(x: Any, n: Any, _builder: Builder = None) -> tensor:
    """``x * 2**n`` (``n`` an integer tile or scalar), elementwise."""
    (f,), out = _formula("ldexp", x, b=_builder)
    k = semantic.cast(semantic.to_tensor(n, _builder), f.t.dtype, _builder)
    half = _F(k, _builder) * 0.5
    lo = half.call("floor")
    return _result(f * lo.call("exp2") * (_F(k, _builder) - lo).call("exp2"), out)


# -- the rest of the list, from the modules that build them ---------------------------------
from ._special import *  # noqa: E402,F401,F403  (Bessel, erfc family, gamma)
from ._special import __all__ as _SPECIAL  # noqa: E402
from ._ieee import *  # noqa: E402,F401,F403  (bits, conversions, rounding modes)
from ._ieee import __all__ as _IEEE  # noqa: E402
from ._elementary import *  # noqa: E402,F401,F403  (pow, exp10, fmod, sinpi, norms, ...)
from ._elementary import __all__ as _ELEMENTARY  # noqa: E402

fast_sinf, fast_cosf, fast_tanf = sin, cos, tan
fast_log2f, fast_log10f = log2, log10
isfinited = finitef

# the round-to-nearest quotient, square root and fma are the IR's own operations
div_rn = fast_dividef = _math.div_rn
sqrt_rn = _math.sqrt
fma_rn = _math.fma
__all__ += _SPECIAL + _ELEMENTARY + [n for n in _IEEE if n not in __all__] + [
    "fast_sinf", "fast_cosf", "fast_tanf", "fast_log2f", "fast_log10f", "isfinited",
    "sqrt_rn", "fma_rn"]
