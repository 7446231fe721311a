"""Ops whose results mix elements held by different work-items: reductions, scans (``dot``
is in ``dot.py``), and (with several work-items) broadcasts and permutes of stored tiles.

Their operands are *staged*: with one work-item per program the private arrays already hold
whole tiles in row-major order; with several, the owners write their chunks to ``__local``
scratch memory (one arena, reused by every such op, behind barriers).  Each work-item then
computes its own chunks of the result reading the staged operands at any index.

Reductions of a 1-D tile with one commutative op (``sum``, ``max``...) skip staging: each
work-item combines its chunks as vectors, folds the lanes, and the work-items' partial results
meet in a tree in scratch memory; such reductions of a tile being stored accumulate in the
loop that stores it (``store_with_reductions``).  Every other reduction and every scan
combines elements in index order, as the IR requires of combines that are not commutative.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Optional

from anytile.errors import CompilationError
from anytile.ir import (BinaryOp, Block, CallOp, ConditionOp, ForOp, IfOp, Op, ReduceOp,
                        ScanOp, Value, WhileOp, YieldOp, i32)

from ..layout import BlockedLayout
from .chunk import Chunk, Point, ramp, uniform, vector
from .control import emit_region
from .ctypes import scalar_name, size_of, vector_name
from .values import chunk_loop, declare_stored, read_flat, read_stored, spill, store_tile

if TYPE_CHECKING:
    from .context import EmitContext

__all__ = ["EMITTERS", "local_barrier", "scratch", "claim_scratch", "owners_only", "stage_all",
           "write_flat", "share_with_copies", "broadcast_scalar", "exchange",
           "store_with_reductions", "lane_by_lane"]

_COMMUTATIVE = ("add", "mul", "min", "max", "and", "or", "xor")


# -- scratch memory and barriers -----------------------------------------------------------
def local_barrier(ctx: "EmitContext") -> None:
    if ctx.work_items > 1:
        ctx.w.line("barrier(CLK_LOCAL_MEM_FENCE);")


def scratch(offset: int, elem: Any) -> str:
    """The scratch arena at byte ``offset`` as a pointer to ``elem``s."""
    return f"((__local {scalar_name(elem)}*)((__local uchar*)at_scratch + {offset}))"


def claim_scratch(ctx: "EmitContext", nbytes: int) -> None:
    """Before writing scratch memory: room for ``nbytes``, and no reader left behind."""
    ctx.scratch_bytes = max(ctx.scratch_bytes, nbytes)
    if nbytes > ctx.arch.local_bytes:
        raise CompilationError(
            f"this kernel moves {nbytes} bytes between work-items at once, more than the "
            f"device's {ctx.arch.local_bytes} bytes of local memory: use smaller blocks "
            f"or fewer num_warps", ctx.current_loc)
    if ctx.scratch_in_use:
        local_barrier(ctx)
    ctx.scratch_in_use = True


@contextmanager
def owners_only(ctx: "EmitContext", layout: BlockedLayout) -> Iterator[None]:
    """Run side effects once per chunk: work-items holding copies skip them."""
    if not layout.replicated:
        yield
        return
    with ctx.w.block(f"if (lid < {layout.owners})"):
        yield


def stage(ctx: "EmitContext", value: Value, offset: int = 0) -> tuple[str, str]:
    """``value`` readable at any index: ``(pointer, address space)``."""
    t = value.type
    if ctx.work_items == 1:
        stored = ctx.stored.get(value)
        if stored is None:
            stored = declare_stored(ctx, t, "s")
            with chunk_loop(ctx, t.layout, t.shape) as point:
                c = ctx.chunk(value, point)
                ctx.w.line(f"{stored.name}[{point.natural[1]}] = {c.as_vector()};")
        return stored.flat(), "__private"
    base = scratch(offset, t.elem)
    with owners_only(ctx, t.layout):
        with chunk_loop(ctx, t.layout, t.shape) as point:
            c = ctx.chunk(value, point)
            write_flat(ctx, base, point.flat(), c)
    return base, "__local"


def write_flat(ctx: "EmitContext", base: str, index: Chunk, c: Chunk) -> None:
    if c.lanes == 1:
        ctx.w.line(f"{base}[{index.expr}] = {c.expr};")
    elif index.is_ramp and index.step == 1:
        ctx.w.line(f"vstore{c.lanes}({c.as_vector()}, 0, {base} + {index.expr});")
    else:
        idx, val = spill(ctx, index), spill(ctx, c)
        with ctx.w.block(f"for (int j = 0; j < {c.lanes}; j++)"):
            ctx.w.line(f"{base}[{idx('j')}] = {val('j')};")


def stage_all(ctx: "EmitContext", values: list[Value]) -> list[tuple[str, str]]:
    """Several operands side by side in scratch (then a barrier), or in private arrays."""
    offsets, total = [], 0
    for v in values:
        offsets.append(total)
        total += -(-v.type.numel * size_of(v.type.elem) // 16) * 16
    if ctx.work_items > 1:
        claim_scratch(ctx, total)
    views = [stage(ctx, v, off) for v, off in zip(values, offsets)]
    local_barrier(ctx)
    return views


def share_with_copies(ctx: "EmitContext", value: Value) -> None:
    """After side effects run by owners only: copy their chunks to the other work-items."""
    t, stored = value.type, ctx.stored[value]
    claim_scratch(ctx, t.numel * size_of(t.elem))
    base = scratch(0, t.elem)
    with owners_only(ctx, t.layout):
        with chunk_loop(ctx, t.layout, t.shape) as point:
            write_flat(ctx, base, point.flat(), read_stored(ctx, stored, point))
    local_barrier(ctx)
    with chunk_loop(ctx, t.layout, t.shape) as point:
        c = read_flat(ctx, base, t.elem, point.flat(), "__local")
        ctx.w.line(f"{stored.name}[{point.natural[1]}] = {c.as_vector()};")


def broadcast_scalar(ctx: "EmitContext", name: str, elem: Any) -> str:
    """A scalar work-item 0 computed, in every work-item."""
    claim_scratch(ctx, 8)
    base = scratch(0, elem)
    with ctx.w.block("if (lid == 0)"):
        ctx.w.line(f"{base}[0] = {name};")
    local_barrier(ctx)
    return ctx.arith.let(f"{base}[0]", elem, 1, "b")


def exchange(ctx: "EmitContext", value: Value) -> None:
    """A broadcast or permute of a stored tile, with several work-items: through scratch."""
    op = value.owner
    (view,) = stage_all(ctx, [op.src])
    ctx.staged[op.src] = view
    store_tile(ctx, value, lambda point: ctx.chunk(value, point))
    del ctx.staged[op.src]


# -- combine regions -----------------------------------------------------------------------
def combine(ctx: "EmitContext", region: Block, lhs: list[Chunk], rhs: list[Chunk]) -> list[Chunk]:
    """The chunks a combine region yields for ``lhs`` and ``rhs``."""
    point = Point(lhs[0].lanes, ())
    point.bound = dict(zip(region.args, lhs + rhs))
    if slice_safe(region):
        yielded = region.ops[-1]
        return [ctx.chunk(v, point) for v in yielded.values]
    if lhs[0].lanes != 1:
        raise CompilationError("internal: a combine with control flow on vectors")
    for arg, c in zip(region.args, lhs + rhs):
        ctx.scalars[arg] = c.expr
    yielded = region.ops[-1].values
    return [uniform(e, v.type, 1) for e, v in zip(emit_region(ctx, region), yielded)]


def slice_safe(region: Block) -> bool:
    return all(op.has_trait("elementwise") or op.NAME in ("constant", "hint")
               for op in region.ops if not isinstance(op, YieldOp))


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


def _fold_lanes(ctx: "EmitContext", kind: str, acc: Chunk) -> Chunk:
    """One scalar from a vector by halving: ``combine(lo, hi)`` until one lane is left."""
    while acc.lanes > 1:
        half = acc.lanes // 2
        lo = vector(f"{acc.expr}.lo", acc.type, half)
        hi = vector(f"{acc.expr}.hi", acc.type, half)
        acc = ctx.arith.binary(kind, lo, hi)
    return acc


# -- reductions ----------------------------------------------------------------------------
def emit_reduce(ctx: "EmitContext", op: ReduceOp) -> None:
    src = op.srcs[0].type
    kind = commutative_kind(op)
    if src.rank == 1 and kind is not None:
        ctx.scalars[op.result] = _reduce_all(ctx, op, kind)
        return
    views = stage_all(ctx, list(op.srcs))
    shape = src.shape
    outer = 1
    for s in shape[:op.axis]:
        outer *= s
    inner = src.numel // (outer * shape[op.axis])
    walk = _Walk(outer, shape[op.axis], inner, views, [s.type.elem for s in op.srcs])
    if src.rank == 1:
        accs = _reduce_line(ctx, op, walk, uniform("0", i32, 1, const=0))
        for r, a in zip(op.results, accs):
            ctx.scalars[r] = ctx.arith.let(a.expr, r.type, 1, "red")
        return
    stored = [declare_stored(ctx, r.type) for r in op.results]
    out_t = op.results[0].type
    with chunk_loop(ctx, out_t.layout, out_t.shape) as point:
        flat = point.flat()
        if inner % point.lanes == 0 or point.lanes == 1:
            accs = _reduce_line(ctx, op, walk, flat)
        else:
            accs = lane_by_lane(ctx, flat, lambda f: _reduce_line(ctx, op, walk, f),
                                      [r.type.elem for r in op.results])
        for s, a in zip(stored, accs):
            ctx.w.line(f"{s.name}[{point.natural[1]}] = {a.as_vector()};")
    for r, s in zip(op.results, stored):
        ctx.stored[r] = s


def _reduce_all(ctx: "EmitContext", op: ReduceOp, kind: str) -> str:
    """A 1-D tile to a scalar with a commutative op (see the module docstring)."""
    t = op.srcs[0].type
    acc = start_accumulator(ctx, op)
    with chunk_loop(ctx, t.layout, t.shape) as point:
        accumulate(ctx, op, kind, acc, point)
    return finish_accumulator(ctx, op, kind, acc)


def start_accumulator(ctx: "EmitContext", op: ReduceOp) -> str:
    t = op.srcs[0].type
    acc = ctx.w.fresh("acc")
    ctx.w.line(f"{vector_name(t.elem, t.layout.vector)} {acc};")
    return acc


def accumulate(ctx: "EmitContext", op: ReduceOp, kind: str, acc: str, point: Point) -> None:
    """Combine chunk ``point`` of ``op``'s source into this work-item's vector ``acc``."""
    t = op.srcs[0].type
    c = ctx.chunk(op.srcs[0], point)
    if t.layout.chunks == 1:
        ctx.w.line(f"{acc} = {c.as_vector()};")
        return
    with ctx.w.block(f"if ({point.natural[1]} == 0)"):
        ctx.w.line(f"{acc} = {c.as_vector()};")
    with ctx.w.block("else"):
        current = vector(acc, t.elem, c.lanes) if c.lanes > 1 else uniform(acc, t.elem, 1)
        ctx.w.line(f"{acc} = {ctx.arith.binary(kind, current, c).as_vector()};")


def finish_accumulator(ctx: "EmitContext", op: ReduceOp, kind: str, acc: str) -> str:
    """The lanes of every work-item's ``acc`` folded into one scalar, in every work-item."""
    t = op.srcs[0].type
    start = vector(acc, t.elem, t.layout.vector) if t.layout.vector > 1 else \
        uniform(acc, t.elem, 1)
    total = ctx.arith.let(_fold_lanes(ctx, kind, start).expr, t.elem, 1, "sum")
    owners = t.layout.owners
    if owners == 1:
        return total
    claim_scratch(ctx, owners * size_of(t.elem))
    base = scratch(0, t.elem)
    with ctx.w.block(f"if (lid < {owners})"):
        ctx.w.line(f"{base}[lid] = {total};")
    local_barrier(ctx)
    step = owners // 2
    while step >= 1:
        with ctx.w.block(f"if (lid < {step})"):
            merged = ctx.arith.binary(kind, uniform(f"{base}[lid]", t.elem, 1),
                                       uniform(f"{base}[lid + {step}]", t.elem, 1))
            ctx.w.line(f"{base}[lid] = {merged.expr};")
        local_barrier(ctx)
        step //= 2
    return ctx.arith.let(f"{base}[0]", t.elem, 1, "sum")


