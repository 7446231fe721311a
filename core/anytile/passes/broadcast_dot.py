"""``sum(x[:, :, None] * y[None, :, :], axis=1)`` -> ``dot(x, y)``: a matrix product
written with broadcasting becomes one.

Written out, the product of an ``(M, K)`` and a ``(K, N)`` tile materialises the ``(M, K, N)``
tile of every product before summing it: 512 KiB of f32 for 128 x 32 x 32, more registers
than a GPU program has and more shared memory than a reduction over it may use.  ``DotOp``
means the same sum of products (its summation order is open, as a commutative ``reduce``'s
is), so Triton makes this rewrite and so does anytile: the kernel then runs at the speed of
a dot, and on a GPU at all.  Only f32 products are rewritten, as an ``ieee`` dot (no tf32
rounding of the inputs, each product rounded no more than the written form rounds it), with
every dimension at least 16 (``tl.dot``'s own bound); the product tile must have no other
use.  ``dot-accumulate`` then folds a following ``acc + ...`` into the dot."""
from __future__ import annotations

from typing import Optional

from ..ir import ops as O
from ..ir import types as T
from ..ir.nodes import Module, Value
from ..ir.uses import Uses
from .rewrite import Match, P, Rule, apply_rules

__all__ = ["broadcast_products_to_dots"]


def _is_sum(reduce: O.ReduceOp) -> bool:
    """The combine region is ``yield(a + b)`` of its two arguments."""
    body = reduce.combine
    if len(reduce.srcs) != 1 or len(body.args) != 2 or len(body.ops) != 2:
        return False
    add, done = body.ops
    return isinstance(add, O.BinaryOp) and add.kind == "add" and \
        {add.lhs, add.rhs} == set(body.args) and \
        isinstance(done, O.YieldOp) and list(done.values) == [add.result]


def _spread(v: Value, axis: int) -> Optional[Value]:
    """The 2-D tile that ``v`` broadcasts along ``axis``: ``v`` is
    ``broadcast(expand_dims(t, axis))``; else ``None``."""
    b = v.owner
    if not isinstance(b, O.BroadcastOp) or not isinstance(b.src.owner, O.ExpandDimsOp):
        return None
    e = b.src.owner
    return e.src if e.axis == axis and len(T.shape_of(e.src.type)) == 2 else None


def broadcast_products_to_dots(module: Module) -> bool:
    """Rewrite summed broadcast products into ``DotOp`` where safe (module docstring)."""
    uses = Uses(module)

    def rewrite(m: Match) -> Optional[Value]:
        red = m.op
        if red.axis != 1 or not _is_sum(red):
            return None
        prod = red.srcs[0]
        mul = prod.owner
        if not isinstance(mul, O.BinaryOp) or mul.kind != "mul" or uses.count(prod) != 1 or \
                T.elem_type(prod.type) != T.f32 or len(T.shape_of(prod.type)) != 3:
            return None
        for left, right in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            x, y = _spread(left, 2), _spread(right, 0)
            if x is None or y is None:
                continue
            (m_, k), (k2, n) = T.shape_of(x.type), T.shape_of(y.type)
            if k != k2 or min(m_, n, k) < 16 or T.elem_type(x.type) != T.f32 or \
                    T.elem_type(y.type) != T.f32:
                return None
            zero = m.const(0.0, T.TileType((m_, n), T.f32))
            return m.new(O.DotOp, a=x, b=y, acc=zero, input_precision="ieee").result
        return None
    return apply_rules(module, [Rule("broadcast-product-dot", P("reduce"), rewrite)])
