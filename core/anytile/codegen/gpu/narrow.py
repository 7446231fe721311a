"""Dots of float8 tiles given back their float8 operands where a target multiplies them natively.

The language widens a ``tl.dot`` of float8 tiles to f16 (``cast`` ops before the dot): every
float8 value is exact in f16, so any f16 matrix instruction computes the product.  A target
whose matrix unit reads float8 itself reads half the bytes and runs at twice the rate:
``narrow_float8_dots`` removes those casts where one of the target's dot strategies takes
the dot in float8 (``DotSelector.reads_narrow``), and only in the shape that pays: B loaded
and read along K (its columns), so it is copied as it is into shared memory, and A either
loaded along its rows as well or computed in registers and rounded to float8 there
(attention's ``p.to(float8)``: the matrix unit reads it from registers, as Triton's float8
attention does, instead of the f16 product keeping a widened copy of V in registers).  The
products are the same exact ones; a matrix unit may add them with fewer bits than the f32
accumulator has (some float8 units do, as Triton's default and vendors' float8 matmuls
accept), within the tolerance of a dot.
"""
from __future__ import annotations

from typing import Callable

from ...ir import ops
from ...ir.nodes import Function, Value, walk
from ...ir.types import elem_type
from ...ir.uses import Uses
from .pipeline import transposed_loads

__all__ = ["narrow_float8_dots"]


def narrow_float8_dots(fn: Function, accepts: Callable[[ops.DotOp, Value, Value], bool]) -> int:
    """Rewrite ``dot(cast(a8), cast(b8), acc)`` into ``dot(a8, b8, acc)`` where ``a8`` and
    ``b8`` are float8 tiles that only those casts (to f16, in the dot's block) read, each
    cast read by that dot alone, ``b8`` a load read along its columns and ``a8`` a load read
    along its rows or a value computed in float8 (``pipeline.transposed_loads``: a load's
    addresses run along the first dimension, found only where a dot is a candidate), and
    ``accepts(dot, a8, b8)``.  Returns how many
    dots changed."""
    uses = Uses(fn)
    count = 0
    transposed = None
    for block in [fn.body] + [r for op in walk(fn.body) for r in op.regions]:
        for dot in [op for op in block.ops if isinstance(op, ops.DotOp)]:
            casts = [_widening(dot.a, dot, uses, computed=True), _widening(dot.b, dot, uses)]
            if None in casts or casts[0] is casts[1] or not all(c in block.ops for c in casts):
                continue
            a8, b8 = (c.src for c in casts)
            transposed = transposed if transposed is not None else transposed_loads(fn)
            if a8.owner in transposed or b8.owner not in transposed or not accepts(dot, a8, b8):
                continue
            dot.a, dot.b = a8, b8
            for cast in casts:
                block.ops.remove(cast)
            count += 1
    return count


def _widening(v: Value, dot: ops.DotOp, uses: Uses, computed: bool = False):
    """The cast producing ``v`` when it widens a float8 tile load (or, with ``computed``, any
    float8 tile value), read by that cast alone, to f16, and ``dot`` is its only reader;
    else ``None``."""
    cast = v.owner
    if not isinstance(cast, ops.CastOp) or uses.only_user(v) is not dot or elem_type(v.type).name != "f16":
        return None
    src = cast.src
    loaded = isinstance(src.owner, ops.LoadOp)
    if not elem_type(src.type).is_float8 or not (loaded or computed and src.owner is not None) or \
            uses.only_user(src) is not cast:
        return None
    return cast

