"""Evaluating a lazy tile at a point, and elementwise ops on scalars or vectors.

See ``values`` for the vocabulary: a lazy tile's op is emitted inside the loop of the op
that consumes it, one chunk at a time; integer ``ramp + uniform`` stays a ramp, so a pointer
``base + arange`` is recognised as contiguous (one vector load).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from llvmlite import ir

from anytile.codegen.llvm.types import I32, I64, splat
from anytile.errors import CompilationError
from anytile.ir import (AddPtrOp, ArangeOp, BinaryOp, BitcastOp, BroadcastOp, CastOp,
                        CompareOp, ConstantOp, ExpandDimsOp, FmaOp, HintOp, LoadOp, Op, PermuteOp,
                        ScalarType, SelectOp, SplatOp, UMulHiOp, UnaryOp, elem_type)

from .access import eval_load
from .values import Chunk, Index, Lazy, Point

if TYPE_CHECKING:
    from .program import ProgramLowering

__all__ = ["eval_lazy", "scalar_op"]


def eval_lazy(ctx: "ProgramLowering", ref: Lazy, point: Point) -> Chunk:
    """The lazy tile ``ref`` at ``point``."""
    op = ref.op
    b = ctx.b
    if isinstance(op, ConstantOp):
        return Chunk.uniform(ctx.constant(elem_type(op.result.type), op.value))
    if isinstance(op, SplatOp):
        return Chunk.uniform(ctx.scalars[op.src])
    if isinstance(op, ArangeOp):
        idx = point.indices[0]
        base = b.add(b.trunc(idx.base, I32), ir.Constant(I32, op.start))
        return Chunk.ramp(base) if idx.ramp else Chunk.uniform(base)
    if isinstance(op, HintOp):
        return ctx.chunk(op.src, point)
    if isinstance(op, (BroadcastOp, ExpandDimsOp, PermuteOp)):
        return ctx.chunk(op.src, source_point(op, point))
    if isinstance(op, LoadOp):
        return eval_load(ctx, op, point)
    return _eval_elementwise(ctx, op, point)


def source_point(op: Op, point: Point) -> Point:
    """The point of ``op.src`` that ``point`` of a broadcast/expand_dims/permute reads."""
    idx = point.indices
    if isinstance(op, BroadcastOp):
        src_shape = op.src.type.shape
        zero = Index(ir.Constant(I64, 0))
        new = tuple(zero if s == 1 and r != 1 else i
                    for s, r, i in zip(src_shape, op.result.type.shape, idx))
    elif isinstance(op, ExpandDimsOp):
        new = idx[:op.axis] + idx[op.axis + 1:]
    else:
        src_idx: list = [None] * len(idx)
        for i, d in enumerate(op.order):
            src_idx[d] = idx[i]
        new = tuple(src_idx)
    return Point(new, point.width)


def _eval_elementwise(ctx: "ProgramLowering", op: Op, point: Point) -> Chunk:
    chunks = [ctx.chunk(v, point) for v in op.operands]
    if all(c.kind == "uniform" for c in chunks):
        return Chunk.uniform(scalar_op(ctx, op, [c.value for c in chunks], point))
    ramp = _ramp_rule(ctx, op, chunks)
    if ramp is not None:
        return ramp
    vals = [ctx.vec(c, elem_type(v.type), point.width) for c, v in zip(chunks, op.operands)]
    return Chunk.vector(scalar_op(ctx, op, vals, point))


def _ramp_rule(ctx: "ProgramLowering", op: Op, chunks: list[Chunk]) -> Optional[Chunk]:
    """Keep ``ramp + uniform`` a ramp, so contiguous pointers stay recognisable."""
    kinds = [c.kind for c in chunks]
    if kinds.count("ramp") != 1 or any(k == "vector" for k in kinds):
        return None
    if isinstance(op, AddPtrOp):
        ptr, off = chunks
        return Chunk.ramp(scalar_op(ctx, op, [ptr.value, off.value]))
    if isinstance(op, BinaryOp) and op.kind in ("add", "sub") and (
            op.kind == "add" or kinds[0] == "ramp"):
        return Chunk.ramp(scalar_op(ctx, op, [c.value for c in chunks]))
    if isinstance(op, CastOp):
        src, dst = elem_type(op.src.type), elem_type(op.result.type)
        if isinstance(src, ScalarType) and isinstance(dst, ScalarType) and src.is_int and \
                dst.is_int and not src.is_bool and dst.bits >= src.bits:
            return Chunk.ramp(scalar_op(ctx, op, [chunks[0].value]))
    return None


def scalar_op(ctx: "ProgramLowering", op: Op, vals: list[ir.Value],
              point: Optional[Point] = None) -> ir.Value:
    """An elementwise op on scalars or on equal-width vectors (at ``point`` of its tile,
    when known, which checked mode's reports number lanes by)."""
    try:
        return _scalar_op(ctx, op, vals, point)
    except NotImplementedError as exc:   # lazy ops are emitted inside their consumer
        raise CompilationError(f"the cpu backend cannot lower op '{op.NAME}': {exc}",
                               op.loc) from None


def _scalar_op(ctx: "ProgramLowering", op: Op, vals: list[ir.Value],
               point: Optional[Point]) -> ir.Value:
    ew, b = ctx.ew, ctx.b
    if isinstance(op, BinaryOp):
        if ctx.checks is not None and op.kind in ("div", "rem") and \
                not elem_type(op.lhs.type).is_float:
            ctx.checks.divisor(op, vals[1], point)
        return ew.binary(op.kind, elem_type(op.lhs.type), *vals)
    if isinstance(op, UnaryOp):
        return ew.unary(op.kind, elem_type(op.src.type), *vals)
    if isinstance(op, CompareOp):
        return ew.compare(op.pred, elem_type(op.lhs.type), *vals)
    if isinstance(op, SelectOp):
        return b.select(*vals)
    if isinstance(op, CastOp):
        return ew.cast(elem_type(op.src.type), elem_type(op.result.type), vals[0])
    if isinstance(op, BitcastOp):
        return ew.bitcast(elem_type(op.src.type), elem_type(op.result.type), vals[0])
    if isinstance(op, FmaOp):
        return ew.fma(elem_type(op.a.type), *vals)
    if isinstance(op, UMulHiOp):
        return ew.umulhi(elem_type(op.lhs.type), *vals)
    if isinstance(op, AddPtrOp):
        ptr, off = vals
        off_elem = elem_type(op.offset.type)
        wide = off.type if off.type == I64 or getattr(off.type, "element", None) == I64 \
            else (ir.VectorType(I64, off.type.count) if isinstance(off.type, ir.VectorType)
                  else I64)
        if wide != off.type:
            off = b.sext(off, wide) if off_elem.is_signed else b.zext(off, wide)
        if isinstance(off.type, ir.VectorType) and not isinstance(ptr.type, ir.VectorType):
            ptr = splat(b, ptr, off.type.count)
        pointee = elem_type(op.ptr.type).pointee
        return b.gep(ptr, [off], source_etype=ctx.stype(pointee))
    if isinstance(op, HintOp):
        return vals[0]
    raise ctx.unsupported(op)
