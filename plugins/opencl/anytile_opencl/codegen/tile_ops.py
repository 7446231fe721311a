"""Elementwise, index and shape ops: one function per op computing a chunk of its result
(``CHUNKS``), and how a value op is written where it stands (``emit_value``): lazy tiles are
left to their uses, views share their source's array, broadcasts and permutes of stored tiles
move through scratch memory with several work-items, every other tile is stored.

The arithmetic itself is ``Arith``'s (``arith.py``); shape ops read their source at the
point ``source_point`` maps their own point to.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from anytile.errors import CompilationError
from anytile.ir import (AddPtrOp, ArangeOp, BinaryOp, BitcastOp, BroadcastOp, CallOp, CastOp,
                        CompareOp, ConstantOp, ExpandDimsOp, FmaOp, HintOp, LoadOp,
                        NumProgramsOp, Op, PermuteOp, ProgramIdOp, ReshapeOp, ScalarType,
                        SelectOp, SplatOp, TileType, UMulHiOp, UnaryOp, elem_type, i32)

from . import collective
from .chunk import Chunk, Point, scalar_point, uniform
from .ctypes import literal
from .plan import CHEAP, FUSED, VIEW, VIEWS

if TYPE_CHECKING:
    from .context import EmitContext

__all__ = ["EMITTERS", "CHUNKS", "emit_value", "source_point"]


# -- writing a value op where it stands ------------------------------------------------------
def emit_value(ctx: "EmitContext", op: Op) -> None:
    """A scalar is computed now; a tile as ``plan`` says (see the module docstring)."""
    value = op.result
    if not isinstance(value.type, TileType):
        c = ctx.eval_op(op, scalar_point())
        ctx.scalars[value] = c.expr
        ctx.divisors[value] = c.align
        return
    kind = ctx.plan.kind(op)
    if kind in (CHEAP, FUSED):
        return
    if kind == VIEW:
        source = ctx.stored.get(op.src) if isinstance(op, VIEWS) else None
        if source is not None:
            ctx.stored[value] = source
        return
    if isinstance(op, (BroadcastOp, PermuteOp)):
        collective.exchange(ctx, value)
        return
    collective.store_with_reductions(ctx, value, ctx.following)


def emit_call(ctx: "EmitContext", op: CallOp) -> None:
    raise CompilationError(f"the call to '{op.callee}' was not inlined; the opencl "
                           f"backend runs kernels whose jit functions are inlined", op.loc)


# -- elementwise ops ---------------------------------------------------------------------------
def chunk_binary(ctx: "EmitContext", op: BinaryOp, point: Point) -> Chunk:
    return ctx.arith.binary(op.kind, ctx.chunk(op.lhs, point), ctx.chunk(op.rhs, point), op.loc)


def chunk_compare(ctx: "EmitContext", op: CompareOp, point: Point) -> Chunk:
    return ctx.arith.compare(op.pred, ctx.chunk(op.lhs, point), ctx.chunk(op.rhs, point))


def chunk_unary(ctx: "EmitContext", op: UnaryOp, point: Point) -> Chunk:
    return ctx.arith.unary(op.kind, ctx.chunk(op.src, point), op.loc)


def chunk_select(ctx: "EmitContext", op: SelectOp, point: Point) -> Chunk:
    return ctx.arith.select(ctx.chunk(op.cond, point), ctx.chunk(op.true_value, point),
                            ctx.chunk(op.false_value, point))


def chunk_cast(ctx: "EmitContext", op: CastOp, point: Point) -> Chunk:
    return ctx.arith.cast(ctx.chunk(op.src, point), elem_type(op.result.type))


def chunk_bitcast(ctx: "EmitContext", op: BitcastOp, point: Point) -> Chunk:
    return ctx.arith.bitcast(ctx.chunk(op.src, point), elem_type(op.result.type))


def chunk_fma(ctx: "EmitContext", op: FmaOp, point: Point) -> Chunk:
    return ctx.arith.fma(ctx.chunk(op.a, point), ctx.chunk(op.b, point), ctx.chunk(op.c, point))


def chunk_umulhi(ctx: "EmitContext", op: UMulHiOp, point: Point) -> Chunk:
    return ctx.arith.umulhi(ctx.chunk(op.lhs, point), ctx.chunk(op.rhs, point))


def chunk_addptr(ctx: "EmitContext", op: AddPtrOp, point: Point) -> Chunk:
    return ctx.arith.addptr(ctx.chunk(op.ptr, point), ctx.chunk(op.offset, point))


# -- constants, ids and index ops ------------------------------------------------------------
def chunk_constant(ctx: "EmitContext", op: ConstantOp, point: Point) -> Chunk:
    t = op.result.type
    elem = t.elem if isinstance(t, TileType) else t
    const = int(op.value) if isinstance(elem, ScalarType) and elem.is_int else None
    divisor = 1 if not const else min(const & -const, 1 << 30)
    return uniform(literal(op.value, elem), elem, point.lanes, const=const,
                   align=(1 << 30) if const == 0 else divisor)


def chunk_program_id(ctx: "EmitContext", op: ProgramIdOp, point: Point) -> Chunk:
    return uniform(f"pid{op.axis}", i32, point.lanes)


def chunk_num_programs(ctx: "EmitContext", op: NumProgramsOp, point: Point) -> Chunk:
    return uniform(("at_gx", "at_gy", "at_gz")[op.axis], i32, point.lanes)


def chunk_splat(ctx: "EmitContext", op: SplatOp, point: Point) -> Chunk:
    src = ctx.chunk(op.src, point)
    return uniform(src.expr, src.type, point.lanes, src.align, src.const)


def chunk_arange(ctx: "EmitContext", op: ArangeOp, point: Point) -> Chunk:
    index = point.dims()[0]
    if op.start == 0:
        return index
    start = uniform(str(op.start), i32, point.lanes, const=op.start)
    return ctx.arith.binary("add", index, start)


def chunk_hint(ctx: "EmitContext", op: HintOp, point: Point) -> Chunk:
    return ctx.chunk(op.src, point)


# -- shape ops ---------------------------------------------------------------------------------
def chunk_shape(ctx: "EmitContext", op: Op, point: Point) -> Chunk:
    """``broadcast``, ``expand_dims``, ``reshape``, ``permute``: the source at its point."""
    return ctx.chunk(op.src, source_point(ctx, op, point))


def source_point(ctx: "EmitContext", op: Op, point: Point) -> Point:
    """The point of a shape op's source that ``point`` of its result reads."""
    src_shape = tuple(op.src.type.shape) if isinstance(op.src.type, TileType) else ()

    def make() -> Point:
        if isinstance(op, (ExpandDimsOp, ReshapeOp)):
            return Point(point.lanes, src_shape, point.flat(), None, point.natural,
                         index_math=ctx.index_math)
        dims = point.dims()
        if isinstance(op, BroadcastOp):
            zero = uniform("0", i32, point.lanes, align=1 << 30, const=0)
            new = tuple(zero if s == 1 and d != 1 else dims[i]
                        for i, (s, d) in enumerate(zip(src_shape, point.shape)))
            natural = point.natural if src_shape == tuple(point.shape) else None
        else:
            placed: list = [None] * len(dims)
            for i, src_dim in enumerate(op.order):
                placed[src_dim] = dims[i]
            new, natural = tuple(placed), None
        return Point(point.lanes, src_shape, None, new, natural, index_math=ctx.index_math)
    return point.derive(id(op), make)


CHUNKS = {
    BinaryOp: chunk_binary, CompareOp: chunk_compare, UnaryOp: chunk_unary,
    SelectOp: chunk_select, CastOp: chunk_cast, BitcastOp: chunk_bitcast, FmaOp: chunk_fma,
    UMulHiOp: chunk_umulhi, AddPtrOp: chunk_addptr,
    ConstantOp: chunk_constant, ProgramIdOp: chunk_program_id,
    NumProgramsOp: chunk_num_programs, SplatOp: chunk_splat, ArangeOp: chunk_arange,
    HintOp: chunk_hint, BroadcastOp: chunk_shape, ExpandDimsOp: chunk_shape,
    ReshapeOp: chunk_shape, PermuteOp: chunk_shape,
}

#: every op with a chunk function (loads too) is a value op, written by ``emit_value``
EMITTERS = {cls: emit_value for cls in (*CHUNKS, LoadOp)}
EMITTERS[CallOp] = emit_call
