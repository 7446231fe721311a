"""The shared-memory scratch space and the exchanges that go through it.

The kernel's shared memory is one external array: the pipelined buffers first (fixed
offsets, shared by loops one after the other: ``shared.py``), then a scratch space every
other op reuses (layout conversions, reductions across warps, dot operands, scalar
broadcasts).  Each use of the scratch space starts with a barrier, so consecutive uses may
share addresses; ``reserve`` grows the kernel's total to the largest use.  Where no buffer holds data (``ctx.buffers_free``: after a
pipelined loop has drained, an epilogue), a layout exchange takes the buffers' place instead,
and ends with a barrier, since an enclosing loop's next prologue refills them.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional

from llvmlite import ir

from ..llvm.types import I8, I32, I64
from ...ir.types import ScalarType
from .layouts import BlockedLayout, Layout, register_count
from .registers import Regs, coords, first_thread, linear_index

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["reserve", "aligned_scratch", "llvm_bytes", "shared_type", "shared_ptr", "shared_store", "shared_load",
           "broadcast_from_first_thread", "through_shared", "convert", "exchange_bytes"]


def aligned_scratch(ctx: "KernelLowering", nbytes: int, alignment: int) -> ir.Value:
    """Scratch space of ``nbytes`` starting on an ``alignment``-byte boundary (a power of two)
    of the shared-memory address: its start (an i8 pointer).  Where the array itself is that
    aligned, the padding is a constant; else it is computed from the address."""
    b = ctx.b
    if ctx.smem.align >= alignment:
        # the start of shared memory is aligned as much: the padding is known here
        pad = -ctx.persistent_shared % alignment
        reserve(ctx, pad + nbytes)
        return b.gep(ctx.smem_base, [ir.Constant(I32, pad)], source_etype=I8) if pad else ctx.smem_base
    reserve(ctx, nbytes + alignment)
    start = b.ptrtoint(ctx.smem_base, I64)
    aligned = b.and_(b.add(start, ir.Constant(I64, alignment - 1)), ir.Constant(I64, -alignment))
    return b.gep(ctx.smem_base, [b.sub(aligned, start)], source_etype=I8)


def llvm_bytes(t: ir.Type) -> int:
    """Bytes of one value of ``t`` in memory."""
    if isinstance(t, ir.IntType):
        return max(1, t.width // 8)
    if isinstance(t, ir.PointerType):
        return 8
    return {"half": 2, "float": 4, "double": 8}[str(t)]


def reserve(ctx: "KernelLowering", nbytes: int) -> None:
    """Scratch space of ``nbytes`` at ``ctx.smem_base`` (after the pipelined buffers)."""
    ctx.shared_bytes = max(ctx.shared_bytes, ctx.persistent_shared + (nbytes + 15) // 16 * 16)


def shared_type(t: ir.Type) -> ir.Type:
    """How a register of type ``t`` is kept in shared memory (i1 as a byte, pointers as i64)."""
    if isinstance(t, ir.IntType) and t.width == 1:
        return I8
    if isinstance(t, ir.PointerType):
        return I64
    return t


def shared_ptr(ctx: "KernelLowering", t: ir.Type, index: ir.Value, region: int = 0) -> ir.Value:
    b = ctx.b
    base = ctx.smem_base if region == 0 else b.gep(ctx.smem_base, [ir.Constant(I32, region)],
                                                   source_etype=I8)
    return b.gep(base, [index], source_etype=shared_type(t))


def shared_store(ctx: "KernelLowering", value: ir.Value, index: ir.Value, region: int = 0) -> None:
    """Store ``value`` at element ``index`` of the scratch space (from byte ``region``)."""
    b, t = ctx.b, value.type
    if isinstance(t, ir.IntType) and t.width == 1:
        value = b.zext(value, I8)
    elif isinstance(t, ir.PointerType):
        value = b.ptrtoint(value, I64)
    b.store(value, shared_ptr(ctx, t, index, region))


def shared_load(ctx: "KernelLowering", t: ir.Type, index: ir.Value, region: int = 0) -> ir.Value:
    """The value of type ``t`` at element ``index`` of the scratch space."""
    b = ctx.b
    raw = b.load(shared_ptr(ctx, t, index, region), typ=shared_type(t))
    if isinstance(t, ir.IntType) and t.width == 1:
        return b.trunc(raw, t)
    if isinstance(t, ir.PointerType):
        return b.inttoptr(raw, t)
    return raw


def broadcast_from_first_thread(ctx: "KernelLowering", value: ir.Value) -> ir.Value:
    """Thread 0's ``value``, in every thread."""
    reserve(ctx, 8)
    ctx.target.barrier(ctx.b)
    with ctx.b.if_then(first_thread(ctx)):
        shared_store(ctx, value, ir.Constant(I32, 0))
    ctx.target.barrier(ctx.b)
    return shared_load(ctx, value.type, ir.Constant(I32, 0))


