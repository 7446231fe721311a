"""libdevice's remaining elementary functions as formulas: powers (``pow``, ``exp10``), exact
remainders (``fmod``, ``remainder``), ``sinpi``/``cospi``, exponent access (``ilogb``,
``logb``, ``scalbn``, ``nextafter``), norms, and the ``fast_`` variants.

Where a float32 result needs more precision in between than float32 has, the formula runs in
float64 and rounds once (``wide``); float64 inputs get double-float64 arithmetic instead
(``_log2_dd``, ``_exp2_dd``): a value carried as an unevaluated sum ``hi + lo``."""
from __future__ import annotations

from decimal import Decimal, localcontext
from typing import Any

from ...ir import types as irt
from ...ir.builder import Builder
from .. import semantic
from ..objects import builtin, float32, float64, int32, int64, tensor
from ._formula import _F, _float, _formula, _is_f64, _poly, _result, _where
from ._ieee import step_down, step_up


def _split(value: Decimal) -> tuple[float, float]:
    hi = float(value)
    return hi, float(value - Decimal(hi))


with localcontext() as _ctx:     # 50 digits here only: the user's decimal context is theirs
    _ctx.prec = 50
    _INV_LN2 = _split(1 / Decimal(2).ln())                    # 1/ln 2 as hi + lo
    _LOG2_10 = _split(Decimal(10).ln() / Decimal(2).ln())     # log2(10) as hi + lo
    _PI_HL = _split(Decimal("3.14159265358979323846264338327950288419716939937510"))
_SQRT2 = 1.4142135623730951
_INF = float("inf")


def _ld() -> Any:
    from . import libdevice
    return libdevice


def _fn(name: str, *xs: _F) -> _F:
    return _F(getattr(_ld(), name)(*[x.t for x in xs], _builder=xs[0].b), xs[0].b)


def _two_sum(a: _F, c: Any) -> tuple[_F, _F]:
    s = a + c
    bb = s - a
    return s, (a - (s - bb)) + (c - bb)


def _fast_two_sum(a: _F, c: _F) -> tuple[_F, _F]:
    """``a + c`` as ``s + e`` exactly, for ``|a| >= |c|``."""
    s = a + c
    return s, c - (s - a)


def _bits_type(f: _F) -> Any:
    return int64 if _is_f64(f) else int32


def _params(f: _F) -> tuple[int, int, float]:
    """(mantissa bits, exponent bias, the smallest normal) of ``f``'s float type."""
    return (52, 1023, 2.0 ** -1022) if _is_f64(f) else (23, 127, 2.0 ** -126)


def _exponent(a: _F) -> _F:
    """The unbiased binary exponent of ``|a|`` (``a`` finite and nonzero; subnormals
    included), as an integer tile of ``a``'s width."""
    mant, bias, tiny = _params(a)
    shift = 64 if _is_f64(a) else 32
    a = a.call("abs")
    sub = a < tiny
    scaled = _where(sub, a * (2.0 ** shift), a)
    bits = scaled.bitcast(_bits_type(a))
    return ((bits >> mant) & (2 * bias + 1)) - _where(sub, bias + shift, bias)


def _scale(a: _F, k: _F) -> _F:
    """``a * 2**k`` for an integer tile ``k``, exact while the result is representable."""
    return _F(_ld().ldexp(a.t, k.t, _builder=a.b), a.b)


