"""Lowering of the shared-memory pipeline ops (``shared_ops.py``).

Buffers live in a *persistent* region at the start of the kernel's shared memory, one fixed
offset each for the whole kernel, where buffers whose live ranges do not overlap (two
pipelined loops one after the other) share bytes (``plan_persistent_shared``); the scratch
space other ops use (conversions, reductions, unpipelined dot operands) starts after it, so a
pipelined slot is never overwritten by them -- except where ``busy_buffer_ops`` shows no
buffer holding data, where a layout exchange (or a backend's own use of shared memory) may
take the buffers' place.  A buffer that takes bytes an earlier loop used is handed over
before its first copy (``reusing_allocs``): that loop has drained behind a barrier, then the
threads' accesses are fenced for copies a backend makes outside them, and a barrier follows.

A copy moves, per thread, the runs of consecutive elements its layout gives it.  Where the
target has an asynchronous copy of the run's size (``GpuTarget.async_copy_sizes``) and the
axis analysis proved the run contiguous and aligned, one ``async_copy`` per run; else the run
goes through registers: a (vector) load, masked-off elements as zeros, and a shared-memory
store -- the following ``async_wait``'s barrier then publishes it.  Where an element of a
slot lives is its buffer layout's business (``SharedBufferLayout.emit_address``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ...ir import ops
from ...ir.nodes import walk
from ...ir.types import elem_type, shape_of
from ..llvm.types import I8, I32
from .layouts import register_indices
from .memory import access_groups, guarded, zero_of
from .registers import coords, register_is_replica
from .shared_ops import (AsyncCommitOp, AsyncCopyOp, AsyncWaitOp, SharedAllocOp, SharedBufferLayout,
                         SharedLoadOp, slot_element)

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["LOWERINGS", "SharedView", "plan_persistent_shared", "buffer_live_ranges", "held_across",
           "reusing_allocs", "shared_alignment", "busy_buffer_ops", "copy_by_thread", "slot_address"]


@dataclass
class SharedView:
    """A tile read in place from shared memory: the address of its slot and its layout."""

    base: ir.Value
    layout: SharedBufferLayout


def plan_persistent_shared(kernel: Any) -> tuple[dict, int]:
    """An offset for every ``shared_alloc`` of ``kernel`` (a multiple of its layout's
    ``alignment``, the most aligned first) and the bytes they take (a multiple of 128).
    Buffers whose live ranges (``buffer_live_ranges``) do not overlap may share bytes: each
    takes the lowest offset clear of the buffers placed before it that are live with it, so
    two pipelined loops one after the other take about one loop's bytes."""
    ranges = buffer_live_ranges(kernel)
    offsets: dict = {}
    for op in sorted(ranges, key=lambda a: -a.result.type.alignment):
        align, size = op.result.type.alignment, op.result.type.nbytes
        live = [(offsets[o], offsets[o] + o.result.type.nbytes) for o in offsets
                if _overlap(ranges[o], ranges[op])]
        at = 0
        while True:
            at = (at + align - 1) // align * align
            clash = [end for start, end in live if start < at + size and at < end]
            if not clash:
                break
            at = max(clash)
        offsets[op] = at
    total = max([offsets[o] + o.result.type.nbytes for o in offsets], default=0)
    return offsets, (total + 127) // 128 * 128


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def buffer_live_ranges(kernel: Any) -> dict:
    """The live range of each ``shared_alloc`` of ``kernel``: the first and last positions in
    ``walk(kernel.body)`` (parents before children) of the ops while its buffer may hold data
    or be written (``_held``).  Control flow is structured, so two buffers whose ranges do not
    overlap are never in use at once."""
    position = {op: i for i, op in enumerate(walk(kernel.body))}
    ranges: dict = {}
    for op in position:
        for region in op.regions:
            _ranges_in(region, position, ranges)
    _ranges_in(kernel.body, position, ranges)
    return ranges


def _ranges_in(block: Any, position: dict, ranges: dict) -> None:
    ops_ = block.ops
    for i, op in enumerate(ops_):
        if isinstance(op, SharedAllocOp):
            last = ops_[_held(block, i)]
            ranges[op] = (position[op], position[last] + sum(1 for r in last.regions for _ in walk(r)))


