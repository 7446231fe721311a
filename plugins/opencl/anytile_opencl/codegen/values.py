"""Tiles kept in private arrays while a kernel is written, and the index arithmetic of chunks.

* scalars are C variables, the same in every work-item (``ctx.scalars``);
* stored tiles are private arrays of chunks in their ``BlockedLayout`` (``ctx.stored``);
* lazy tiles (cheap, fused, views; see ``plan``) are computed at each point they are read
  (``tile_ops``, ``memory``).

A stored tile is read at its own chunks (``natural`` points).  With one work-item per
program the array also is the whole tile in row-major order, so broadcasts and permutes read
it at any index; with several, elements move between work-items through ``__local`` scratch
memory (``collective``).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

from anytile.errors import CompilationError
from anytile.ir import TileType, Value, i32

from ..layout import BlockedLayout
from .chunk import Chunk, Point, ramp, uniform, vector
from .ctypes import scalar_name, size_of, vector_name

if TYPE_CHECKING:
    from .context import EmitContext

__all__ = ["Stored", "read_stored", "read_flat", "spill", "own", "chunk_loop", "store_tile",
           "declare_stored", "index_math"]


@dataclass(frozen=True)
class Stored:
    """A tile kept in the private array ``name`` (``layout.chunks`` vectors)."""

    name: str
    layout: BlockedLayout
    elem: Any

    def flat(self) -> str:
        """The array as a pointer to its elements (the whole tile when ``T = 1``)."""
        return f"((__private {scalar_name(self.elem)}*){self.name})"


def _log2(n: int) -> int:
    return n.bit_length() - 1


# -- reading kept tiles ----------------------------------------------------------------------
def read_stored(ctx: "EmitContext", stored: Stored, point: Point) -> Chunk:
    layout = stored.layout
    numel = layout.vector * layout.owners * layout.chunks
    if point.natural is not None and point.natural[0] == numel:
        expr = f"{stored.name}[{point.natural[1]}]"
        return vector(expr, stored.elem, point.lanes) if point.lanes > 1 else \
            uniform(expr, stored.elem, 1)
    if ctx.work_items != 1:
        raise CompilationError("internal: a tile read across work-items without scratch")
    return read_flat(ctx, stored.flat(), stored.elem, point.flat(), "__private")


def read_flat(ctx: "EmitContext", base: str, elem: Any, index: Chunk, space: str) -> Chunk:
    """Elements ``index`` of the array at ``base`` (private or local memory)."""
    lanes = index.lanes
    pointer = f"(({space} {scalar_name(elem)}*){base})"
    if index.is_uniform:
        return uniform(ctx.arith.let(f"{pointer}[{index.expr}]", elem, 1), elem, lanes)
    if index.is_ramp and index.step == 1:
        return vector(ctx.arith.let(f"vload{lanes}(0, {pointer} + {index.expr})", elem, lanes),
                      elem, lanes)
    out = ctx.w.fresh("g")
    idx = spill(ctx, index)
    ctx.w.line(f"{scalar_name(elem)} {out}[{lanes}];")
    with ctx.w.block(f"for (int j = 0; j < {lanes}; j++)"):
        ctx.w.line(f"{out}[j] = {pointer}[{idx('j')}];")
    return vector(ctx.arith.let(f"vload{lanes}(0, {out})", elem, lanes), elem, lanes)


def spill(ctx: "EmitContext", c: Chunk) -> Callable[[str], str]:
    """A function giving lane ``j`` (a C expression) of ``c``: vectors are stored to a
    private array first."""
    if c.kind != "vector":
        return c.lane
    name = ctx.w.fresh("l")
    ctx.w.line(f"{scalar_name(c.type)} {name}[{c.lanes}];")
    ctx.w.line(f"vstore{c.lanes}({c.expr}, 0, {name});")
    return lambda j: f"{name}[{j}]"


# -- chunk loops and stored tiles ------------------------------------------------------------
def own(ctx: "EmitContext", layout: BlockedLayout) -> str:
    """This work-item's chunk column in ``layout`` (``lid % owners``)."""
    if layout.owners == 1:
        return "0"
    if layout.owners == ctx.work_items:
        return "lid"
    ctx.own_masks.add(layout.owners)
    return f"own{layout.owners}"


@contextmanager
def chunk_loop(ctx: "EmitContext", layout: BlockedLayout, shape: tuple) -> Iterator[Point]:
    """A loop over this work-item's chunks of a tile in ``layout``; yields the point."""
    v, owners, count = layout.vector, layout.owners, layout.chunks
    mine = own(ctx, layout)
    numel = v * owners * count
    if count == 1:
        with ctx.w.block(""):
            yield _natural_point(ctx, layout, shape, "0", mine, numel)
        return
    k = ctx.w.fresh("k")
    if ctx.work_items > 1 and count <= 16:
        ctx.w.line("#pragma unroll")
    with ctx.w.block(f"for (int {k} = 0; {k} < {count}; {k}++)"):
        yield _natural_point(ctx, layout, shape, k, mine, numel)