# -- logarithm and exponential in double-float64 -----------------------------------------------
def _log2_dd(a: _F) -> tuple[_F, _F]:
    """``log2(a)`` as ``hi + lo`` (``a`` positive, finite, float64), to about 2**-100
    relative: ``a = m * 2**e`` with ``m`` in [sqrt(1/2), sqrt(2)), and
    ``ln m = 2 atanh(s)``, ``s = (m - 1) / (m + 1)``, with ``s`` carried in two parts."""
    sub = a < 2.0 ** -1022
    a2 = _where(sub, a * 2.0 ** 54, a)
    bits = a2.bitcast(int64)
    e = ((bits >> 52) & 0x7FF) - _where(sub, 1023 + 54, 1023)
    m = ((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000).bitcast(float64)
    big = m > _SQRT2
    m = _where(big, m * 0.5, m)
    e = e + _where(big, 1, 0)
    num = m - 1.0                                        # exact (Sterbenz)
    d, d_lo = _two_sum(m, 1.0)
    q = num / d
    q_lo = ((-q).fma(d, num) - q * d_lo) / d             # num / (d + d_lo) == q + q_lo
    s2 = q * q
    tail = q * s2 * _poly(s2, [2.0 / (2 * k + 3) for k in range(13)])
    lh, ll = q * 2.0, q_lo * 2.0 + tail                  # ln m == lh + ll
    ph = lh * _INV_LN2[0]
    pl = lh.fma(_INV_LN2[0], -ph) + (lh * _INV_LN2[1] + ll * _INV_LN2[0])
    ef = e.to(float64)
    hi, lo = _two_sum(ef, ph)
    return _fast_two_sum(hi, lo + pl)


def _exp2_dd(ph: _F, pl: _F) -> _F:
    """``2 ** (ph + pl)`` for float64 ``ph`` (``|pl|`` tiny beside it), overflowing to inf and
    underflowing to 0 as the exact value does."""
    c = _where(ph > 2200.0, 2200.0, _where(ph < -2200.0, -2200.0, ph))
    pl = _where(c.ne(ph), 0.0, pl)                       # far out of range: 0 or inf anyway
    n = _fn("rint", c)
    f = (c - n) + pl                                     # c - n is exact
    return _scale(f.call("exp2"), n.to(int32))


# -- pow ---------------------------------------------------------------------------------------
def _odd_integer(y: _F) -> _F:
    """Where ``y`` is an odd integer."""
    half = y * 0.5
    return y.eq(y.call("floor")) & half.ne(half.call("floor")) & (y.call("abs") < 2.0 ** 53)


def _pow_special(x: _F, y: _F, core: _F) -> _F:
    """C99's special cases of ``pow(x, y)`` around ``core`` (``|x| ** y`` where finite)."""
    ax = x.call("abs")
    odd = _odd_integer(y)
    integer = y.eq(y.call("floor"))
    r = _where(x < 0.0, _where(integer, _where(odd, -core, core), float("nan")), core)
    # pow(+-0, y): +-inf / +-0 keeping the sign of x for odd y
    zero_r = _where(y < 0.0, _INF, 0.0)
    r = _where(ax.eq(0.0), _where(odd & (x.bitcast(_bits_type(x)) < 0), -zero_r, zero_r), r)
    # pow(-inf, y)
    r = _where(x.eq(-_INF), _where(odd, -_where(y < 0.0, 0.0, _INF),
                                   _where(y < 0.0, 0.0, _INF)), r)
    r = _where(x.eq(_INF), _where(y < 0.0, 0.0, _INF), r)
    # y = +-inf
    r = _where(y.isinf(), _where(ax.eq(1.0), 1.0,
                                 _where((ax < 1.0).eq(y < 0.0), _INF, 0.0)), r)
    r = _where(x.isnan() | y.isnan(), float("nan"), r)
    return _where(y.eq(0.0) | x.eq(1.0), 1.0, r)


def _pow_dd(x: _F, y: _F) -> _F:
    """``|x| ** y`` in float64 through a double-float64 ``log2``."""
    ax = x.call("abs")
    safe = _where(ax.eq(0.0) | ax.isinf() | ax.isnan(), 1.0, ax)
    lh, ll = _log2_dd(safe)
    ph = y * lh
    pl = y.fma(lh, -ph) + y * ll
    return _exp2_dd(_where(ph.isnan(), 0.0, ph), _where(pl.isnan(), 0.0, pl))


def _pow(x: Any, y: Any, b: Builder, name: str, fast: bool) -> tensor:
    (fx, fy), out = _formula(name, x, y, b=b, wide=not fast)
    if fast or out.primitive_bitwidth < 64:            # float32 in float64 needs nothing more
        core = (fy * fx.call("abs").call("log2")).call("exp2")
    else:
        core = _pow_dd(fx, fy)
    return _result(_pow_special(fx, fy, core), out)


@builtin
def pow(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """``x ** y`` with C99's special cases (within 1 ulp in float32, computed in float64;
    within 2 ulp in float64, through a double-float64 logarithm)."""
    return _pow(x, y, _builder, "pow", fast=False)


@builtin
def fast_powf(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """``x ** y`` as ``exp2(y * log2(x))`` in the input's precision (fast; the error grows
    with ``|y * log2(x)|``, as CUDA's ``__powf``)."""
    return _pow(x, y, _builder, "fast_powf", fast=True)


# -- exp10 -------------------------------------------------------------------------------------
@builtin
def exp10(x: Any, _builder: Builder = None) -> tensor:
    """``10 ** x`` (within 1 ulp in float32, computed in float64; within 2 ulp in float64)."""
    (f,), out = _formula("exp10", x, b=_builder, wide=True)
    if out.primitive_bitwidth < 64:
        return _result((f * _LOG2_10[0]).call("exp2"), out)
    ph = f * _LOG2_10[0]
    pl = f.fma(_LOG2_10[0], -ph) + f * _LOG2_10[1]
    r = _exp2_dd(_where(ph.isnan(), 0.0, ph), _where(pl.isinf() | pl.isnan(), 0.0, pl))
    return _result(_where(f.isnan(), f, r), out)


@builtin
def fast_exp10f(x: Any, _builder: Builder = None) -> tensor:
    """``10 ** x`` as ``exp2(x * log2(10))`` in the input's precision (fast)."""
    (f,), out = _formula("fast_exp10f", x, b=_builder)
    return _result((f * _LOG2_10[0]).call("exp2"), out)


# -- exact remainders --------------------------------------------------------------------------
def _fmod_steps(ax: _F, ay: _F) -> tuple[_F, _F]:
    """``fmod(ax, ay)`` for positive finite ``ax``, ``ay`` exactly, and whether the last digit
    of the quotient is odd: long division ``mant`` bits at a time, each step
    ``r -= q * t`` by one fused multiply-add, ``t`` being ``ay`` scaled by a power of two
    (exact: ``q`` fits the mantissa and each remainder is representable)."""
    mant, bias, _ = _params(ax)
    span = 2 * bias + mant + 2                            # the largest exponent gap
    k = _exponent(ax) - _exponent(ay) - mant
    t = _scale(ay, _where(k < 0, 0, k))                   # r / t < 2**(mant + 1)
    r = ax
    odd = done = ax.ne(ax)                                # all false
    for _ in range(span // mant + 2):
        q = (r / t).call("floor")
        q = _where((-q).fma(t, r) < 0.0, q - 1.0, q)       # r / t may round up to an integer
        r = (-q).fma(t, r)
        last = t.eq(ay) & ~done                           # the step whose q is the final digit
        odd = _where(last, q.ne((q * 0.5).call("floor") * 2.0), odd)
        done = done | last
        smaller = t * (2.0 ** -mant)
        t = _where(smaller < ay, ay, smaller)
    return r, odd


def _remainder_inputs(name: str, x: Any, y: Any, b: Builder) -> tuple[_F, _F, Any, _F, _F]:
    (fx, fy), out = _formula(name, x, y, b=b)
    ax, ay = fx.call("abs"), fy.call("abs")
    ok = (ax < _INF) & (ay > 0.0) & (ay < _INF)
    sx = _where(ok, ax, 1.0)
    sy = _where(ok, ay, 1.0)
    return fx, fy, out, sx, sy


def _remainder_special(fx: _F, fy: _F, r: _F) -> _F:
    nan = fx.isnan() | fy.isnan() | fx.isinf() | fy.eq(0.0)
    r = _where(fy.isinf() & ~nan, fx, r)
    return _where(nan, float("nan"), r)


@builtin
def fmod(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """``x - trunc(x / y) * y`` exactly, with the sign of ``x`` (NaN for ``y == 0`` or
    infinite ``x``; ``x`` for infinite ``y``)."""
    fx, fy, out, sx, sy = _remainder_inputs("fmod", x, y, _builder)
    r, _ = _fmod_steps(sx, sy)
    r = _where(fx < 0.0, -r, r)
    r = _where(fx.eq(0.0), fx, r)
    return _result(_remainder_special(fx, fy, r), out)


@builtin
def remainder(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """IEEE's remainder: ``x - n * y`` with ``n`` the integer nearest ``x / y`` (ties to even),
    exactly."""
    fx, fy, out, sx, sy = _remainder_inputs("remainder", x, y, _builder)
    r, odd = _fmod_steps(sx, sy)
    twice = r * 2.0                                       # exact unless it overflows
    up = (twice > sy) | (twice.eq(sy) & odd)
    r = _where(up, r - sy, r)
    r = _where(fx < 0.0, -r, r)
    r = _where(fx.eq(0.0), fx, r)
    return _result(_remainder_special(fx, fy, r), out)


# -- sinpi, cospi ------------------------------------------------------------------------------
def _times_pi(t: _F) -> _F:
    """``pi * t`` with the product's rounding error kept (float64)."""
    p = t * _PI_HL[0]
    return p + (t.fma(_PI_HL[0], -p) + t * _PI_HL[1])


def _reduce_half(f: _F) -> _F:
    """``x - 2 * rint(x / 2)``, in [-1, 1], exactly."""
    return f - _fn("rint", f * 0.5) * 2.0


@builtin
def sinpi(x: Any, _builder: Builder = None) -> tensor:
    """``sin(pi * x)`` with the argument reduced exactly (0 at every integer; within 2 ulp)."""
    (f,), out = _formula("sinpi", x, b=_builder, wide=True)
    r = _reduce_half(f)
    t = _where(r > 0.5, 1.0 - r, _where(r < -0.5, -1.0 - r, r))
    s = _times_pi(t).call("sin")
    s = _where(t.eq(0.0), f * 0.0, s)
    return _result(_where(f.isinf(), float("nan"), s), out)


@builtin
def cospi(x: Any, _builder: Builder = None) -> tensor:
    """``cos(pi * x)`` with the argument reduced exactly (0 at every half-integer; within 2
    ulp)."""
    (f,), out = _formula("cospi", x, b=_builder, wide=True)
    a = _reduce_half(f).call("abs")                       # in [0, 1]; 0.5 - a, 1 - a exact
    c = _where(a <= 0.25, _times_pi(a).call("cos"),
               _where(a < 0.75, _times_pi(0.5 - a).call("sin"),
                      -(_times_pi(1.0 - a).call("cos"))))
    return _result(_where(f.isinf(), float("nan"), c), out)


# -- exponent access ---------------------------------------------------------------------------
@builtin
def ilogb(x: Any, _builder: Builder = None) -> tensor:
    """The unbiased exponent of ``x`` as ``int32`` (subnormals included); INT_MIN for 0 and
    NaN, INT_MAX for infinities."""
    t = _float(x, "ilogb", _builder)
    f = _F(t if irt.elem_type(t.type).bits >= 32 else semantic.cast(t, float32, _builder),
           _builder)
    e = _exponent(_where(f.eq(0.0) | f.isinf() | f.isnan(), 1.0, f)).to(int32)
    e = _where(f.isinf(), 2 ** 31 - 1, e)
    return _where(f.eq(0.0) | f.isnan(), -2 ** 31, e).to(int32).t


@builtin
def logb(x: Any, _builder: Builder = None) -> tensor:
    """The unbiased exponent of ``x`` as a float; -inf for 0, +inf for infinities."""
    (f,), out = _formula("logb", x, b=_builder)
    e = _exponent(_where(f.eq(0.0) | f.isinf() | f.isnan(), 1.0, f)).to(f.t.dtype)
    e = _where(f.isinf(), _INF, _where(f.eq(0.0), -_INF, e))
    return _result(_where(f.isnan(), f, e), out)


@builtin
def scalbn(x: Any, n: Any, _builder: Builder = None) -> tensor:
    """``x * 2**n`` exactly (as ``ldexp``)."""
    return _ld().ldexp(x, n, _builder=_builder)


@builtin
def nextafter(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """The representable value after ``x`` in the direction of ``y`` (``y`` if equal)."""
    (fx, fy), out = _formula("nextafter", x, y, b=_builder)
    if out.primitive_bitwidth < 32:
        fx, fy = fx.to(out), fy.to(out)
    r = _where(fx < fy, step_up(fx), _where(fx > fy, step_down(fx), fy))
    return _result(_where(fx.isnan() | fy.isnan(), float("nan"), r), out)


@builtin
def fdim(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """``x - y`` where ``x > y``, else +0 (NaN in, NaN out)."""
    (fx, fy), out = _formula("fdim", x, y, b=_builder)
    r = _where(fx > fy, fx - fy, 0.0)
    return _result(_where(fx.isnan() | fy.isnan(), float("nan"), r), out)


# -- conversions to 64-bit integers, saturation ------------------------------------------------
@builtin
def llrint(x: Any, _builder: Builder = None) -> tensor:
    """``x`` rounded to the nearest integer (ties to even) as ``int64``, saturating."""
    return semantic.cast(_ld().rint(x, _builder=_builder), int64, _builder)


@builtin
def llround(x: Any, _builder: Builder = None) -> tensor:
    """``x`` rounded to the nearest integer (ties away from zero) as ``int64``, saturating."""
    return semantic.cast(_ld().round(x, _builder=_builder), int64, _builder)


@builtin
def saturatef(x: Any, _builder: Builder = None) -> tensor:
    """``x`` clamped to [0, 1]; NaN gives 0."""
    (f,), out = _formula("saturatef", x, b=_builder)
    r = _where(f > 1.0, 1.0, _where(f > 0.0, f, 0.0))
    return _result(r, out)


@builtin
def rcp64h(x: Any, _builder: Builder = None) -> tensor:
    """An approximate float64 reciprocal from the high 32 bits of ``x``; the result's low 32
    bits are zero (as libdevice's)."""
    t = semantic.cast(_float(x, "rcp64h", _builder), float64, _builder)
    hi = lambda f: (f.bitcast(int64) & -(2 ** 32)).bitcast(float64)   # noqa: E731
    r = 1.0 / hi(_F(t, _builder))
    return _where(r.isnan() | r.isinf() | r.eq(0.0), r, hi(r)).t


@builtin
def rsqrt_rn(x: Any, _builder: Builder = None) -> tensor:
    """``1 / sqrt(x)``, correctly rounded in float32 (computed in float64); within 2 ulp in
    float64."""
    (f,), out = _formula("rsqrt_rn", x, b=_builder, wide=True)
    return _result(1.0 / f.call("sqrt"), out)


# -- norms -------------------------------------------------------------------------------------
def _norm(name: str, xs: tuple[Any, ...], b: Builder, reciprocal: bool) -> tuple[_F, Any]:
    """``sqrt(sum x_i**2)`` (or its reciprocal) without overflow or underflow in between:
    float32 in float64, and float64 scaled by a power of two (exact) beside the largest
    ``|x_i|``."""
    fs, out = _formula(name, *xs, b=b, wide=True)
    ab = [f.call("abs") for f in fs]
    nan = inf = None
    for a in ab:
        nan = a.isnan() if nan is None else nan | a.isnan()
        inf = a.isinf() if inf is None else inf | a.isinf()
    if out.primitive_bitwidth < 64:
        s = ab[0] * ab[0]
        for a in ab[1:]:
            s = a.fma(a, s)
        n = 1.0 / s.call("sqrt") if reciprocal else s.call("sqrt")
    else:
        m = ab[0]
        for a in ab[1:]:
            m = _where(a > m, a, m)
        safe = _where(m.eq(0.0) | m.isinf() | m.isnan(), 1.0, m)
        k = -_exponent(safe)
        scaled = [_scale(a, k) for a in ab]
        s = scaled[0] * scaled[0]
        for a in scaled[1:]:
            s = a.fma(a, s)
        n = _scale(1.0 / s.call("sqrt"), k) if reciprocal else _scale(s.call("sqrt"), -k)
        n = _where(m.eq(0.0), _INF if reciprocal else 0.0, n)
    n = _where(nan, float("nan"), n)
    return _where(inf, 0.0 if reciprocal else _INF, n), out


def _norm_function(name: str, arity: int, reciprocal: bool, doc: str) -> Any:
    @builtin
    def fn(*args: Any, _builder: Builder = None) -> tensor:
        if len(args) != arity:
            raise TypeError(f"libdevice.{name} takes {arity} arguments, got {len(args)}")
        n, out = _norm(name, args, _builder, reciprocal)
        return _result(n, out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


norm3d = _norm_function("norm3d", 3, False, "``sqrt(a*a + b*b + c*c)`` without overflow in "
                        "between (within 2 ulp).")
norm4d = _norm_function("norm4d", 4, False, "``sqrt(a*a + b*b + c*c + d*d)`` without overflow "
                        "in between (within 2 ulp).")
rnorm3d = _norm_function("rnorm3d", 3, True, "``1 / norm3d(a, b, c)`` (within 3 ulp).")
rnorm4d = _norm_function("rnorm4d", 4, True, "``1 / norm4d(a, b, c, d)`` (within 3 ulp).")
rhypot = _norm_function("rhypot", 2, True, "``1 / hypot(x, y)`` (within 3 ulp).")


@builtin
def rcbrt(x: Any, _builder: Builder = None) -> tensor:
    """``1 / cbrt(x)`` (within 1 ulp in float32, computed in float64; within 3 ulp in
    float64)."""
    (f,), out = _formula("rcbrt", x, b=_builder, wide=True)
    return _result(1.0 / _fn("cbrt", f), out)


__all__ = ["pow", "fast_powf", "exp10", "fast_exp10f", "fmod", "remainder", "sinpi", "cospi",
           "ilogb", "logb", "scalbn", "nextafter", "fdim", "llrint", "llround", "saturatef",
           "rcp64h", "rsqrt_rn", "norm3d", "norm4d", "rnorm3d", "rnorm4d", "rhypot", "rcbrt"]
