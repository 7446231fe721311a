"""The part of CUDA's libdevice that Triton kernels commonly call, built from portable IR.

Each function keeps libdevice's name and meaning; ones without a direct IR op are exact
rearrangements (``trunc``, ``isnan``) or the classic accurate formulas (``log1p``, ``expm1``).
Functions not listed here (``pow``, ``rint``, ``atan2``, the hyperbolic inverses...) raise a
clear error when a kernel names them."""
from __future__ import annotations

from typing import Any

from ...ir import ops
from ...ir.builder import Builder
from .. import math as _math
from .. import semantic
from .. import standard as _standard
from ..objects import builtin, tensor

__all__ = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "erf",
           "floor", "ceil", "trunc", "fabs", "abs", "fma", "fmin", "fmax", "isnan", "isinf",
           "finitef", "log1p", "expm1", "div_rn", "fast_expf", "fast_logf", "fast_dividef",
           "umulhi", "mulhi"]

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


def _unary(kind: str, x: tensor, b: Builder) -> tensor:
    return tensor(b.create(ops.UnaryOp, kind, x.handle).result)


def _float(x: Any, name: str, b: Builder) -> tensor:
    # reuse tl.math's check so the message names the function the user called
    return _math._float_input(x, name, b)


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
    u = _unary("exp", t, b)
    um1 = semantic.sub(u, 1.0, b)
    # (u - 1) * x / log(u) cancels the rounding error of u = exp(x) near 0
    corrected = semantic.truediv(semantic.mul(um1, t, b), _unary("log", u, b), b)
    plain = semantic.logical_or(semantic.equal(um1, -1.0, b),
                                semantic.equal(u, float("inf"), b), b)
    return semantic.where(semantic.equal(u, 1.0, b), t,
                          semantic.where(plain, um1, corrected, b), b)


def __getattr__(name: str) -> Any:
    raise AttributeError(f"libdevice.{name} is not available in anytile; its portable libdevice "
                         f"provides {', '.join(__all__)}")