def _reduce_line(ctx: "EmitContext", op: ReduceOp, walk: "_Walk", flat: Chunk) -> list[Chunk]:
    """Combine ``op``'s sources along the axis, in index order, for the output elements
    ``flat`` (a ramp within one row of the inner dims, or one element)."""
    lanes = flat.lanes
    origin = walk.origin(ctx, flat)
    accs = [ctx.w.fresh("acc") for _ in op.srcs]
    first = walk.read(ctx, origin, "0")
    for a, c in zip(accs, first):
        ctx.w.line(f"{c.ctype} {a} = {c.as_vector()};")
    with ctx.w.block(f"for (int i = 1; i < {walk.n}; i++)"):
        here = walk.read(ctx, origin, "i")
        current = [vector(a, c.type, lanes) if lanes > 1 else uniform(a, c.type, 1)
                   for a, c in zip(accs, first)]
        merged = combine(ctx, op.combine, current, here)
        for a, m in zip(accs, merged):
            ctx.w.line(f"{a} = {m.as_vector()};")
    return [vector(a, c.type, lanes) if lanes > 1 else uniform(a, c.type, 1)
            for a, c in zip(accs, first)]


def lane_by_lane(ctx: "EmitContext", flat: Chunk, compute: Any, elems: list) -> list[Chunk]:
    """``compute`` on each lane of ``flat`` as a one-lane chunk, gathered back."""
    lanes = flat.lanes
    index = spill(ctx, flat)
    buffers = [ctx.w.fresh("q") for _ in elems]
    for b, e in zip(buffers, elems):
        ctx.w.line(f"{scalar_name(e)} {b}[{lanes}];")
    with ctx.w.block(f"for (int lane = 0; lane < {lanes}; lane++)"):
        one = uniform(ctx.arith.let(index("lane"), i32, 1, "f"), i32, 1)
        for b, c in zip(buffers, compute(one)):
            ctx.w.line(f"{b}[lane] = {c.expr};")
    return [vector(ctx.arith.let(f"vload{lanes}(0, {b})", e, lanes), e, lanes)
            for b, e in zip(buffers, elems)]


