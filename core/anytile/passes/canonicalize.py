"""Canonicalisation: local algebraic and structural simplifications, as a table of rules.

Each rule is exact under the semantics of ``anytile.ir.ops`` (float rules only where IEEE
guarantees the identity: ``x * 1.0 == x`` and ``x - 0.0 == x``, but ``x + 0.0`` is not ``x``
for ``x = -0.0`` so only ``x + -0.0`` is removed; ``x * 0`` and ``x - x`` only for integers).
Constants are moved to the right of commutative ops so that later rules, folding and CSE see
one form.  Folding of constant operands lives in ``fold.py``.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from ..ir import ops as O
from ..ir.nodes import Module, Value
from ..ir.types import ScalarType, Type, elem_type
from .rewrite import Const, Match, OpPattern, P, Rule, Var, apply_rules, is_commutative

__all__ = ["canonicalize", "CANONICALIZE_RULES"]


def _scalar(t: Type) -> Optional[ScalarType]:
    e = elem_type(t)
    return e if isinstance(e, ScalarType) else None


def _is_int(t: Type) -> bool:
    e = _scalar(t)
    return e is not None and e.is_int


def _is_float(t: Type) -> bool:
    e = _scalar(t)
    return e is not None and e.is_float


def _is_zero(c: Any, t: Type) -> bool:
    return c == 0


def _is_pos_zero(c: Any, t: Type) -> bool:
    return c == 0 and math.copysign(1.0, c) > 0


def _is_neg_zero(c: Any, t: Type) -> bool:
    return c == 0 and _is_float(t) and math.copysign(1.0, c) < 0


def _is_one(c: Any, t: Type) -> bool:
    return c == 1


def _is_all_ones(c: Any, t: Type) -> bool:
    e = _scalar(t)
    return e is not None and e.is_int and int(c) % (1 << e.bits) == (1 << e.bits) - 1


def _signed(c: int, t: Type) -> int:
    """``c`` read as a signed integer of ``t``'s width (loop bounds compare signed)."""
    bits = elem_type(t).bits
    c = int(c) % (1 << bits)
    return c - (1 << bits) if bits > 1 and c >= 1 << (bits - 1) else c


def _x(m: Match) -> Value:
    return m.x


def _x_if_int(m: Match) -> Optional[Value]:
    return m.x if _is_int(m.x.type) else None


def _zero_if_int(m: Match) -> Optional[Value]:
    return m.const(0, m.x.type) if _is_int(m.x.type) else None


def _binary(kind: str, rhs: Any) -> OpPattern:
    return P("binary", Var("x"), rhs, kind=kind)


def _same_operands(kind: str) -> OpPattern:
    return P("binary", Var("x"), Var("x"), kind=kind)