def reusing_allocs(kernel: Any, offsets: dict) -> set:
    """The ``shared_alloc`` ops of ``kernel`` whose buffers share bytes (at ``offsets``) with
    a buffer whose live range ended before theirs began (one an earlier pipelined loop
    filled), less those right after another such alloc: one hand-over serves a run of them."""
    ranges = buffer_live_ranges(kernel)
    position = {op: i for i, op in enumerate(walk(kernel.body))}
    loops = [(position[op], position[op] + sum(1 for r in op.regions for _ in walk(r)))
             for op in position if isinstance(op, (ops.ForOp, ops.WhileOp))]

    def before(o: SharedAllocOp, op: SharedAllocOp) -> bool:
        """Whether ``o``'s buffer may be used before ``op``'s: earlier in the kernel, or
        later in a loop around both (the previous iteration's)."""
        if ranges[o][1] < ranges[op][0]:
            return True
        first, last = min(ranges[o][0], ranges[op][0]), max(ranges[o][1], ranges[op][1])
        return not _overlap(ranges[o], ranges[op]) and \
            any(start < first and last <= end for start, end in loops)

    def reuses(op: SharedAllocOp) -> bool:
        start, end = offsets[op], offsets[op] + op.result.type.nbytes
        return any(o is not op and before(o, op) and offsets[o] < end and
                   start < offsets[o] + o.result.type.nbytes for o in ranges)
    out: set = set()
    for block in [kernel.body] + [r for op in walk(kernel.body) for r in op.regions]:
        handed = False          # a run of allocs before op has one
        for op in block.ops:
            if not isinstance(op, SharedAllocOp):
                handed = False
            elif not handed and reuses(op):
                out.add(op)
                handed = True
    return out


def held_across(kernel: Any, op: Any) -> int:
    """Where the buffers of ``kernel`` live at ``op`` (their live ranges hold it) end, as
    ``plan_persistent_shared`` places them now: the bytes below are not free to what a
    pipeline puts around ``op`` (a hole a dead buffer left between live ones included)."""
    at = next(i for i, x in enumerate(walk(kernel.body)) if x is op)
    offsets, _ = plan_persistent_shared(kernel)
    ranges = buffer_live_ranges(kernel)
    return max([offsets[a] + a.result.type.nbytes for a, (first, last) in ranges.items()
                if first <= at <= last], default=0)


def _held(block: Any, i: int) -> int:
    """The index in ``block`` of the last op while the buffer of the ``shared_alloc`` at
    ``i`` may hold data or be written: the last op that reads the buffer or a view of it
    (a pipelined loop), then the drain after it (``async_wait``)."""
    ops_ = block.ops
    buffer = ops_[i].result
    views = {v.result for v in walk(block) if isinstance(v, SharedLoadOp) and v.buffer is buffer}
    end = i
    for j in range(i + 1, len(ops_)):
        inner = [ops_[j], *(x for r in ops_[j].regions for x in walk(r))]
        if any(v is buffer or v in views for x in inner for v in x.operands):
            end = j
    while end + 1 < len(ops_) and isinstance(ops_[end + 1], AsyncWaitOp):
        end += 1
    return end


def busy_buffer_ops(kernel: Any) -> set:
    """The ops of ``kernel`` (nested ones included) while some ``shared_alloc``'s buffer may
    hold data or be written: in the alloc's block, from the alloc through the last op that
    reads the buffer or a view of it (a pipelined loop), and the drain after it
    (``async_wait``).  Elsewhere every buffer is free for the scratch space to reuse."""
    busy: set = set()

    def scan(block: Any) -> None:
        ops_ = block.ops
        for i, op in enumerate(ops_):
            if isinstance(op, SharedAllocOp):
                for held in ops_[i:_held(block, i) + 1]:
                    busy.add(held)
                    busy.update(x for r in held.regions for x in walk(r))
            for region in op.regions:
                scan(region)
    scan(kernel.body)
    return busy


def shared_alignment(kernel: Any) -> int:
    """The alignment the start of the kernel's shared memory needs (its buffers' largest)."""
    return max([16] + [op.result.type.alignment for op in walk(kernel.body)
                       if isinstance(op, SharedAllocOp)])


def lower_shared_alloc(ctx: "KernelLowering", op: SharedAllocOp) -> None:
    offset = ctx.persistent_offsets[op]
    ctx.set_result(op, ctx.entry_b.gep(ctx.smem, [ir.Constant(I32, offset)], source_etype=I8))
    if op in reusing_allocs(ctx.fn_ir, ctx.persistent_offsets):
        # an earlier loop's ordinary accesses of these bytes end before this loop's copies
        # (which a backend's may make outside the threads), as an exchange in them does
        ctx.buffers_reused(ctx.b)
        ctx.target.barrier(ctx.b)


