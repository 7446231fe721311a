"""``tl.dot``: ``acc + a @ b`` with every output chunk's products summed in the accumulator's
type (f32 for 16-bit floats, i32 for i8: products exact, sums with ``fma``).

``a`` and ``b`` are staged (``collective``) and each work-item computes its own chunks of the
result: for a chunk of ``lanes`` consecutive columns of one row, ``a[i, kk]`` times the vector
``b[kk, j..j+lanes]``, for every ``kk``.  When both operands do not fit the device's local
memory at once (a GPU's 48 KiB), ``K`` is cut into slices that do: each slice of ``a``'s columns
and ``b``'s rows is staged in turn and the partial sums stay in a private array.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anytile.errors import CompilationError
from anytile.ir import DotOp, TileType, f32, f64, i32

from .chunk import Chunk, Point, ramp, uniform, vector
from .collective import (claim_scratch, lane_by_lane, local_barrier, owners_only, scratch,
                         stage_all, write_flat)
from .ctypes import size_of, vector_name
from .values import chunk_loop, declare_stored, read_flat, read_stored, spill, store_tile

if TYPE_CHECKING:
    from .context import EmitContext

__all__ = ["EMITTERS", "emit_dot"]


def emit_dot(ctx: "EmitContext", op: DotOp) -> None:
    a_t, b_t, out = op.a.type, op.b.type, op.result.type
    m, k = a_t.shape
    n = b_t.shape[1]
    compute = out.elem if out.elem.is_int or out.elem == f64 else f32
    slice_k = _k_slice(ctx, op, m, n, k)
    if slice_k == k:
        (a_base, a_space), (b_base, b_space) = stage_all(ctx, [op.a, op.b])
        operands = ((a_base, a_space, a_t.elem, k), (b_base, b_space, b_t.elem))

        def chunk_of(point: Point) -> Chunk:
            acc = ctx.arith.cast(ctx.chunk(op.acc, point), compute)
            return ctx.arith.cast(_products(ctx, point, acc, compute, k, n, operands),
                                   out.elem)
        store_tile(ctx, op.result, chunk_of)
        return
    partial = declare_stored(ctx, TileType(out.shape, compute, out.layout), "acc")
    with chunk_loop(ctx, out.layout, out.shape) as point:
        acc = ctx.arith.cast(ctx.chunk(op.acc, point), compute)
        ctx.w.line(f"{partial.name}[{point.natural[1]}] = {acc.as_vector()};")
    with ctx.w.block(f"for (int k0 = 0; k0 < {k}; k0 += {slice_k})"):
        ctx.scratch_in_use = True                 # the previous slice's readers
        a_bytes = -(-m * slice_k * size_of(a_t.elem) // 16) * 16
        claim_scratch(ctx, a_bytes + slice_k * n * size_of(b_t.elem))
        a_base, b_base = scratch(0, a_t.elem), scratch(a_bytes, b_t.elem)
        _stage_columns(ctx, op.a, a_base, slice_k)
        _stage_rows(ctx, op.b, b_base, slice_k)
        local_barrier(ctx)
        operands = ((a_base, "__local", a_t.elem, slice_k), (b_base, "__local", b_t.elem))
        with chunk_loop(ctx, out.layout, out.shape) as point:
            acc = read_stored(ctx, partial, point)
            total = _products(ctx, point, acc, compute, slice_k, n, operands)
            ctx.w.line(f"{partial.name}[{point.natural[1]}] = {total.as_vector()};")
    store_tile(ctx, op.result,
                    lambda p: ctx.arith.cast(read_stored(ctx, partial, p), out.elem))


def _k_slice(ctx: "EmitContext", op: DotOp, m: int, n: int, k: int) -> int:
    """The largest power-of-2 slice of ``K`` whose operands fit local memory at once."""
    if ctx.work_items == 1:
        return k
    sa, sb = size_of(op.a.type.elem), size_of(op.b.type.elem)
    budget = ctx.arch.local_bytes
    slice_k = k
    while slice_k >= 1:
        if -(-m * slice_k * sa // 16) * 16 + slice_k * n * sb <= budget:
            return slice_k
        slice_k //= 2
    raise CompilationError(f"tl.dot of {m}x{k} by {k}x{n}: even one column of a and row of "
                           f"b exceed the device's {budget} bytes of local memory", op.loc)


def _stage_columns(ctx: "EmitContext", value: Any, base: str, slice_k: int) -> None:
    """Columns ``k0 .. k0+slice_k`` of the ``M x K`` tile ``value`` to ``base`` (rows of
    ``slice_k``)."""
    t = value.type
    k = t.shape[1]
    with owners_only(ctx, t.layout):
        with chunk_loop(ctx, t.layout, t.shape) as point:
            c = ctx.chunk(value, point)
            lanes = c.lanes
            e = point.flat().expr
            column = ctx.arith.let(f"({e}) % {k} - k0", i32, 1, "kc")
            target = f"({e}) / {k} * {slice_k} + {column}"
            if slice_k % lanes == 0:           # a chunk lies in the slice or outside it
                with ctx.w.block(f"if ({column} >= 0 && {column} < {slice_k})"):
                    write_flat(ctx, base, ramp(target, 1, i32, lanes, lanes) if lanes > 1
                                     else uniform(target, i32, 1), c)
            else:
                lane = spill(ctx, c)
                with ctx.w.block(f"for (int j = 0; j < {lanes}; j++)"):
                    with ctx.w.block(f"if ({column} + j >= 0 && {column} + j < {slice_k})"):
                        ctx.w.line(f"{base}[{target} + j] = {lane('j')};")


def _stage_rows(ctx: "EmitContext", value: Any, base: str, slice_k: int) -> None:
    """Rows ``k0 .. k0+slice_k`` of the ``K x N`` tile ``value`` to ``base``."""
    t = value.type
    n = t.shape[1]
    with owners_only(ctx, t.layout):
        with chunk_loop(ctx, t.layout, t.shape) as point:
            flat = point.flat()
            start = ctx.arith.let(f"({flat.expr}) - k0 * {n}", i32, 1, "kr")
            with ctx.w.block(f"if ({start} >= 0 && {start} < {slice_k * n})"):
                index = ramp(start, 1, i32, flat.lanes, flat.lanes) if flat.lanes > 1 else \
                    uniform(start, i32, 1)
                write_flat(ctx, base, index, ctx.chunk(value, point))


def _products(ctx: "EmitContext", point: Point, acc: Chunk, compute: Any, k: int, n: int,
              operands: tuple) -> Chunk:
    """``acc`` plus the products of this chunk's row of ``a`` and columns of ``b``."""
    flat = point.flat()
    if n % point.lanes == 0:
        return _dot_chunk(ctx, flat, acc, compute, k, n, *operands)
    lane = spill(ctx, acc) if not acc.is_uniform else None

    def one(f: Chunk) -> list:
        mine = uniform(ctx.arith.let(lane("lane"), compute, 1), compute, 1) if lane else \
            uniform(acc.expr, compute, 1)
        return [_dot_chunk(ctx, f, mine, compute, k, n, *operands)]
    return lane_by_lane(ctx, flat, one, [compute])[0]