# -- commutative ops: constants go to the right ---------------------------------------------
_SWAPPED_PREDICATE = {"eq": "eq", "ne": "ne", "lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}


def _constant_to_right(m: Match) -> Optional[Value]:
    op = m.op
    if constant_is_left(op.lhs, op.rhs) and is_commutative(op):
        return m.new(O.BinaryOp, kind=op.kind, lhs=op.rhs, rhs=op.lhs, strict=op.strict).result
    return None


def _compare_constant_to_right(m: Match) -> Optional[Value]:
    op = m.op
    if constant_is_left(op.lhs, op.rhs):
        return m.new(O.CompareOp, pred=_SWAPPED_PREDICATE[op.pred], lhs=op.rhs,
                     rhs=op.lhs).result
    return None


def constant_is_left(lhs: Value, rhs: Value) -> bool:
    return isinstance(lhs.owner, O.ConstantOp) and not isinstance(rhs.owner, O.ConstantOp)


def _compare_self(m: Match) -> Optional[Value]:
    """``x <pred> x`` on integers or pointers is known (floats: x may be NaN)."""
    if _is_float(m.x.type):
        return None
    return m.const(int(m.op.pred in ("eq", "le", "ge")), m.op.result.type)


# -- shape ops -------------------------------------------------------------------------------
def _same_type_as_result(m: Match) -> Optional[Value]:
    return m.x if m.x.type == m.op.result.type else None


def _resplat(m: Match) -> Value:
    """broadcast/reshape/expand_dims of a splat is a splat of the result type."""
    return m.new(O.SplatOp, m.s, result_types=[m.op.result.type]).result


def _rebroadcast(m: Match) -> Value:
    return m.new(O.BroadcastOp, m.x, result_types=[m.op.result.type]).result


def _reshape_once(m: Match) -> Value:
    return m.new(O.ReshapeOp, m.x, result_types=[m.op.result.type]).result


def _identity_permute(m: Match) -> Optional[Value]:
    return m.x if tuple(m.op.order) == tuple(range(len(m.op.order))) else None


def _compose_permutes(m: Match) -> Value:
    inner = m.inner.order
    return m.new(O.PermuteOp, m.x, order=tuple(inner[i] for i in m.op.order)).result


# -- select -----------------------------------------------------------------------------------
def _select_constant_cond(m: Match) -> Value:
    return m.t if m.c else m.f


# -- control flow -----------------------------------------------------------------------------
def _inline_constant_if(m: Match) -> list[Value]:
    """``if`` on a constant: the taken branch's ops replace it; its yield gives the results."""
    branch = m.op.then_body if m.c else m.op.else_body
    *body, terminator = branch.ops
    m.splice(body)
    return list(terminator.values)


def _fold_for_trip_count(m: Match) -> Optional[list[Value]]:
    """A ``for`` with constant bounds that runs zero times gives its inits; one that runs
    once becomes its body with ``iv = lower``."""
    op: O.ForOp = m.op
    lower, upper, step = (_const_int(v) for v in (op.lower, op.upper, op.step))
    if lower is None or upper is None:
        return None
    t = op.lower.type
    lo, hi = _signed(lower, t), _signed(upper, t)
    if lo >= hi:
        return list(op.inits)
    if step is None or _signed(step, t) <= 0 or lo + _signed(step, t) < hi:
        return None
    # exactly one trip: the body's arguments become (lower, *inits)
    *body, terminator = op.body.ops
    for arg, value in zip(op.body.args, [op.lower, *op.inits]):
        m.bind_argument(arg, value)
    m.splice(body)
    return list(terminator.values)


def _const_int(v: Value) -> Optional[int]:
    c = v.owner.value if isinstance(v.owner, O.ConstantOp) else None
    return c if isinstance(c, int) else None


def _double(kind: str) -> OpPattern:
    return P("unary", P("unary", Var("x"), kind=kind), kind=kind)


CANONICALIZE_RULES: list[Rule] = [
    # arithmetic identities
    Rule("add-zero", _binary("add", Const(where=_is_zero)), _x_if_int),
    Rule("add-neg-zero", _binary("add", Const(where=_is_neg_zero)), _x),
    Rule("sub-zero", _binary("sub", Const(where=_is_pos_zero)), _x),
    Rule("mul-one", _binary("mul", Const(where=_is_one)), _x),
    Rule("mul-zero", _binary("mul", Const(where=_is_zero)), _zero_if_int),
    Rule("div-one", _binary("div", Const(where=_is_one)), _x_if_int),
    Rule("fdiv-one", _binary("fdiv", Const(where=_is_one)), _x),
    Rule("or-zero", _binary("or", Const(where=_is_zero)), _x),
    Rule("xor-zero", _binary("xor", Const(where=_is_zero)), _x),
    Rule("and-ones", _binary("and", Const(where=_is_all_ones)), _x),
    Rule("and-zero", _binary("and", Const(where=_is_zero)), lambda m: m.const(0, m.x.type)),
    Rule("shl-zero", _binary("shl", Const(where=_is_zero)), _x),
    Rule("shr-zero", _binary("shr", Const(where=_is_zero)), _x),
    Rule("sub-self", _same_operands("sub"), _zero_if_int),
    Rule("xor-self", _same_operands("xor"), lambda m: m.const(0, m.x.type)),
    Rule("and-self", _same_operands("and"), _x),
    Rule("or-self", _same_operands("or"), _x),
    Rule("min-self", _same_operands("min"), _x),
    Rule("max-self", _same_operands("max"), _x),
    Rule("neg-neg", _double("neg"), _x),
    Rule("not-not", _double("not"), _x),
    Rule("commutative-constant-right", P("binary"), _constant_to_right),
    Rule("compare-constant-right", P("compare"), _compare_constant_to_right),
    Rule("compare-self", P("compare", Var("x"), Var("x")), _compare_self),
    Rule("addptr-zero", P("addptr", Var("x"), Const(where=_is_zero)), _x),
    # select
    Rule("select-constant", P("select", Const("c"), Var("t"), Var("f")), _select_constant_cond),
    Rule("select-same", P("select", Var("c"), Var("x"), Var("x")), _x),
    # shapes and conversions
    Rule("broadcast-same", P("broadcast", Var("x")), _same_type_as_result),
    Rule("broadcast-splat", P("broadcast", P("splat", Var("s"))), _resplat),
    Rule("broadcast-broadcast", P("broadcast", P("broadcast", Var("x"))), _rebroadcast),
    Rule("reshape-same", P("reshape", Var("x")), _same_type_as_result),
    Rule("reshape-splat", P("reshape", P("splat", Var("s"))), _resplat),
    Rule("reshape-reshape", P("reshape", P("reshape", Var("x"))), _reshape_once),
    Rule("expand-dims-splat", P("expand_dims", P("splat", Var("s"))), _resplat),
    Rule("permute-identity", P("permute", Var("x")), _identity_permute),
    Rule("permute-permute", P("permute", P("permute", Var("x"), name="inner")),
         _compose_permutes),
    Rule("cast-same", P("cast", Var("x")), _same_type_as_result),
    Rule("bitcast-same", P("bitcast", Var("x")), _same_type_as_result),
    # structured control flow
    Rule("if-constant", P("if", Const("c")), _inline_constant_if),
    Rule("for-trip-count", P("for"), _fold_for_trip_count),
]


def canonicalize(module: Module) -> bool:
    """Apply ``CANONICALIZE_RULES`` to every function until none applies; True if changed."""
    return apply_rules(module, CANONICALIZE_RULES)
