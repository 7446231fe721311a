"""Reductions and scans: tile ops that are more than one loop over elements.

* ``reduce`` along the last axis: SIMD accumulators over W-lane chunks, then a shuffle tree
  (``combine`` inlined at each step) -- when ``combine`` is one commutative binary op;
  otherwise elements are combined one by one in index order.  Along another axis: the
  result is walked in SIMD chunks and the reduced axis is a scalar loop, so any combine
  keeps index order and still uses vectors.
* ``scan``: the same two shapes, sequential along the scanned axis.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from anytile.codegen.llvm.types import I32, I64, splat, vector_width
from anytile.ir import BinaryOp, Block, ConstantOp, ReduceOp, ScanOp, YieldOp, elem_type

from .evaluate import scalar_op
from .plan import ELEMENTWISE_OPS
from .values import Index, Point

if TYPE_CHECKING:
    from .program import ProgramLowering

__all__ = ["LOWERINGS", "combine", "is_simple_commutative"]


def _insert(indices: tuple, axis: int, index: Index) -> tuple:
    return indices[:axis] + (index,) + indices[axis:]


def combine(ctx: "ProgramLowering", region: Block, lhs: list, rhs: list) -> list:
    """Inline ``region`` on scalars or equal-width vectors; returns the yielded values."""
    values = list(lhs) + list(rhs)
    width = max(vector_width(v) for v in values)    # an operand may be uniform (scalar)
    for arg, v in zip(region.args, values):
        ctx.scalars[arg] = splat(ctx.b, v, width) if width and not vector_width(v) else v
    for op in region.ops:
        if isinstance(op, YieldOp):
            return [ctx.scalars[v] for v in op.values]
        if isinstance(op, ConstantOp):
            ctx.scalars[op.result] = splat(ctx.b, ctx.constant(op.result.type, op.value),
                                           width)
        elif isinstance(op, ELEMENTWISE_OPS):
            vals = [ctx.scalars[v] for v in op.operands]
            if width:           # a value made from constants alone is still a scalar
                vals = [v if vector_width(v) else splat(ctx.b, v, width) for v in vals]
            ctx.scalars[op.result] = scalar_op(ctx, op, vals)
        else:
            raise ctx.unsupported(op)
    raise ctx.unsupported(region.ops[-1] if region.ops else YieldOp())


def is_simple_commutative(region: Block) -> bool:
    """``region`` is one commutative binary op of its two arguments (a tree may reorder it)."""
    ops = region.ops
    if len(ops) != 2 or not isinstance(ops[0], BinaryOp) or not isinstance(ops[1], YieldOp):
        return False
    first = ops[0]
    return first.is_commutative and len(region.args) == 2 and \
        {id(first.lhs), id(first.rhs)} == {id(a) for a in region.args} and \
        len(ops[1].values) == 1 and ops[1].values[0] is first.result


def _fold_into(ctx: "ProgramLowering", region: Block, slots: list, values: list,
               values_first: bool = False) -> None:
    acc = [ctx.load_slot(s) for s in slots]
    new = combine(ctx, region, values, acc) if values_first else \
        combine(ctx, region, acc, values)
    for s, v in zip(slots, new):
        ctx.b.store(v, s)


def lower_reduce(ctx: "ProgramLowering", op: ReduceOp) -> None:
    shape = op.srcs[0].type.shape
    axis = op.axis
    out_shape = shape[:axis] + shape[axis + 1:]
    outs = [ctx.new_buffer(out_shape, elem_type(s.type)) for s in op.srcs] if out_shape \
        else None
    if axis == len(shape) - 1:
        def row(p: Point) -> None:
            vals = _reduce_last_axis(ctx, op, p.indices, shape[-1])
            if outs is None:
                for r, v in zip(op.results, vals):
                    ctx.scalars[r] = v
            else:
                for buf, v in zip(outs, vals):
                    ctx.buffer_store(buf, p, v)
        if out_shape:
            ctx.for_each_point(out_shape, row, vector=False)
        else:
            ctx.memo = {}
            row(Point((), 0))
    else:
        def column(p: Point) -> None:
            at = lambda k: Point(_insert(p.indices, axis, Index(k)), p.width)  # noqa: E731
            slots = ctx.slots_holding([ctx.value_at(s, at(ir.Constant(I64, 0))) for s in op.srcs])
            if shape[axis] > 1:
                with ctx.loop(shape[axis] - 1) as k:
                    kk = ctx.b.add(k, ir.Constant(I64, 1))
                    _fold_into(ctx, op.combine, slots, [ctx.value_at(s, at(kk)) for s in op.srcs])
            for buf, s in zip(outs, slots):
                ctx.buffer_store(buf, p, ctx.load_slot(s))
        ctx.for_each_point(out_shape, column)
    if outs is not None:
        for r, buf in zip(op.results, outs):
            ctx.tiles[r] = buf


def _reduce_last_axis(ctx: "ProgramLowering", op: ReduceOp, outer: tuple,
                      n: int) -> list:
    b = ctx.b
    w = ctx.chunk_width(n) if is_simple_commutative(op.combine) else 0
    at = lambda j, ramp: Point(outer + (Index(j, ramp),), w if ramp else 0)  # noqa: E731
    zero = ir.Constant(I64, 0)
    step = w or 1
    slots = ctx.slots_holding([ctx.value_at(s, at(zero, w > 0)) for s in op.srcs])
    if n > step:
        with ctx.loop(n - step, step) as j:
            jj = b.add(j, ir.Constant(I64, step))
            _fold_into(ctx, op.combine, slots, [ctx.value_at(s, at(jj, w > 0)) for s in op.srcs])
    acc = [ctx.load_slot(s) for s in slots]
    while w > 1:
        h = w // 2
        lo = [b.shuffle_vector(v, ir.Constant(v.type, None),
                               ir.Constant(ir.VectorType(I32, h), list(range(h)))) for v in acc]
        hi = [b.shuffle_vector(v, ir.Constant(v.type, None),
                               ir.Constant(ir.VectorType(I32, h), list(range(h, w)))) for v in acc]
        acc = combine(ctx, op.combine, lo, hi)
        w = h
    return [b.extract_element(v, ir.Constant(I32, 0)) if vector_width(v) else v for v in acc]


def lower_scan(ctx: "ProgramLowering", op: ScanOp) -> None:
    b = ctx.b
    shape = op.srcs[0].type.shape
    axis, n = op.axis, shape[op.axis]
    outs = [ctx.new_buffer(shape, elem_type(s.type)) for s in op.srcs]
    rest = shape[:axis] + shape[axis + 1:]
    vector = axis != len(shape) - 1

    def line(p: Point) -> None:
        at = lambda k: Point(_insert(p.indices, axis, Index(k)), p.width)  # noqa: E731
        first = ir.Constant(I64, n - 1 if op.reverse else 0)
        vals = [ctx.value_at(s, at(first)) for s in op.srcs]
        for buf, v in zip(outs, vals):
            ctx.buffer_store(buf, at(first), v)
        slots = ctx.slots_holding(vals)
        if n > 1:
            with ctx.loop(n - 1) as k:
                kk = b.sub(ir.Constant(I64, n - 2), k) if op.reverse else \
                    b.add(k, ir.Constant(I64, 1))
                _fold_into(ctx, op.combine, slots, [ctx.value_at(s, at(kk)) for s in op.srcs])
                for buf, s in zip(outs, slots):
                    ctx.buffer_store(buf, at(kk), ctx.load_slot(s))
    ctx.for_each_point(rest, line, vector=vector)
    for r, buf in zip(op.results, outs):
        ctx.tiles[r] = buf


LOWERINGS = {ReduceOp: lower_reduce, ScanOp: lower_scan}