# -- scans ---------------------------------------------------------------------------------
def emit_scan(ctx: "EmitContext", op: ScanOp) -> None:
    t = op.srcs[0].type
    shape, axis = t.shape, op.axis
    outer = 1
    for s in shape[:axis]:
        outer *= s
    n = shape[axis]
    inner = t.numel // (outer * n)
    views = stage_all(ctx, list(op.srcs))
    elems = [s.type.elem for s in op.srcs]
    if ctx.work_items == 1:
        outs = [declare_stored(ctx, r.type) for r in op.results]
        targets = [(o.flat(), "__private") for o in outs]
    else:
        targets = views
    lanes = t.layout.vector if inner % t.layout.vector == 0 else 1
    walk = _Walk(outer, n, inner, views, elems)
    lines = outer * inner // lanes
    start = "lid" if ctx.work_items > 1 else "0"
    with ctx.w.block(f"for (int line = {start}; line < {lines}; line += {ctx.work_items})"):
        flat = ctx.arith.let(f"(line / {inner // lanes}) * {n * inner} + (line % "
                              f"{inner // lanes}) * {lanes}", i32, 1, "ln")
        origin = ramp(flat, 1, i32, lanes, align=lanes) if lanes > 1 else uniform(flat, i32, 1)
        first, rest = (n - 1, f"(int i = {n - 2}; i >= 0; i--)") if op.reverse else \
            (0, f"(int i = 1; i < {n}; i++)")
        accs = [ctx.w.fresh("acc") for _ in op.srcs]
        for a, c in zip(accs, walk.read(ctx, origin, str(first))):
            ctx.w.line(f"{c.ctype} {a} = {c.as_vector()};")
        _scan_write(ctx, walk, origin, str(first), targets, accs, elems, lanes)
        with ctx.w.block(f"for {rest}"):
            here = walk.read(ctx, origin, "i")
            current = [vector(a, e, lanes) if lanes > 1 else uniform(a, e, 1)
                       for a, e in zip(accs, elems)]
            for a, m in zip(accs, combine(ctx, op.combine, current, here)):
                ctx.w.line(f"{a} = {m.as_vector()};")
            _scan_write(ctx, walk, origin, "i", targets, accs, elems, lanes)
    if ctx.work_items == 1:
        for r, o in zip(op.results, outs):
            ctx.stored[r] = o
        return
    local_barrier(ctx)
    for r, (base, space), e in zip(op.results, targets, elems):
        store_tile(ctx, r, lambda point, b=base, el=e: read_flat(ctx, b, el, point.flat(), space))


