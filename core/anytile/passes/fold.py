"""Constant folding: pure elementwise ops whose operands are all constants become constants.

Constants are scalars or uniform tiles (a ``constant`` op of tile type), so folding computes
one scalar.  The arithmetic is the reference interpreter's own (``anytile.interpreter.arith``),
so a folded constant is bit-for-bit what running the op would give: integers wrap, division
truncates toward zero, floats are computed in the op's precision (f16/bf16 through f32 with
one rounding, math functions through f64 with one rounding).  Where ``ops.py`` leaves the
result undefined nothing is folded: integer division or remainder by zero, shifts by a
negative amount or by at least the bit width.  A ``bitcast`` that makes a NaN is not folded
either: a constant's Python float would lose the NaN's bits.

Shape ops of a constant (``splat``, ``broadcast``, ``reshape``, ``expand_dims``,
``permute``) become a constant of the result type.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..interpreter import arith
from ..ir.nodes import Module, Op
from ..ir.types import PointerType, ScalarType, elem_type
from .rewrite import Match, P, Rule, apply_rules, constant_of

__all__ = ["fold_constants", "fold_op", "FOLD_RULES", "to_storage", "from_storage"]

_SHAPE_OPS = frozenset({"splat", "broadcast", "reshape", "expand_dims", "permute"})


def to_storage(value: Any, t: ScalarType) -> np.ndarray:
    """A constant's Python value as a 0-d array of ``t``'s storage dtype (ints wrapped)."""
    if t.is_float:
        return arith.round_f64_to(np.asarray(float(value), np.float64), t)
    if t.is_bool:
        return np.asarray(bool(value), np.bool_)
    v = int(value) % (1 << t.bits)
    if t.is_signed and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return np.asarray(v, t.np)


def from_storage(x: Any, t: ScalarType) -> Any:
    """The Python value a ``constant`` of type ``t`` holds for NumPy scalar ``x``."""
    if t.is_float:
        return float(np.asarray(x).astype(np.float64))
    return int(np.asarray(x).item())


def _undefined_binary(kind: str, t: ScalarType, rhs: Any) -> bool:
    """Integer cases that ``BinaryOp`` leaves undefined (never folded)."""
    if not t.is_int or t.is_bool:
        return False
    r = int(rhs)
    if kind in ("div", "rem"):
        return r == 0
    if kind in ("shl", "shr"):
        return not 0 <= r < t.bits
    return False


def fold_op(op: Op) -> Optional[Any]:
    """The Python constant ``op`` computes when its operands are all constants, else None."""
    values = [constant_of(v) for v in op.operands]
    if any(v is None for v in values) or not op.results:
        return None
    src_types = [elem_type(v.type) for v in op.operands]
    out_type = elem_type(op.results[0].type)
    if any(isinstance(t, PointerType) for t in (*src_types, out_type)):
        return None
    if op.NAME in _SHAPE_OPS:
        return values[0]
    args = [to_storage(v, t) for v, t in zip(values, src_types)]
    t = src_types[0] if src_types else out_type
    try:
        with np.errstate(all="ignore"):
            result = _compute(op, t, out_type, args)
    except arith.UnsupportedOp:
        return None  # ill-typed op: the verifier reports it
    return None if result is None else from_storage(result, out_type)


def _compute(op: Op, t: ScalarType, out_type: ScalarType, args: list[Any]) -> Optional[Any]:
    name = op.NAME
    if name == "binary":
        if _undefined_binary(op.kind, t, args[1]):
            return None
        return arith.binary_fn(op.kind, t)(*args)
    if name == "compare":
        return arith.compare_fn(op.pred, t)(*args)
    if name == "unary":
        return arith.unary_fn(op.kind, t)(*args)
    if name == "fma":
        return arith.fma_fn(t)(*args)
    if name == "umulhi":
        return arith.umulhi_fn(t)(*args)
    if name == "select":
        return args[1] if bool(args[0]) else args[2]
    if name == "cast":
        return arith.cast_fn(t, out_type)(args[0])
    if name == "bitcast":
        bits = arith.bitcast_fn(t, out_type)(args[0])
        # a NaN's payload and sign do not survive a Python float constant: keep the bitcast
        return None if out_type.is_float and np.isnan(bits) else bits
    return None


def _fold(m: Match) -> Optional[Any]:
    op = m.op
    if len(op.results) != 1:
        return None
    value = fold_op(op)
    if value is None:
        return None
    return m.const(value, op.result.type)


_FOLDABLE = frozenset({"binary", "compare", "unary", "fma", "umulhi", "select", "cast",
                       "bitcast"}) | _SHAPE_OPS

FOLD_RULES: list[Rule] = [Rule(f"fold-{name}", P(name), _fold) for name in sorted(_FOLDABLE)]


def fold_constants(module: Module) -> bool:
    """Replace every foldable op with constant operands by a constant; True if changed."""
    return apply_rules(module, FOLD_RULES)
