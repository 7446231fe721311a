"""Ops whose results mix elements held by different work-items: reductions, scans (``dot``
is in ``dot.py``), and (with several work-items) broadcasts and permutes of stored tiles.

Their operands are *staged*: with one work-item per program the private arrays already hold
whole tiles in row-major order; with several, the owners write their chunks to ``__local``
scratch memory (one arena, reused by every such op, behind barriers).  Each work-item then
computes its own chunks of the result reading the staged operands at any index.

Reductions of a 1-D tile with one commutative op (``sum``, ``max``...) skip staging: each
work-item combines its chunks as vectors, folds the lanes, and the work-items' partial results
meet in a tree in scratch memory.  Every other reduction and every scan combines elements in
index order, as the IR requires of combines that are not commutative.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional

from anytile.errors import CompilationError
from anytile.ir import BinaryOp, Block, ReduceOp, ScanOp, Value, YieldOp, i32

from ..layout import BlockedLayout
from .chunk import Chunk, Point, ramp, uniform, vector
from .ctypes import scalar_name, size_of, vector_name

__all__ = ["CollectiveEmitter"]

_COMMUTATIVE = ("add", "mul", "min", "max", "and", "or", "xor")


class CollectiveEmitter:
    """The part of ``KernelEmitter`` that moves elements between work-items."""

    # -- scratch memory and barriers -----------------------------------------------------------
    def local_barrier(self) -> None:
        if self.work_items > 1:
            self.w.line("barrier(CLK_LOCAL_MEM_FENCE);")

    def scratch(self, offset: int, elem: Any) -> str:
        """The scratch arena at byte ``offset`` as a pointer to ``elem``s."""
        return f"((__local {scalar_name(elem)}*)((__local uchar*)at_scratch + {offset}))"

    def claim_scratch(self, nbytes: int) -> None:
        """Before writing scratch memory: room for ``nbytes``, and no reader left behind."""
        self.scratch_bytes = max(self.scratch_bytes, nbytes)
        if nbytes > self.arch.local_bytes:
            raise CompilationError(
                f"this kernel moves {nbytes} bytes between work-items at once, more than the "
                f"device's {self.arch.local_bytes} bytes of local memory: use smaller blocks "
                f"or fewer num_warps", self.current_loc)
        if self.scratch_in_use:
            self.local_barrier()
        self.scratch_in_use = True

    @contextmanager
    def owners_only(self, layout: BlockedLayout) -> Iterator[None]:
        """Run side effects once per chunk: work-items holding copies skip them."""
        if not layout.replicated:
            yield
            return
        with self.w.block(f"if (lid < {layout.owners})"):
            yield

    def stage(self, value: Value, offset: int = 0) -> tuple[str, str]:
        """``value`` readable at any index: ``(pointer, address space)``."""
        t = value.type
        if self.work_items == 1:
            stored = self.stored.get(value)
            if stored is None:
                stored = self.declare_stored(t, "s")
                with self.chunk_loop(t.layout, t.shape) as point:
                    c = self.chunk(value, point)
                    self.w.line(f"{stored.name}[{point.natural[1]}] = {c.as_vector()};")
            return stored.flat(), "__private"
        base = self.scratch(offset, t.elem)
        with self.owners_only(t.layout):
            with self.chunk_loop(t.layout, t.shape) as point:
                c = self.chunk(value, point)
                self._write_flat(base, point.flat(), c)
        return base, "__local"

    def _write_flat(self, base: str, index: Chunk, c: Chunk) -> None:
        if c.lanes == 1:
            self.w.line(f"{base}[{index.expr}] = {c.expr};")
        elif index.is_ramp and index.step == 1:
            self.w.line(f"vstore{c.lanes}({c.as_vector()}, 0, {base} + {index.expr});")
        else:
            idx, val = self.spill(index), self.spill(c)
            with self.w.block(f"for (int j = 0; j < {c.lanes}; j++)"):
                self.w.line(f"{base}[{idx('j')}] = {val('j')};")

    def stage_all(self, values: list[Value]) -> list[tuple[str, str]]:
        """Several operands side by side in scratch (then a barrier), or in private arrays."""
        offsets, total = [], 0
        for v in values:
            offsets.append(total)
            total += -(-v.type.numel * size_of(v.type.elem) // 16) * 16
        if self.work_items > 1:
            self.claim_scratch(total)
        views = [self.stage(v, off) for v, off in zip(values, offsets)]
        self.local_barrier()
        return views

    def share_with_copies(self, value: Value) -> None:
        """After side effects run by owners only: copy their chunks to the other work-items."""
        t, stored = value.type, self.stored[value]
        self.claim_scratch(t.numel * size_of(t.elem))
        base = self.scratch(0, t.elem)
        with self.owners_only(t.layout):
            with self.chunk_loop(t.layout, t.shape) as point:
                self._write_flat(base, point.flat(), self.read_stored(stored, point))
        self.local_barrier()
        with self.chunk_loop(t.layout, t.shape) as point:
            c = self.read_flat(base, t.elem, point.flat(), "__local")
            self.w.line(f"{stored.name}[{point.natural[1]}] = {c.as_vector()};")

    def broadcast_scalar(self, name: str, elem: Any) -> str:
        """A scalar work-item 0 computed, in every work-item."""
        self.claim_scratch(8)
        base = self.scratch(0, elem)
        with self.w.block("if (lid == 0)"):
            self.w.line(f"{base}[0] = {name};")
        self.local_barrier()
        return self.arith.let(f"{base}[0]", elem, 1, "b")

    def exchange(self, value: Value) -> None:
        """A broadcast or permute of a stored tile, with several work-items: through scratch."""
        op = value.owner
        (view,) = self.stage_all([op.src])
        self.staged[op.src] = view
        self.store_tile(value, lambda point: self.chunk(value, point))
        del self.staged[op.src]

    # -- combine regions -----------------------------------------------------------------------
    def combine(self, region: Block, lhs: list[Chunk], rhs: list[Chunk]) -> list[Chunk]:
        """The chunks a combine region yields for ``lhs`` and ``rhs``."""
        point = Point(lhs[0].lanes, ())
        point.bound = dict(zip(region.args, lhs + rhs))
        if self.slice_safe(region):
            yielded = region.ops[-1]
            return [self.chunk(v, point) for v in yielded.values]
        if lhs[0].lanes != 1:
            raise CompilationError("internal: a combine with control flow on vectors")
        for arg, c in zip(region.args, lhs + rhs):
            self.scalars[arg] = c.expr
        yielded = region.ops[-1].values
        return [uniform(e, v.type, 1) for e, v in zip(self.emit_region(region), yielded)]

    @staticmethod
    def slice_safe(region: Block) -> bool:
        return all(op.has_trait("elementwise") or op.NAME in ("constant", "hint")
                   for op in region.ops if not isinstance(op, YieldOp))

    @staticmethod
    def commutative_kind(op: Any) -> Optional[str]:
        """The kind of a combine that is one commutative binary op of its two arguments."""
        region = op.combine
        if len(op.srcs) != 1 or len(region.ops) != 2:
            return None
        binary, yielded = region.ops
        if not (isinstance(binary, BinaryOp) and binary.kind in _COMMUTATIVE and
                isinstance(yielded, YieldOp) and yielded.values == [binary.result] and
                {id(binary.lhs), id(binary.rhs)} == {id(a) for a in region.args}):
            return None
        return binary.kind

    def _fold_lanes(self, kind: str, acc: Chunk) -> Chunk:
        """One scalar from a vector by halving: ``combine(lo, hi)`` until one lane is left."""
        while acc.lanes > 1:
            half = acc.lanes // 2
            lo = vector(f"{acc.expr}.lo", acc.type, half)
            hi = vector(f"{acc.expr}.hi", acc.type, half)
            acc = self.arith.binary(kind, lo, hi)
        return acc

    # -- reductions ----------------------------------------------------------------------------
    def emit_reduce(self, op: ReduceOp) -> None:
        src = op.srcs[0].type
        kind = self.commutative_kind(op)
        if src.rank == 1 and kind is not None:
            self.scalars[op.result] = self._reduce_all(op, kind)
            return
        views = self.stage_all(list(op.srcs))
        shape = src.shape
        outer = 1
        for s in shape[:op.axis]:
            outer *= s
        inner = src.numel // (outer * shape[op.axis])
        walk = _Walk(outer, shape[op.axis], inner, views, [s.type.elem for s in op.srcs])
        if src.rank == 1:
            accs = self._reduce_line(op, walk, uniform("0", i32, 1, const=0))
            for r, a in zip(op.results, accs):
                self.scalars[r] = self.arith.let(a.expr, r.type, 1, "red")
            return
        stored = [self.declare_stored(r.type) for r in op.results]
        out_t = op.results[0].type
        with self.chunk_loop(out_t.layout, out_t.shape) as point:
            flat = point.flat()
            if inner % point.lanes == 0 or point.lanes == 1:
                accs = self._reduce_line(op, walk, flat)
            else:
                accs = self._lane_by_lane(flat, lambda f: self._reduce_line(op, walk, f),
                                          [r.type.elem for r in op.results])
            for s, a in zip(stored, accs):
                self.w.line(f"{s.name}[{point.natural[1]}] = {a.as_vector()};")
        for r, s in zip(op.results, stored):
            self.stored[r] = s

    def _reduce_all(self, op: ReduceOp, kind: str) -> str:
        """A 1-D tile to a scalar with a commutative op (see the module docstring)."""
        t = op.srcs[0].type
        acc = self.start_accumulator(op)
        with self.chunk_loop(t.layout, t.shape) as point:
            self.accumulate(op, kind, acc, point)
        return self.finish_accumulator(op, kind, acc)

    def start_accumulator(self, op: ReduceOp) -> str:
        t = op.srcs[0].type
        acc = self.w.fresh("acc")
        self.w.line(f"{vector_name(t.elem, t.layout.vector)} {acc};")
        return acc

    def accumulate(self, op: ReduceOp, kind: str, acc: str, point: Point) -> None:
        """Combine chunk ``point`` of ``op``'s source into this work-item's vector ``acc``."""
        t = op.srcs[0].type
        c = self.chunk(op.srcs[0], point)
        if t.layout.chunks == 1:
            self.w.line(f"{acc} = {c.as_vector()};")
            return
        with self.w.block(f"if ({point.natural[1]} == 0)"):
            self.w.line(f"{acc} = {c.as_vector()};")
        with self.w.block("else"):
            current = vector(acc, t.elem, c.lanes) if c.lanes > 1 else uniform(acc, t.elem, 1)
            self.w.line(f"{acc} = {self.arith.binary(kind, current, c).as_vector()};")

    def finish_accumulator(self, op: ReduceOp, kind: str, acc: str) -> str:
        """The lanes of every work-item's ``acc`` folded into one scalar, in every work-item."""
        t = op.srcs[0].type
        start = vector(acc, t.elem, t.layout.vector) if t.layout.vector > 1 else \
            uniform(acc, t.elem, 1)
        total = self.arith.let(self._fold_lanes(kind, start).expr, t.elem, 1, "sum")
        owners = t.layout.owners
        if owners == 1:
            return total
        self.claim_scratch(owners * size_of(t.elem))
        base = self.scratch(0, t.elem)
        with self.w.block(f"if (lid < {owners})"):
            self.w.line(f"{base}[lid] = {total};")
        self.local_barrier()
        step = owners // 2
        while step >= 1:
            with self.w.block(f"if (lid < {step})"):
                merged = self.arith.binary(kind, uniform(f"{base}[lid]", t.elem, 1),
                                           uniform(f"{base}[lid + {step}]", t.elem, 1))
                self.w.line(f"{base}[lid] = {merged.expr};")
            self.local_barrier()
            step //= 2
        return self.arith.let(f"{base}[0]", t.elem, 1, "sum")

    def _reduce_line(self, op: ReduceOp, walk: "_Walk", flat: Chunk) -> list[Chunk]:
        """Combine ``op``'s sources along the axis, in index order, for the output elements
        ``flat`` (a ramp within one row of the inner dims, or one element)."""
        lanes = flat.lanes
        origin = walk.origin(self, flat)
        accs = [self.w.fresh("acc") for _ in op.srcs]
        first = walk.read(self, origin, "0")
        for a, c in zip(accs, first):
            self.w.line(f"{c.ctype} {a} = {c.as_vector()};")
        with self.w.block(f"for (int i = 1; i < {walk.n}; i++)"):
            here = walk.read(self, origin, "i")
            current = [vector(a, c.type, lanes) if lanes > 1 else uniform(a, c.type, 1)
                       for a, c in zip(accs, first)]
            merged = self.combine(op.combine, current, here)
            for a, m in zip(accs, merged):
                self.w.line(f"{a} = {m.as_vector()};")
        return [vector(a, c.type, lanes) if lanes > 1 else uniform(a, c.type, 1)
                for a, c in zip(accs, first)]

    def _lane_by_lane(self, flat: Chunk, compute: Any, elems: list) -> list[Chunk]:
        """``compute`` on each lane of ``flat`` as a one-lane chunk, gathered back."""
        lanes = flat.lanes
        index = self.spill(flat)
        buffers = [self.w.fresh("q") for _ in elems]
        for b, e in zip(buffers, elems):
            self.w.line(f"{scalar_name(e)} {b}[{lanes}];")
        with self.w.block(f"for (int lane = 0; lane < {lanes}; lane++)"):
            one = uniform(self.arith.let(index("lane"), i32, 1, "f"), i32, 1)
            for b, c in zip(buffers, compute(one)):
                self.w.line(f"{b}[lane] = {c.expr};")
        return [vector(self.arith.let(f"vload{lanes}(0, {b})", e, lanes), e, lanes)
                for b, e in zip(buffers, elems)]

    # -- scans ---------------------------------------------------------------------------------
    def emit_scan(self, op: ScanOp) -> None:
        t = op.srcs[0].type
        shape, axis = t.shape, op.axis
        outer = 1
        for s in shape[:axis]:
            outer *= s
        n = shape[axis]
        inner = t.numel // (outer * n)
        views = self.stage_all(list(op.srcs))
        elems = [s.type.elem for s in op.srcs]
        if self.work_items == 1:
            outs = [self.declare_stored(r.type) for r in op.results]
            targets = [(o.flat(), "__private") for o in outs]
        else:
            targets = views
        lanes = t.layout.vector if inner % t.layout.vector == 0 else 1
        walk = _Walk(outer, n, inner, views, elems)
        lines = outer * inner // lanes
        start = "lid" if self.work_items > 1 else "0"
        with self.w.block(f"for (int line = {start}; line < {lines}; line += {self.work_items})"):
            flat = self.arith.let(f"(line / {inner // lanes}) * {n * inner} + (line % "
                                  f"{inner // lanes}) * {lanes}", i32, 1, "ln")
            origin = ramp(flat, 1, i32, lanes, align=lanes) if lanes > 1 else uniform(flat, i32, 1)
            first, rest = (n - 1, f"(int i = {n - 2}; i >= 0; i--)") if op.reverse else \
                (0, f"(int i = 1; i < {n}; i++)")
            accs = [self.w.fresh("acc") for _ in op.srcs]
            for a, c in zip(accs, walk.read(self, origin, str(first))):
                self.w.line(f"{c.ctype} {a} = {c.as_vector()};")
            self._scan_write(walk, origin, str(first), targets, accs, elems, lanes)
            with self.w.block(f"for {rest}"):
                here = walk.read(self, origin, "i")
                current = [vector(a, e, lanes) if lanes > 1 else uniform(a, e, 1)
                           for a, e in zip(accs, elems)]
                for a, m in zip(accs, self.combine(op.combine, current, here)):
                    self.w.line(f"{a} = {m.as_vector()};")
                self._scan_write(walk, origin, "i", targets, accs, elems, lanes)
        if self.work_items == 1:
            for r, o in zip(op.results, outs):
                self.stored[r] = o
            return
        self.local_barrier()
        for r, (base, space), e in zip(op.results, targets, elems):
            self.store_tile(r, lambda point, b=base, el=e: self.read_flat(b, el, point.flat(), space))

    def _scan_write(self, walk: "_Walk", origin: Chunk, i: str, targets: list, accs: list,
                    elems: list, lanes: int) -> None:
        index = walk.index(self, origin, i)
        for (base, space), a, e in zip(targets, accs, elems):
            c = vector(a, e, lanes) if lanes > 1 else uniform(a, e, 1)
            self._write_flat(f"(({space} {scalar_name(e)}*){base})", index, c)


