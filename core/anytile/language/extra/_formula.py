"""The machinery libdevice's formulas are written in: a float tile whose Python operators
build IR (``_F``), Horner polynomials, and the choice of the precision a formula runs in."""
from __future__ import annotations

from typing import Any

from ...ir import ops
from ...ir import types as irt
from ...ir.builder import Builder
from .. import math as _math
from .. import semantic
from ..objects import float32 as _F32, float64 as _F64, tensor


def _unary(kind: str, x: tensor, b: Builder) -> tensor:
    return tensor(b.create(ops.UnaryOp, kind, x.handle).result)


def _float(x: Any, name: str, b: Builder) -> tensor:
    # reuse tl.math's check so the message names the function the user called
    return _math._float_input(x, name, b)


class _F:
    """A float tile inside a formula: Python operators build its IR (``b`` is the builder)."""

    def __init__(self, t: tensor, b: Builder) -> None:
        self.t, self.b = t, b

    def _v(self, o: Any) -> Any:
        return o.t if isinstance(o, _F) else o

    def _bin(self, fn: Any, o: Any, swap: bool = False) -> "_F":
        x, y = (self._v(o), self.t) if swap else (self.t, self._v(o))
        with self.b.strict_arithmetic():     # a formula's roundings are its own: never fused
            return _F(fn(x, y, self.b), self.b)

    def __neg__(self) -> "_F":
        return _F(semantic.neg(self.t, self.b), self.b)

    def __invert__(self) -> "_F":
        return _F(semantic.invert(self.t, self.b), self.b)

    def eq(self, o: Any) -> "_F":
        return self._bin(semantic.equal, o)

    def call(self, kind: str) -> "_F":
        with self.b.strict_arithmetic():     # exp2 builds powers of two: keep subnormal ones
            return _F(_unary(kind, self.t, self.b), self.b)

    def isnan(self) -> "_F":
        return self._bin(semantic.not_equal, self)

    def isinf(self) -> "_F":
        return self.call("abs").eq(float("inf"))

    def ne(self, o: Any) -> "_F":
        return self._bin(semantic.not_equal, o)

    def fma(self, y: Any, z: Any) -> "_F":
        """``self * y + z`` rounded once."""
        return _F(_math.fma(self.t, self._v(y), self._v(z), _builder=self.b), self.b)

    def to(self, dtype: Any) -> "_F":
        return _F(semantic.cast(self.t, dtype, self.b), self.b)

    def bitcast(self, dtype: Any) -> "_F":
        return _F(semantic.bitcast(self.t, dtype, self.b), self.b)


_OPERATORS = {"add": semantic.add, "sub": semantic.sub, "mul": semantic.mul,
              "truediv": semantic.truediv, "lt": semantic.less_than, "gt": semantic.greater_than,
              "ge": semantic.greater_equal, "le": semantic.less_equal, "and": semantic.and_,
              "or": semantic.or_, "xor": semantic.xor_, "lshift": semantic.shl,
              "rshift": semantic.shr, "floordiv": semantic.floordiv, "mod": semantic.mod}
for _name, _fn in _OPERATORS.items():
    setattr(_F, f"__{_name}__", lambda self, o, fn=_fn: self._bin(fn, o))
    if _name in ("add", "sub", "mul", "truediv", "and", "or", "xor"):
        setattr(_F, f"__r{_name}__", lambda self, o, fn=_fn: self._bin(fn, o, True))


def _where(c: _F, x: Any, y: Any) -> _F:
    v = lambda o: o.t if isinstance(o, _F) else o     # noqa: E731
    return _F(semantic.where(c.t, v(x), v(y), c.b), c.b)


def _poly(z: _F, coeffs: list[float]) -> _F:
    """``coeffs[0] + coeffs[1] * z + ...`` by Horner's rule."""
    acc = z * coeffs[-1] + coeffs[-2]
    for c in reversed(coeffs[:-2]):
        acc = acc * z + c
    return acc


_PI = 3.141592653589793
_LN2 = 0.6931471805599453
_TAN_PI_8 = 0.41421356237309503


def _formula(name: str, *xs: Any, b: Builder, wide: bool = False) -> tuple[list[_F], Any]:
    """The inputs as ``_F`` in the type the formula runs in (f16/bf16 in f32; with ``wide``,
    everything narrower than f64 in f64), and the type to round the result to."""
    ts = [_float(x, name, b) for x in xs]
    for i in range(1, len(ts)):
        ts[0], ts[i] = semantic.promote_pair(ts[0], ts[i], b, op=name)
    ts = [semantic.cast(t, ts[0].dtype, b) for t in ts]
    if len(ts) > 1:
        ts = list(semantic.broadcast_all(b, *ts))
    out = ts[0].dtype
    bits = irt.elem_type(ts[0].type).bits
    if bits < 64 and wide:
        ts = [semantic.cast(t, _F64, b) for t in ts]
    elif bits < 32:
        ts = [semantic.cast(t, _F32, b) for t in ts]
    return [_F(t, b) for t in ts], out


def _result(f: _F, dtype: Any) -> tensor:
    return semantic.cast(f.t, dtype, f.b)


def _is_f64(f: _F) -> bool:
    return irt.elem_type(f.t.type).bits == 64