def _pitch(shape: tuple, nbytes: int) -> int:
    """Elements from one row of an exchanged tile to the next: rows of 64 bytes or more
    padded by 16, so the rows a warp writes at once start on different banks."""
    last = shape[-1] if shape else 1
    if len(shape) >= 2 and last * nbytes >= 64 and 16 % nbytes == 0:
        return last + 16 // nbytes
    return last


def exchange_bytes(shape: tuple, nbytes: int) -> int:
    """The scratch bytes ``through_shared`` takes for a tile of ``shape`` of ``nbytes``
    elements (the same shape in and out)."""
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return rows * _pitch(shape, nbytes) * nbytes


def _runs(layout: Layout, shape: tuple, count: int, nbytes: int) -> list[list[int]]:
    """A thread's registers in runs of consecutive elements along the last dimension (16
    bytes at most), one vector access each."""
    width = 1
    if isinstance(layout, BlockedLayout) and shape and layout.order[0] == len(shape) - 1 \
            and shape[-1] >= layout.size_per_thread[-1]:
        spt = layout.size_per_thread[-1]
        while width * 2 * nbytes <= 16 and spt % (width * 2) == 0:
            width *= 2
    return [list(range(i, i + width)) for i in range(0, count, width)]


def through_shared(ctx: "KernelLowering", src: Regs, want: Layout, shape: tuple,
                   elem: Optional[ScalarType] = None) -> Regs:
    """``src`` re-distributed as ``want`` over ``shape`` (same row-major elements).  Each
    thread writes its runs along the last dimension as vectors and reads its runs of
    ``want`` as vectors, rows padded (``_pitch``) where the shape stays; narrow floats
    (``elem`` f16, bf16, float8) go through in their storage form.  Where no pipelined buffer
    holds data (``ctx.buffers_free``: an epilogue after the K loop) and they are large
    enough, the exchange takes the buffers' place instead of growing the scratch space, and
    ends with a barrier (an enclosing loop's next prologue refills them).  A tile that fits
    neither goes in rounds, a slice of its rows at a time (``_through_shared_in_rounds``)."""
    b = ctx.b
    t = src.values[0].type
    narrow = isinstance(elem, ScalarType) and elem.is_float and ctx.types.storage(elem) != t
    kept = ctx.types.storage(elem) if narrow else shared_type(t)
    nbytes = llvm_bytes(kept)
    same = tuple(src.shape) == tuple(shape)
    pitch = _pitch(shape, nbytes)
    total = exchange_bytes(shape, nbytes) if same else math.prod(shape) * nbytes
    in_buffers = ctx.buffers_free and total <= ctx.buffer_bytes
    rounds = _rounds(ctx, shape, total) if same and not in_buffers else 1
    if rounds > 1:
        return _through_shared_in_rounds(ctx, src, want, shape, elem, rounds)
    if in_buffers:
        base = ctx.smem
    else:
        reserve(ctx, total)
        base = ctx.smem_base
    vectors = kept == t or narrow        # i1 and pointers are kept widened, one at a time

    def address(c: tuple, shape: tuple) -> ir.Value:
        row = ir.Constant(I32, pitch if same else shape[-1])
        index = c[-1] if len(c) == 1 else b.add(b.mul(linear_index(b, c[:-1], shape[:-1]), row), c[-1])
        return b.gep(base, [index if c else ir.Constant(I32, 0)], source_etype=kept)

    ctx.target.barrier(b)
    where = coords(ctx, src.layout, src.shape)
    for run in _runs(src.layout, src.shape, len(src.values), nbytes) if vectors else \
            [[i] for i in range(len(src.values))]:
        values = [src.values[i] for i in run]
        if narrow:
            value = ctx.ew.pack_storage(elem, values)
        elif len(run) > 1:
            value = ir.Constant(ir.VectorType(kept, len(run)), ir.Undefined)
            for k, v in enumerate(values):
                value = b.insert_element(value, v, ir.Constant(I32, k))
        else:
            value = values[0]
            if isinstance(t, ir.IntType) and t.width == 1:
                value = b.zext(value, I8)
            elif isinstance(t, ir.PointerType):
                value = b.ptrtoint(value, I64)
        b.store(value, address(where[run[0]], src.shape)).align = len(run) * nbytes
    ctx.target.barrier(b)
    where = coords(ctx, want, shape)
    count = register_count(want, shape)
    values: list = [None] * count
    for run in _runs(want, shape, count, nbytes) if vectors else [[i] for i in range(count)]:
        ptr = address(where[run[0]], shape)
        if len(run) > 1:
            got = b.load(ptr, typ=ir.VectorType(kept, len(run)))
            got.align = len(run) * nbytes
            parts = [b.extract_element(got, ir.Constant(I32, k)) for k in range(len(run))]
        else:
            got = b.load(ptr, typ=kept)
            got.align = nbytes
            parts = [got]
        for i, part in zip(run, parts):
            if narrow:
                part = ctx.ew.from_storage(elem, part)
            elif isinstance(t, ir.IntType) and t.width == 1:
                part = b.trunc(part, t)
            elif isinstance(t, ir.PointerType):
                part = b.inttoptr(part, t)
            values[i] = part
    if in_buffers:
        # ordinary reads and writes of the buffers, before an enclosing loop's next prologue
        # refills them (which a backend's copies may do outside the threads)
        ctx.buffers_reused(b)
        ctx.target.barrier(b)
    return Regs(want, shape, values)