class _Walk:
    """Reading staged sources along a reduction or scan axis: the sources are
    ``[outer, n, inner]`` in row-major order; an output element ``o * inner + p`` reads
    ``(o * n + i) * inner + p``."""

    def __init__(self, outer: int, n: int, inner: int, views: list, elems: list) -> None:
        self.outer, self.n, self.inner = outer, n, inner
        self.views, self.elems = views, elems

    def origin(self, emitter: Any, flat: Chunk) -> Chunk:
        """The source index of element ``i = 0`` for the output elements ``flat``."""
        if self.inner == 1:
            expr = f"({flat.expr}) * {self.n}"
        else:
            expr = f"(({flat.expr}) / {self.inner}) * {self.n * self.inner} + (({flat.expr}) % {self.inner})"
        base = emitter.arith.let(expr, i32, 1, "o")
        return ramp(base, flat.step, i32, flat.lanes, flat.lanes) if flat.is_ramp else \
            uniform(base, i32, flat.lanes)

    def index(self, emitter: Any, origin: Chunk, i: str) -> Chunk:
        base = emitter.arith.let(f"{origin.expr} + ({i}) * {self.inner}", i32, 1, "ix")
        return ramp(base, origin.step, i32, origin.lanes, origin.lanes) if origin.is_ramp else \
            uniform(base, i32, origin.lanes)

    def read(self, emitter: Any, origin: Chunk, i: str) -> list[Chunk]:
        index = self.index(emitter, origin, i)
        return [emitter.read_flat(base, elem, index, space)
                for (base, space), elem in zip(self.views, self.elems)]
