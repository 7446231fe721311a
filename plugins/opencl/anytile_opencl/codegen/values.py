"""Tiles and scalars while a kernel is written: where each value lives, and how to compute
one chunk of a tile at a ``Point``.

* scalars are C variables, the same in every work-item (``scalars``);
* stored tiles are private arrays of chunks in their ``BlockedLayout`` (``stored``);
* lazy tiles (cheap, fused, views; see ``plan``) are computed at each point they are read.

A stored tile is read at its own chunks (``natural`` points).  With one work-item per
program the array also is the whole tile in row-major order, so broadcasts and permutes read
it at any index; with several, elements move between work-items through ``__local`` scratch
memory (``collective``).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from anytile.errors import CompilationError
from anytile.ir import (ArangeOp, BroadcastOp, ConstantOp, ExpandDimsOp, HintOp, NumProgramsOp,
                        Op, PermuteOp, ProgramIdOp, ReshapeOp, ScalarType, SplatOp, TileType,
                        Value, i32)

from ..layout import BlockedLayout
from .chunk import Chunk, Point, ramp, scalar_point, uniform, vector
from .ctypes import literal, scalar_name, vector_name

__all__ = ["Stored", "ValueEmitter"]


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


class ValueEmitter:
    """The part of ``KernelEmitter`` that knows where values are and computes chunks."""

    w: Any
    arith: Any
    plan: Any
    work_items: int

    # -- where values are --------------------------------------------------------------------
    def scalar(self, value: Value) -> str:
        """The C expression of a scalar value."""
        name = self.scalars.get(value)
        if name is None:
            raise CompilationError(f"internal: scalar {value} used before it is defined",
                                   getattr(value.owner, "loc", None))
        return name

    def chunk(self, value: Value, point: Point) -> Chunk:
        """``value`` over the chunk ``point`` (scalars are uniform)."""
        bound = point.bound.get(value)
        if bound is not None:
            return bound
        if not isinstance(value.type, TileType):
            name = self.scalars.get(value)
            if name is not None:
                return uniform(name, value.type, point.lanes, self.divisors.get(value, 1))
            return self._computed(value, point)
        staged = self.staged.get(value)
        if staged is not None:
            return self.read_flat(staged[0], value.type.elem, point.flat(), staged[1])
        stored = self.stored.get(value)
        if stored is not None:
            return self.read_stored(stored, point)
        return self._computed(value, point)

    def _computed(self, value: Value, point: Point) -> Chunk:
        cached = point.memo.get(id(value))
        if cached is None:
            owner = value.owner
            if not isinstance(owner, Op):
                raise CompilationError(f"internal: {value} has no value here")
            cached = point.memo[id(value)] = self.eval_op(owner, point)
        return cached

    def read_stored(self, stored: Stored, point: Point) -> Chunk:
        layout = stored.layout
        numel = layout.vector * layout.owners * layout.chunks
        if point.natural is not None and point.natural[0] == numel:
            expr = f"{stored.name}[{point.natural[1]}]"
            return vector(expr, stored.elem, point.lanes) if point.lanes > 1 else \
                uniform(expr, stored.elem, 1)
        if self.work_items != 1:
            raise CompilationError("internal: a tile read across work-items without scratch")
        return self.read_flat(stored.flat(), stored.elem, point.flat(), "__private")

    def read_flat(self, base: str, elem: Any, index: Chunk, space: str) -> Chunk:
        """Elements ``index`` of the array at ``base`` (private or local memory)."""
        lanes = index.lanes
        pointer = f"(({space} {scalar_name(elem)}*){base})"
        if index.is_uniform:
            return uniform(self.arith.let(f"{pointer}[{index.expr}]", elem, 1), elem, lanes)
        if index.is_ramp and index.step == 1:
            return vector(self.arith.let(f"vload{lanes}(0, {pointer} + {index.expr})", elem, lanes),
                          elem, lanes)
        out = self.w.fresh("g")
        idx = self.spill(index)
        self.w.line(f"{scalar_name(elem)} {out}[{lanes}];")
        with self.w.block(f"for (int j = 0; j < {lanes}; j++)"):
            self.w.line(f"{out}[j] = {pointer}[{idx('j')}];")
        return vector(self.arith.let(f"vload{lanes}(0, {out})", elem, lanes), elem, lanes)

    def spill(self, c: Chunk) -> Any:
        """A function giving lane ``j`` (a C expression) of ``c``: vectors are stored to a
        private array first."""
        if c.kind != "vector":
            return c.lane
        name = self.w.fresh("l")
        self.w.line(f"{scalar_name(c.type)} {name}[{c.lanes}];")
        self.w.line(f"vstore{c.lanes}({c.expr}, 0, {name});")
        return lambda j: f"{name}[{j}]"

    # -- chunk loops and stored tiles ----------------------------------------------------------
    def own(self, layout: BlockedLayout) -> str:
        """This work-item's chunk column in ``layout`` (``lid % owners``)."""
        if layout.owners == 1:
            return "0"
        if layout.owners == self.work_items:
            return "lid"
        self.own_masks.add(layout.owners)
        return f"own{layout.owners}"

    @contextmanager
    def chunk_loop(self, layout: BlockedLayout, shape: tuple) -> Iterator[Point]:
        """A loop over this work-item's chunks of a tile in ``layout``; yields the point."""
        v, owners, count = layout.vector, layout.owners, layout.chunks
        own = self.own(layout)
        numel = v * owners * count
        if count == 1:
            with self.w.block(""):
                yield self.natural_point(layout, shape, "0", own, numel)
            return
        k = self.w.fresh("k")
        if self.work_items > 1 and count <= 16:
            self.w.line("#pragma unroll")
        with self.w.block(f"for (int {k} = 0; {k} < {count}; {k}++)"):
            yield self.natural_point(layout, shape, k, own, numel)

    def natural_point(self, layout: BlockedLayout, shape: tuple, k: str, own: str,
                      numel: int) -> Point:
        v = layout.vector
        if k == "0" and own == "0":
            flat = uniform("0", i32, v, align=1 << 30, const=0) if v == 1 else \
                ramp("0", 1, i32, v, align=1 << 30)
        else:
            expr = self.arith.let(f"(({k}) * {layout.owners} + {own}) * {v}", i32, 1, "e")
            flat = ramp(expr, 1, i32, v, align=v) if v > 1 else uniform(expr, i32, 1, align=1)
        return Point(v, tuple(shape), flat, None, (numel, k), index_math=self.index_math)

    def store_tile(self, value: Value, compute: Any, also: Any = None) -> Stored:
        """Declare ``value``'s private array and fill it chunk by chunk with ``compute(point)``
        (then ``also(point)`` in the same loop)."""
        t = value.type
        stored = self.declare_stored(t)
        with self.chunk_loop(t.layout, t.shape) as point:
            c = compute(point)
            self.w.line(f"{stored.name}[{point.natural[1]}] = {c.as_vector()};")
            if also is not None:
                also(point)
        self.stored[value] = stored
        return stored

    def declare_stored(self, t: TileType, prefix: str = "r") -> Stored:
        name = self.w.fresh(prefix)
        self.w.line(f"{vector_name(t.elem, t.layout.vector)} {name}[{t.layout.chunks}];")
        return Stored(name, t.layout, t.elem)

    def materialize(self, value: Value) -> Stored:
        """``value`` stored (computing it from its op at every chunk, if it is lazy)."""
        stored = self.stored.get(value)
        if stored is None:
            stored = self.store_tile(value, lambda p: self.chunk(value, p))
        return stored

    # -- index arithmetic (non-negative i32 indices inside one tile) ----------------------------
    def index_math(self, point: Point) -> None:
        """Fill in the flat index from the dims or the dims from the flat index."""
        shape = point.shape
        strides = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * shape[d + 1]
        if point.flat_chunk is None:
            flat = uniform("0", i32, point.lanes, align=1 << 30, const=0)
            for d, c in enumerate(point.dim_chunks):
                flat = self._index_add(flat, self._index_scale(c, strides[d]))
            point.flat_chunk = flat
        else:
            flat = point.flat_chunk
            point.dim_chunks = tuple(
                self._index_mod(self._index_div(flat, strides[d]), shape[d]) if shape[d] > 1
                else uniform("0", i32, point.lanes, align=1 << 30, const=0)
                for d in range(len(shape)))

    def _index_let(self, expr: str, lanes: int) -> str:
        return self.arith.let(expr, i32, lanes, "x")

    def _fits(self, c: Chunk, block: int) -> bool:
        """Whether every lane of ramp ``c`` lies in one aligned block of ``block`` indices."""
        return (c.lanes - 1) * c.step < min(c.align, block) and c.step > 0

    def _index_div(self, c: Chunk, s: int) -> Chunk:
        if s == 1:
            return c
        shift = _log2(s)
        if c.is_uniform or (c.is_ramp and self._fits(c, s)):
            if c.const is not None:
                return uniform(str(c.const >> shift), i32, c.lanes, max(1, c.align >> shift),
                               c.const >> shift)
            return uniform(self._index_let(f"{c.expr} >> {shift}", 1), i32, c.lanes,
                           max(1, c.align >> shift))
        return vector(self._index_let(f"{c.as_vector()} >> {shift}", c.lanes), i32, c.lanes)

    def _index_mod(self, c: Chunk, s: int) -> Chunk:
        mask = s - 1
        if c.is_uniform:
            if c.const is not None:
                return uniform(str(c.const & mask), i32, c.lanes, 1 << 30, c.const & mask)
            return uniform(self._index_let(f"{c.expr} & {mask}", 1), i32, c.lanes, min(c.align, s))
        if c.is_ramp and self._fits(c, s):
            base = "0" if c.align >= s else self._index_let(f"{c.expr} & {mask}", 1)
            return ramp(base, c.step, i32, c.lanes, min(c.align, s) if c.align < s else 1 << 30)
        return vector(self._index_let(f"{c.as_vector()} & {mask}", c.lanes), i32, c.lanes)

    def _index_scale(self, c: Chunk, m: int) -> Chunk:
        if m == 1:
            return c
        if c.const is not None:
            return uniform(str(c.const * m), i32, c.lanes, 1 << 30, c.const * m)
        if c.kind == "vector":
            return vector(self._index_let(f"{c.expr} * {m}", c.lanes), i32, c.lanes)
        base = self._index_let(f"{c.expr} * {m}", 1)
        return ramp(base, c.step * m, i32, c.lanes, min(1 << 30, c.align * m))

    def _index_add(self, a: Chunk, b: Chunk) -> Chunk:
        if a.const == 0:
            return b
        if b.const == 0:
            return a
        if a.kind == "vector" or b.kind == "vector":
            return vector(self._index_let(f"{a.as_vector()} + {b.as_vector()}", a.lanes), i32,
                          a.lanes)
        base = self._index_let(f"{a.expr} + {b.expr}", 1)
        return ramp(base, a.step + b.step, i32, a.lanes, min(a.align, b.align))

    # -- lazy ops ------------------------------------------------------------------------------
    def eval_shape_op(self, op: Op, point: Point) -> Optional[Chunk]:
        """The chunk of a constant, id or shape op at ``point`` (``None``: not one)."""
        lanes = point.lanes
        if isinstance(op, ConstantOp):
            t = op.result.type
            elem = t.elem if isinstance(t, TileType) else t
            const = int(op.value) if isinstance(elem, ScalarType) and elem.is_int else None
            divisor = 1 if not const else min(const & -const, 1 << 30)
            return uniform(literal(op.value, elem), elem, lanes, const=const,
                           align=(1 << 30) if const == 0 else divisor)
        if isinstance(op, ProgramIdOp):
            return uniform(f"pid{op.axis}", i32, lanes)
        if isinstance(op, NumProgramsOp):
            return uniform(("at_gx", "at_gy", "at_gz")[op.axis], i32, lanes)
        if isinstance(op, SplatOp):
            src = self.chunk(op.src, point)
            return uniform(src.expr, src.type, lanes, src.align, src.const)
        if isinstance(op, ArangeOp):
            index = point.dims()[0]
            if op.start == 0:
                return index
            start = uniform(str(op.start), i32, lanes, const=op.start)
            return self.arith.binary("add", index, start)
        if isinstance(op, HintOp):
            return self.chunk(op.src, point)
        if isinstance(op, (BroadcastOp, ExpandDimsOp, ReshapeOp, PermuteOp)):
            return self.chunk(op.src, self.source_point(op, point))
        return None

    def source_point(self, op: Op, point: Point) -> Point:
        """The point of a shape op's source that ``point`` of its result reads."""
        src_shape = tuple(op.src.type.shape) if isinstance(op.src.type, TileType) else ()

        def make() -> Point:
            if isinstance(op, (ExpandDimsOp, ReshapeOp)):
                return Point(point.lanes, src_shape, point.flat(), None, point.natural,
                             index_math=self.index_math)
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
            return Point(point.lanes, src_shape, None, new, natural, index_math=self.index_math)
        return point.derive(id(op), make)

    def scalar_point(self) -> Point:
        return scalar_point()