def slot_address(ctx: "KernelLowering", buffer: Any, slot: ir.Value) -> ir.Value:
    """The address of slot ``slot`` (an i32) of the shared buffer ``buffer``."""
    t = buffer.type
    return ctx.b.gep(ctx.scalar(buffer), [ctx.b.mul(slot, ir.Constant(I32, t.slot_bytes))],
                     source_etype=I8)


def copy_by_thread(ctx: "KernelLowering", op: AsyncCopyOp) -> None:
    """Each thread copies its runs of the tile (the module docstring): ``async_copy``'s
    lowering."""
    b = ctx.b
    t = op.buffer.type
    storage = ctx.types.storage(t.elem)
    layout = ctx.laid.store_layout[op]
    shape = shape_of(op.ptr.type)
    slot = slot_address(ctx, op.buffer, ctx.scalar(op.slot))
    ptrs = ctx.tile(op.ptr, layout).values
    masks = ctx.tile(op.mask, layout).values if op.mask is not None else None
    width, groups = access_groups(ctx, op, layout, shape)
    along = 0 if op in ctx.laid.transposed else len(shape) - 1
    if width > 1 and t.layout.contiguous_dim(shape) != along:
        # a run of global memory that is not one in the slot: element by element
        width, groups = 1, [[i] for group in groups for i in group]
    where = coords(ctx, layout, shape)
    indices = register_indices(layout, shape)
    nbytes = width * t.elem.nbytes
    asynchronous = nbytes in ctx.target.async_copy_sizes
    for group in groups:
        first = group[0]
        if register_is_replica(layout, shape, indices[first]):
            continue   # another register of this thread copies the same element
        mask = masks[first] if masks is not None else None
        if asynchronous:
            dst = t.layout.emit_address(b, slot, where[first], t.shape, storage)
            ctx.target.async_copy(b, dst, ptrs[first], nbytes, mask)
        elif width > 1:
            _copy_run(ctx, t, slot, where[first], ptrs[first], width, storage, mask)
        else:
            _copy_elements(ctx, t, slot, [where[i] for i in group], [ptrs[i] for i in group],
                           [masks[i] for i in group] if masks is not None else None, storage)


def _copy_run(ctx: "KernelLowering", t: Any, slot: ir.Value, coord: tuple, ptr: ir.Value,
              width: int, storage: ir.Type, mask: Any) -> None:
    """A run of ``width`` elements through registers: one vector load, one vector store (the
    run is contiguous and aligned in global memory and in its slot)."""
    b = ctx.b
    vt = ir.VectorType(storage, width)

    def load() -> list:
        vec = b.load(ptr, typ=vt)
        vec.align = width * t.elem.nbytes
        return [vec]
    value = guarded(ctx, mask, load, [ir.Constant(vt, None)] if mask is not None else [])[0]
    b.store(value, t.layout.emit_address(b, slot, coord, t.shape, storage)).align = width * t.elem.nbytes


def _copy_elements(ctx: "KernelLowering", t: Any, slot: ir.Value, where: list, ptrs: list,
                   masks: Any, storage: ir.Type) -> None:
    """Element by element through registers (correct at any alignment, only slower)."""
    b = ctx.b
    for k, (coord, ptr) in enumerate(zip(where, ptrs)):
        dst = t.layout.emit_address(b, slot, coord, t.shape, storage)
        m = masks[k] if masks is not None else None
        value = guarded(ctx, m, lambda ptr=ptr: [b.load(ptr, typ=storage)],
                        [zero_of(storage)] if m is not None else [])[0]
        b.store(value, dst)


def lower_async_commit(ctx: "KernelLowering", op: AsyncCommitOp) -> None:
    ctx.target.async_commit(ctx.b)


def lower_async_wait(ctx: "KernelLowering", op: AsyncWaitOp) -> None:
    ctx.target.async_wait(ctx.b, op.pending)
    if op.barrier:
        ctx.target.barrier(ctx.b)


def lower_shared_load(ctx: "KernelLowering", op: SharedLoadOp) -> None:
    ctx.shared_views[op.result] = SharedView(slot_address(ctx, op.buffer, ctx.scalar(op.slot)),
                                             op.view_layout)
    elem = elem_type(op.result.type)
    if not slot_element(elem):
        # the pipeline pass never makes one
        ctx.fail(op, f"shared_load of a tile of {elem} (16-bit, float8 or int8 elements only)")


LOWERINGS = {SharedAllocOp: lower_shared_alloc, AsyncCopyOp: copy_by_thread,
             AsyncCommitOp: lower_async_commit, AsyncWaitOp: lower_async_wait,
             SharedLoadOp: lower_shared_load}
