"""Lowering of the shared-memory pipeline ops (``shared_ops.py``).

Buffers live in a *persistent* region at the start of the kernel's shared memory, one fixed
offset each for the whole kernel; the scratch space other ops use (conversions, reductions,
unpipelined dot operands) starts after it, so a pipelined slot is never overwritten by them.

A copy moves, per thread, the runs of consecutive elements its layout gives it: one
``async_copy`` hook call of ``run * size`` bytes (4, 8 or 16) per run when the axis analysis
proved the run contiguous and aligned, else element by element through registers (a plain
load and a shared store: correct at any alignment, only slower).
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...ir.core import walk
from ...ir.types import elem_type, shape_of
from ..llvm.types import I8, I32
from .layouts import register_indices
from .shared_ops import (WGMMA_B_GROUP, AsyncCommitOp, AsyncCopyOp, AsyncWaitOp, SharedAllocOp,
                         SharedLoadOp)


@dataclass
class SharedView:
    """A tile read in place from shared memory: the address of its first element and the
    elements per row."""

    base: ir.Value
    row: int
    kind: str = "rows"


def plan_persistent_shared(kernel) -> tuple[dict, int]:
    """An offset for every ``shared_alloc`` of ``kernel`` and the bytes they take."""
    offsets, total = {}, 0
    for op in walk(kernel.body):
        if isinstance(op, SharedAllocOp):
            offsets[op] = total
            total += (op.result.type.nbytes + 127) // 128 * 128
    return offsets, total


class SharedLowering:
    """Mixin of ``KernelLowering``: shared_alloc, async_copy, async_commit, async_wait,
    shared_load."""

    def lower_shared_alloc(self, op: SharedAllocOp) -> None:
        offset = self.persistent_offsets[op]
        self.set_result(op, self.entry_b.gep(self.smem, [ir.Constant(I32, offset)], source_etype=I8))

    def slot_address(self, buffer, slot: ir.Value) -> ir.Value:
        t = buffer.type
        base = self.scalar(buffer)
        return self.b.gep(base, [self.b.mul(slot, ir.Constant(I32, t.slot_bytes))], source_etype=I8)

    def lower_async_copy(self, op: AsyncCopyOp) -> None:
        t = op.buffer.type
        storage = self.types.storage(t.elem)
        layout = self.laid.store_layout[op]
        shape = shape_of(op.ptr.type)
        slot = self.slot_address(op.buffer, self.scalar(op.slot))
        ptrs = self.tile(op.ptr, layout).values
        masks = self.tile(op.mask, layout).values if op.mask is not None else None
        width, groups = self.access_groups(op, layout, shape)
        coords = self.coords(layout, shape)
        indices = register_indices(layout, shape)
        nbytes = width * t.elem.nbytes
        asynchronous = self.target.has_async_copy and nbytes in (4, 8, 16)
        for group in groups:
            first = group[0]
            if self.register_is_replica(layout, shape, indices[first]):
                continue   # another register of this thread copies the same element
            mask = masks[first] if masks is not None else None
            if asynchronous:
                dst = self.slot_element(t, slot, coords[first], storage)
                self.target.async_copy(self.b, dst, ptrs[first], nbytes, mask)
                continue
            for i in group:
                dst = self.slot_element(t, slot, coords[i], storage)
                m = masks[i] if masks is not None else None
                value = self.guarded(m, lambda i=i: [self.b.load(ptrs[i], typ=storage)],
                                     [self.zero_of(storage)] if m is not None else [])[0]
                self.b.store(value, dst)

    def slot_element(self, t, slot: ir.Value, coord: tuple, storage: ir.Type) -> ir.Value:
        """The address of element ``coord`` (i32 values) in a slot of a buffer of type ``t``
        (its ``kind`` says where elements live: see ``SharedBufferType``)."""
        if t.kind == "rows":
            return self.shared_element(slot, coord, t.row, storage)
        b = self.b
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        # 8 x 8 core matrices of 16-byte rows: (row, col) of the core-matrix grid, strides
        # between neighbouring core matrices along each
        if t.kind == "wgmma-a":          # (m, k): K-major, rows permuted
            row, col = self.wgmma_row(coord[0], t.warps), coord[1]
            row_stride, col_stride = 16 * t.shape[1], 128
        else:                            # "wgmma-b", (k, n): MN-major
            row, col = coord
            row_stride, col_stride = t.shape[1] // 8 * WGMMA_B_GROUP, WGMMA_B_GROUP
        offset = b.add(b.add(b.mul(b.lshr(row, k32(3)), k32(row_stride)),
                             b.mul(b.lshr(col, k32(3)), k32(col_stride))),
                       b.add(b.mul(b.and_(row, k32(7)), k32(16)), b.mul(b.and_(col, k32(7)), k32(2))))
        return b.gep(slot, [offset], source_etype=I8)

    def wgmma_row(self, m: ir.Value, warps: int) -> ir.Value:
        """``shared_ops.wgmma_row`` on an i32 value (``warps`` a power of two)."""
        b = self.b
        k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        rep, rest = b.udiv(m, k32(8 * warps)), b.urem(m, k32(8 * warps))
        warp, g = b.lshr(rest, k32(3)), b.and_(rest, k32(7))
        tile, half = b.lshr(rep, k32(1)), b.and_(rep, k32(1))
        group, w = b.lshr(warp, k32(2)), b.and_(warp, k32(3))
        block = b.add(b.mul(tile, k32(warps // 4)), group)
        return b.add(b.add(b.mul(block, k32(64)), b.mul(w, k32(16))), b.add(b.mul(half, k32(8)), g))

    def shared_element(self, slot: ir.Value, coord: tuple, row: int, storage: ir.Type) -> ir.Value:
        b = self.b
        index = coord[-1]
        if len(coord) == 2:
            index = b.add(b.mul(coord[0], ir.Constant(I32, row)), coord[1])
        return b.gep(slot, [index], source_etype=storage)

    def lower_async_commit(self, op: AsyncCommitOp) -> None:
        self.target.async_commit(self.b)

    def lower_async_wait(self, op: AsyncWaitOp) -> None:
        self.target.async_wait(self.b, op.pending)
        if op.proxy_fence:
            self.target.fence_proxy_async(self.b)
        if op.barrier:
            self.target.barrier(self.b)

    def lower_shared_load(self, op: SharedLoadOp) -> None:
        self.shared_views[op.result] = SharedView(self.slot_address(op.buffer, self.scalar(op.slot)),
                                                  op.buffer.type.row, op.buffer.type.kind)
        if elem_type(op.result.type).nbytes != 2:
            self.fail(op, "shared_load of a non-16-bit tile")  # the pipeline pass never makes one
