"""Elementwise math builtins, available as ``tl.exp`` and ``tl.math.exp`` alike."""
from __future__ import annotations

from typing import Any

from ..ir import ops
from ..ir import types as irt
from ..ir.builder import Builder
from . import semantic
from .objects import builtin, tensor, tensor_method
from .standard import cdiv

__all__ = ["exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "tanh",
           "erf", "floor", "ceil", "abs", "fma", "sigmoid", "umulhi", "fdiv", "div_rn", "cdiv"]


def _float_input(x: Any, name: str, b: Builder) -> tensor:
    t = semantic.to_tensor(x, b)
    elem = irt.elem_type(t.type)
    if not (isinstance(elem, irt.ScalarType) and elem.is_float):
        raise TypeError(f"tl.{name} needs a floating-point input, got {t.dtype!r}; "
                        "convert it first, e.g. x.to(tl.float32)")
    return t


def _make_unary(kind: str, doc: str) -> Any:
    @builtin
    def fn(x: Any, _builder: Builder = None) -> tensor:
        t = _float_input(x, kind, _builder)
        return tensor(_builder.create(ops.UnaryOp, kind, t.handle).result)

    fn.__name__ = fn.__qualname__ = kind
    fn.__doc__ = doc
    return tensor_method(fn)


exp = _make_unary("exp", "e raised to ``x``, elementwise.")
exp2 = _make_unary("exp2", "2 raised to ``x``, elementwise.")
log = _make_unary("log", "The natural logarithm, elementwise.")
log2 = _make_unary("log2", "The base-2 logarithm, elementwise.")
sqrt = _make_unary("sqrt", "The square root, elementwise.")
rsqrt = _make_unary("rsqrt", "``1 / sqrt(x)``, elementwise.")
sin = _make_unary("sin", "The sine, elementwise.")
cos = _make_unary("cos", "The cosine, elementwise.")
tanh = _make_unary("tanh", "The hyperbolic tangent, elementwise.")
erf = _make_unary("erf", "The error function, elementwise.")
floor = _make_unary("floor", "The largest integer not above ``x``, elementwise.")
ceil = _make_unary("ceil", "The smallest integer not below ``x``, elementwise.")


@builtin
def sqrt_rn(x: Any, _builder: Builder = None) -> tensor:
    """The correctly rounded square root."""
    t = _float_input(x, "sqrt_rn", _builder)
    return tensor(_builder.create(ops.UnaryOp, "sqrt", t.handle).result)


@tensor_method
@builtin
def abs(x: Any, _builder: Builder = None) -> tensor:
    """The absolute value, elementwise (unsigned values are returned unchanged)."""
    t = semantic.to_tensor(x, _builder)
    elem = irt.elem_type(t.type)
    if isinstance(elem, irt.PointerType):
        raise TypeError("tl.abs is not defined for pointers")
    if elem.is_unsigned or elem.is_bool:
        return t
    return tensor(_builder.create(ops.UnaryOp, "abs", t.handle).result)


@builtin
def fma(x: Any, y: Any, z: Any, _builder: Builder = None) -> tensor:
    """``x * y + z`` rounded once (floats)."""
    a, b_ = semantic.promote_pair(x, y, _builder, op="tl.fma")
    a, c = semantic.promote_pair(a, z, _builder, op="tl.fma")
    a, b_, c = semantic.broadcast_all(_builder, semantic.cast(a, c.dtype, _builder),
                                      semantic.cast(b_, c.dtype, _builder), c)
    if not irt.elem_type(a.type).is_float:
        raise TypeError(f"tl.fma needs floating-point inputs, got {a.dtype!r}")
    return tensor(_builder.create(ops.FmaOp, a.handle, b_.handle, c.handle).result)


@tensor_method
@builtin
def sigmoid(x: Any, _builder: Builder = None) -> tensor:
    """``1 / (1 + exp(-x))``, elementwise."""
    t = _float_input(x, "sigmoid", _builder)
    e = tensor(_builder.create(ops.UnaryOp, "exp", semantic.neg(t, _builder).handle).result)
    return semantic.truediv(1.0, semantic.add(1.0, e, _builder), _builder)


@builtin
def umulhi(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """The high half of the double-width product of two integers."""
    a, b_ = semantic.promote_pair(x, y, _builder, op="tl.umulhi")
    if not irt.elem_type(a.type).is_int:
        raise TypeError(f"tl.umulhi needs integer inputs, got {a.dtype!r}")
    return tensor(_builder.create(ops.UMulHiOp, a.handle, b_.handle).result)


@builtin
def fdiv(x: Any, y: Any, ieee_rounding: Any = False, _builder: Builder = None) -> tensor:
    """Float division ``x / y``."""
    a, b_ = semantic.promote_pair(x, y, _builder, op="tl.fdiv")
    if not irt.elem_type(a.type).is_float:
        raise TypeError(f"tl.fdiv needs floating-point inputs, got {a.dtype!r}")
    return tensor(_builder.create(ops.BinaryOp, "fdiv", a.handle, b_.handle).result)


@builtin
def div_rn(x: Any, y: Any, _builder: Builder = None) -> tensor:
    """Correctly rounded float division."""
    return fdiv(x, y, _builder=_builder)

