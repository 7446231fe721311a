"""Loads, stores and barriers.

A tile load that is not lazy is computed into a buffer; a scalar load is one guarded load.
A store walks its tile in SIMD chunks (``access.emit_store``), or streams past the caches
when it qualifies (``streaming``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from anytile.ir import BarrierOp, LoadOp, StoreOp, TileType, elem_type, shape_of

from .access import check_access, emit_store, guarded_scalar_load
from .streaming import lower_streaming_store
from .values import Point

if TYPE_CHECKING:
    from .program import ProgramLowering

__all__ = ["LOWERINGS"]


def lower_load(ctx: "ProgramLowering", op: LoadOp) -> None:
    if isinstance(op.result.type, TileType):
        ctx.materialize(op)
        return
    elem = op.result.type
    mask = ctx.scalars[op.mask] if op.mask is not None else None
    if ctx.checks is not None:
        ctx.checks.access(op, ctx.scalars[op.ptr], mask, elem.nbytes, Point((), 0))
    raw = guarded_scalar_load(ctx, ctx.scalars[op.ptr], ctx.stype(elem), elem.nbytes, mask)
    value = ctx.ew.from_storage(elem, raw)
    if mask is not None and op.other is not None:
        value = ctx.b.select(mask, value, ctx.scalars[op.other])
    ctx.scalars[op.result] = value


def lower_store(ctx: "ProgramLowering", op: StoreOp) -> None:
    elem = elem_type(op.value.type)
    ptr_elem = elem_type(op.ptr.type)
    mask_elem = elem_type(op.mask.type) if op.mask is not None else None

    def body(p: Point) -> None:
        m = ctx.chunk(op.mask, p) if op.mask is not None else None
        if ctx.checks is not None:
            check_access(ctx, op, ctx.chunk(op.ptr, p), m, elem.nbytes, p)
        emit_store(ctx, elem, ctx.chunk(op.ptr, p), ctx.chunk(op.value, p), m, ptr_elem,
                   mask_elem, p.width)

    def ordinary() -> None:
        ctx.for_each_point(shape_of(op.ptr.type), body)
    if not lower_streaming_store(ctx, op, ordinary):
        ordinary()


def lower_barrier(ctx: "ProgramLowering", op: BarrierOp) -> None:
    ctx.b.fence("seq_cst")


LOWERINGS = {LoadOp: lower_load, StoreOp: lower_store, BarrierOp: lower_barrier}
