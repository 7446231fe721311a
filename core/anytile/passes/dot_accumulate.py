"""``acc + dot(a, b)`` -> ``dot(a, b, acc)``: the accumulator goes into the product.

``tl.dot(a, b)`` without an accumulator is ``dot(a, b, zeros)``; a kernel that writes
``acc += tl.dot(a, b)`` then adds two tiles after the product, where ``acc = tl.dot(a, b,
acc)`` adds each partial sum into ``acc`` as the product goes.  ``DotOp`` leaves the order of
its summands (the products and ``acc``) open, so the second is a valid reading of the first,
and it is the one Triton compiles both forms to: results match Triton's bit for bit (tensor
cores accumulate into the accumulator registers) and the extra add and its tile of
registers go.  Only a dot whose accumulator is a constant zero, whose result has no other
use and which sits in the same block as the add is rewritten (the product is never moved
into a loop)."""
from __future__ import annotations

from typing import Optional

from ..ir import ops as O
from ..ir.nodes import Module, Value
from ..ir.uses import Uses
from .rewrite import Match, P, Rule, apply_rules

__all__ = ["fuse_dot_accumulate"]


def _is_zero_constant(v: Value) -> bool:
    owner = v.owner
    return isinstance(owner, O.ConstantOp) and owner.value == 0 and \
        not (isinstance(owner.value, float) and str(owner.value).startswith("-"))


def fuse_dot_accumulate(module: Module) -> bool:
    """Rewrite ``acc + dot(a, b, 0)`` into ``dot(a, b, acc)`` where safe (module docstring)."""
    uses = Uses(module)

    def rewrite(m: Match) -> Optional[Value]:
        add = m.op
        for product, acc in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
            dot = product.owner
            if isinstance(dot, O.DotOp) and uses.count(product) == 1 and \
                    _is_zero_constant(dot.acc) and acc.type == product.type and \
                    uses.block_of(dot) is uses.block_of(add) is not None:
                return m.new(O.DotOp, a=dot.a, b=dot.b, acc=acc,
                             input_precision=dot.input_precision).result
        return None
    return apply_rules(module, [Rule("dot-add-accumulator", P("binary", kind="add"), rewrite)])