def _dot_chunk(ctx: "EmitContext", flat: Chunk, acc: Chunk, compute: Any, k: int, n: int,
               a: tuple, b: tuple) -> Chunk:
    """``acc + a[i, :k] @ b[:k, j..j+lanes]`` for a chunk within one row of the output
    (``a`` is ``(pointer, space, elem, row stride)``, ``b`` ``(pointer, space, elem)``)."""
    lanes = flat.lanes
    row = ctx.arith.let(f"({flat.expr}) / {n}", i32, 1, "row")
    col = ctx.arith.let(f"({flat.expr}) % {n}", i32, 1, "col")
    total = ctx.w.fresh("dot")
    ctx.w.line(f"{vector_name(compute, lanes)} {total} = {acc.as_vector()};")
    with ctx.w.block(f"for (int kk = 0; kk < {k}; kk++)"):
        index_a = uniform(ctx.arith.let(f"{row} * {a[3]} + kk", i32, 1, "ia"), i32, lanes)
        index_b = ramp(ctx.arith.let(f"kk * {n} + {col}", i32, 1, "ib"), 1, i32, lanes, lanes)
        x = ctx.arith.cast(read_flat(ctx, a[0], a[2], index_a, a[1]), compute)
        y = ctx.arith.cast(read_flat(ctx, b[0], b[2], index_b, b[1]), compute)
        current = vector(total, compute, lanes) if lanes > 1 else uniform(total, compute, 1)
        if compute.is_int:
            merged = ctx.arith.binary("add", current, ctx.arith.binary("mul", x, y))
        else:
            merged = ctx.arith.fma(x, y, current)
        ctx.w.line(f"{total} = {merged.as_vector()};")
    return vector(total, compute, lanes) if lanes > 1 else uniform(total, compute, 1)


EMITTERS = {DotOp: emit_dot}