def _scan_write(ctx: "EmitContext", walk: "_Walk", origin: Chunk, i: str, targets: list, accs: list,
                elems: list, lanes: int) -> None:
    index = walk.index(ctx, origin, i)
    for (base, space), a, e in zip(targets, accs, elems):
        c = vector(a, e, lanes) if lanes > 1 else uniform(a, e, 1)
        write_flat(ctx, f"(({space} {scalar_name(e)}*){base})", index, c)


# -- sums computed where their source is ----------------------------------------------------
def store_with_reductions(ctx: "EmitContext", value: Value, following: Any) -> None:
    """Store ``value``; 1-D commutative reductions that follow it and read it (``sum(x)``,
    ``max(x * x)``) accumulate in the same loop: no second pass over the tile."""
    fused = _fusable_reductions(ctx, value, following)
    accs = [(op, kind, start_accumulator(ctx, op)) for op, kind in fused]

    def accumulate_all(point: Point) -> None:
        for op, kind, acc in accs:
            accumulate(ctx, op, kind, acc, point)
    store_tile(ctx, value, lambda point: ctx.chunk(value, point),
               accumulate_all if accs else None)
    for op, kind, acc in accs:
        ctx.scalars[op.result] = finish_accumulator(ctx, op, kind, acc)
        ctx.done.add(id(op))