def _rounds(ctx: "KernelLowering", shape: tuple, total: int) -> int:
    """How many rounds an exchange of ``total`` bytes takes: 1 when it fits the shared memory
    a program has beside the pipelined buffers, else the fewest (a power of two dividing the
    first dimension) whose slices of the first dimension each fit."""
    room = ctx.target.shared_memory_limit - ctx.persistent_shared
    rounds = 1
    while total // rounds > room and shape and shape[0] % (rounds * 2) == 0 \
            and shape[0] // (rounds * 2) >= 1:
        rounds *= 2
    return rounds


def _through_shared_in_rounds(ctx: "KernelLowering", src: Regs, want: Layout, shape: tuple,
                              elem: Optional[ScalarType], rounds: int) -> Regs:
    """``through_shared`` for a tile larger than a program's shared memory: one slice of the
    first dimension a round, each element written and read in its round (its first
    coordinate tested at run time), so the scratch space holds ``1/rounds`` of the tile."""
    b = ctx.b
    t = src.values[0].type
    narrow = isinstance(elem, ScalarType) and elem.is_float and ctx.types.storage(elem) != t
    kept = ctx.types.storage(elem) if narrow else shared_type(t)
    nbytes = llvm_bytes(kept)
    part = (shape[0] // rounds,) + tuple(shape[1:])
    pitch = _pitch(shape, nbytes)
    reserve(ctx, exchange_bytes(part, nbytes) if len(shape) > 1 else part[0] * nbytes)
    base = ctx.smem_base
    height = ir.Constant(I32, part[0])

    def index(c: tuple, first: ir.Value) -> ir.Value:
        """The scratch element of coordinates ``c`` whose first is ``first`` (in the slice)."""
        at = first
        for d in range(1, len(c)):
            at = b.add(b.mul(at, ir.Constant(I32, pitch if d == len(c) - 1 else shape[d])), c[d])
        return at

    def store(value: ir.Value, at: ir.Value) -> None:
        if narrow:
            b.store(ctx.ew.to_storage(elem, value), b.gep(base, [at], source_etype=kept))
        else:
            shared_store(ctx, value, at)

    def load(at: ir.Value) -> ir.Value:
        if narrow:
            return ctx.ew.from_storage(elem, b.load(b.gep(base, [at], source_etype=kept), typ=kept))
        return shared_load(ctx, t, at)

    mine = coords(ctx, src.layout, src.shape)
    theirs = coords(ctx, want, shape)
    values: list = [ir.Constant(t, ir.Undefined)] * register_count(want, shape)
    for r in range(rounds):
        low = ir.Constant(I32, r * part[0])
        ctx.target.barrier(b)
        for i, value in enumerate(src.values):
            first = b.sub(mine[i][0], low)
            with b.if_then(b.icmp_unsigned("<", first, height)):
                store(value, index(mine[i], first))
        ctx.target.barrier(b)
        for i in range(len(values)):
            first = b.sub(theirs[i][0], low)
            here = b.icmp_unsigned("<", first, height)
            got = load(index(theirs[i], b.select(here, first, ir.Constant(I32, 0))))
            values[i] = b.select(here, got, values[i])
    return Regs(want, shape, values)


def convert(ctx: "KernelLowering", regs: Any, want: Layout, elem: Optional[ScalarType] = None) -> Any:
    """``regs`` (of element type ``elem`` where known) in layout ``want`` (themselves when
    already in it)."""
    if regs.layout == want:
        return regs
    return through_shared(ctx, regs, want, regs.shape, elem)