def _natural_point(ctx: "EmitContext", layout: BlockedLayout, shape: tuple, k: str, mine: str,
                   numel: int) -> Point:
    v = layout.vector
    if k == "0" and mine == "0":
        flat = uniform("0", i32, v, align=1 << 30, const=0) if v == 1 else \
            ramp("0", 1, i32, v, align=1 << 30)
    else:
        expr = ctx.arith.let(f"(({k}) * {layout.owners} + {mine}) * {v}", i32, 1, "e")
        flat = ramp(expr, 1, i32, v, align=v) if v > 1 else uniform(expr, i32, 1, align=1)
    return Point(v, tuple(shape), flat, None, (numel, k), index_math=ctx.index_math)


def store_tile(ctx: "EmitContext", value: Value, compute: Callable[[Point], Chunk],
               also: Any = None) -> Stored:
    """Declare ``value``'s private array and fill it chunk by chunk with ``compute(point)``
    (then ``also(point)`` in the same loop)."""
    t = value.type
    stored = declare_stored(ctx, t)
    with chunk_loop(ctx, t.layout, t.shape) as point:
        c = compute(point)
        ctx.w.line(f"{stored.name}[{point.natural[1]}] = {c.as_vector()};")
        if also is not None:
            also(point)
    ctx.stored[value] = stored
    return stored


def declare_stored(ctx: "EmitContext", t: TileType, prefix: str = "r") -> Stored:
    nbytes = t.layout.chunks * t.layout.vector * size_of(t.elem)
    ctx.private_bytes += nbytes
    if ctx.largest_private is None or nbytes > ctx.largest_private[0]:
        loc = ctx.current_loc
        ctx.largest_private = [nbytes, t.numel, str(t.elem), getattr(loc, "file", None),
                               getattr(loc, "line", None)]
    name = ctx.w.fresh(prefix)
    ctx.w.line(f"{vector_name(t.elem, t.layout.vector)} {name}[{t.layout.chunks}];")
    return Stored(name, t.layout, t.elem)


# -- index arithmetic (non-negative i32 indices inside one tile) ------------------------------
def index_math(ctx: "EmitContext", point: Point) -> None:
    """Fill in the flat index from the dims or the dims from the flat index."""
    shape = point.shape
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    if point.flat_chunk is None:
        flat = uniform("0", i32, point.lanes, align=1 << 30, const=0)
        for d, c in enumerate(point.dim_chunks):
            flat = _index_add(ctx, flat, _index_scale(ctx, c, strides[d]))
        point.flat_chunk = flat
    else:
        flat = point.flat_chunk
        point.dim_chunks = tuple(
            _index_mod(ctx, _index_div(ctx, flat, strides[d]), shape[d]) if shape[d] > 1
            else uniform("0", i32, point.lanes, align=1 << 30, const=0)
            for d in range(len(shape)))


def _index_let(ctx: "EmitContext", expr: str, lanes: int) -> str:
    return ctx.arith.let(expr, i32, lanes, "x")


def _fits(c: Chunk, block: int) -> bool:
    """Whether every lane of ramp ``c`` lies in one aligned block of ``block`` indices."""
    return (c.lanes - 1) * c.step < min(c.align, block) and c.step > 0


def _index_div(ctx: "EmitContext", c: Chunk, s: int) -> Chunk:
    if s == 1:
        return c
    shift = _log2(s)
    if c.is_uniform or (c.is_ramp and _fits(c, s)):
        if c.const is not None:
            return uniform(str(c.const >> shift), i32, c.lanes, max(1, c.align >> shift),
                           c.const >> shift)
        return uniform(_index_let(ctx, f"{c.expr} >> {shift}", 1), i32, c.lanes,
                       max(1, c.align >> shift))
    return vector(_index_let(ctx, f"{c.as_vector()} >> {shift}", c.lanes), i32, c.lanes)


def _index_mod(ctx: "EmitContext", c: Chunk, s: int) -> Chunk:
    mask = s - 1
    if c.is_uniform:
        if c.const is not None:
            return uniform(str(c.const & mask), i32, c.lanes, 1 << 30, c.const & mask)
        return uniform(_index_let(ctx, f"{c.expr} & {mask}", 1), i32, c.lanes, min(c.align, s))
    if c.is_ramp and _fits(c, s):
        base = "0" if c.align >= s else _index_let(ctx, f"{c.expr} & {mask}", 1)
        return ramp(base, c.step, i32, c.lanes, min(c.align, s) if c.align < s else 1 << 30)
    return vector(_index_let(ctx, f"{c.as_vector()} & {mask}", c.lanes), i32, c.lanes)


def _index_scale(ctx: "EmitContext", c: Chunk, m: int) -> Chunk:
    if m == 1:
        return c
    if c.const is not None:
        return uniform(str(c.const * m), i32, c.lanes, 1 << 30, c.const * m)
    if c.kind == "vector":
        return vector(_index_let(ctx, f"{c.expr} * {m}", c.lanes), i32, c.lanes)
    base = _index_let(ctx, f"{c.expr} * {m}", 1)
    return ramp(base, c.step * m, i32, c.lanes, min(1 << 30, c.align * m))


def _index_add(ctx: "EmitContext", a: Chunk, b: Chunk) -> Chunk:
    if a.const == 0:
        return b
    if b.const == 0:
        return a
    if a.kind == "vector" or b.kind == "vector":
        return vector(_index_let(ctx, f"{a.as_vector()} + {b.as_vector()}", a.lanes), i32,
                      a.lanes)
    base = _index_let(ctx, f"{a.expr} + {b.expr}", 1)
    return ramp(base, a.step + b.step, i32, a.lanes, min(a.align, b.align))