def _fusable_reductions(ctx: "EmitContext", value: Value, following: Any) -> list:
    found = []
    for later in following:
        if isinstance(later, (YieldOp, ConditionOp, ForOp, IfOp, WhileOp, CallOp)) or \
                later.has_trait("side_effect"):
            break
        if isinstance(later, ReduceOp) and later.srcs[0].type.shape == value.type.shape and \
                value.type.rank == 1 and _ready(ctx, later.srcs[0], value):
            kind = commutative_kind(later)
            if kind is not None:
                found.append((later, kind))
    return found


def _ready(ctx: "EmitContext", source: Value, value: Value) -> bool:
    """Whether ``source`` can be computed now from ``value`` and what is already known."""
    stack, seen = [source], set()
    while stack:
        v = stack.pop()
        if v is value or v in ctx.stored or v in ctx.scalars or id(v) in seen:
            continue
        seen.add(id(v))
        owner = v.owner
        if not isinstance(owner, Op) or not ctx.plan.is_lazy(owner):
            return False
        stack.extend(owner.operands)
    return True


class _Walk:
    """Reading staged sources along a reduction or scan axis: the sources are
    ``[outer, n, inner]`` in row-major order; an output element ``o * inner + p`` reads
    ``(o * n + i) * inner + p``."""

    def __init__(self, outer: int, n: int, inner: int, views: list, elems: list) -> None:
        self.outer, self.n, self.inner = outer, n, inner
        self.views, self.elems = views, elems

    def origin(self, ctx: "EmitContext", flat: Chunk) -> Chunk:
        """The source index of element ``i = 0`` for the output elements ``flat``."""
        if self.inner == 1:
            expr = f"({flat.expr}) * {self.n}"
        else:
            expr = f"(({flat.expr}) / {self.inner}) * {self.n * self.inner} + (({flat.expr}) % {self.inner})"
        base = ctx.arith.let(expr, i32, 1, "o")
        return ramp(base, flat.step, i32, flat.lanes, flat.lanes) if flat.is_ramp else \
            uniform(base, i32, flat.lanes)

    def index(self, ctx: "EmitContext", origin: Chunk, i: str) -> Chunk:
        base = ctx.arith.let(f"{origin.expr} + ({i}) * {self.inner}", i32, 1, "ix")
        return ramp(base, origin.step, i32, origin.lanes, origin.lanes) if origin.is_ramp else \
            uniform(base, i32, origin.lanes)

    def read(self, ctx: "EmitContext", origin: Chunk, i: str) -> list[Chunk]:
        index = self.index(ctx, origin, i)
        return [read_flat(ctx, base, elem, index, space)
                for (base, space), elem in zip(self.views, self.elems)]


EMITTERS = {ReduceOp: emit_reduce, ScanOp: emit_scan}
