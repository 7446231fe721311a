"""Constants, elementwise and shape ops, program ids, reshape.

A tile result that the fusion plan makes lazy never reaches these functions (the context
records it and ``evaluate`` emits it at each use); the others are computed into a buffer
here.  Scalars are one LLVM value each.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from anytile.errors import CompilationError
from anytile.ir import (CallOp, ConstantOp, NumProgramsOp, Op, ProgramIdOp, ReshapeOp,
                        TileType)

from .evaluate import scalar_op
from .plan import ELEMENTWISE_OPS, SHAPE_OPS
from .values import TileBuffer

if TYPE_CHECKING:
    from .program import ProgramLowering

__all__ = ["LOWERINGS"]


def lower_constant(ctx: "ProgramLowering", op: ConstantOp) -> None:
    if isinstance(op.result.type, TileType):
        ctx.materialize(op)
    else:
        ctx.scalars[op.result] = ctx.constant(op.result.type, op.value)


def lower_elementwise(ctx: "ProgramLowering", op: Op) -> None:
    """An elementwise or shape op: into a buffer (tiles) or one value (scalars)."""
    if len(op.results) == 1 and isinstance(op.result.type, TileType):
        ctx.materialize(op)
    else:
        ctx.scalars[op.result] = scalar_op(ctx, op, [ctx.scalars[v] for v in op.operands])


def lower_program_id(ctx: "ProgramLowering", op: ProgramIdOp) -> None:
    ctx.scalars[op.result] = ctx.program_ids[op.axis]


def lower_num_programs(ctx: "ProgramLowering", op: NumProgramsOp) -> None:
    ctx.scalars[op.result] = ctx.grid[op.axis]


def lower_reshape(ctx: "ProgramLowering", op: ReshapeOp) -> None:
    src = ctx.buffer_of(op.src)
    ctx.tiles[op.result] = TileBuffer(src.ptr, op.result.type.shape, src.elem)


def lower_call(ctx: "ProgramLowering", op: CallOp) -> None:
    raise CompilationError(f"call to '{op.callee}' was not inlined before code generation "
                           "(the cpu backend needs the inliner pass to have run)", op.loc)


LOWERINGS = {
    **{cls: lower_elementwise for cls in ELEMENTWISE_OPS + SHAPE_OPS},
    ConstantOp: lower_constant, ProgramIdOp: lower_program_id,
    NumProgramsOp: lower_num_programs, ReshapeOp: lower_reshape, CallOp: lower_call,
}
