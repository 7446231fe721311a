"""The lowering of the ``nvidia`` dialect's ops, and what copies by box add to a kernel.

``BoxCopyKernel`` is the dialect's ``KernelExtension``: before the kernel's function exists it
plans, from the kernel's ``nvidia.box_copy`` and ``nvidia.box_store`` ops, the maps their
copies go through (``tma.TensorCopies.plan``; none with debug: checked mode reads by thread),
one kernel parameter each, after the kernel's own; where some copy into a pipeline slot goes
by box, the copy unit's barrier ring takes ``BOX_STATE_BYTES`` of shared memory after the
buffers (which the pipelines left free: ``reserved_shared``), is set up at the kernel's start,
and every ``nvidia.async_commit`` and ``nvidia.async_wait`` tracks it.  The maps reach the
launcher as ``metadata["box_maps"]``.

A copy or store that was not planned lowers as core's ``async_copy`` or ``store`` does (by
thread); a box found in pointers is copied by box only where its ``box_exact`` holds.
"""
from __future__ import annotations

from typing import Any, Optional

from llvmlite import ir

from anytile.codegen.gpu.dialects import KernelExtension
from anytile.codegen.gpu.memory import lower_store
from anytile.codegen.gpu.shared import copy_by_thread, slot_address
from anytile.ir import walk
from anytile.ir.types import TileType

from .box_maps import BoxMap, box_map_metadata
from .dialect import NVIDIA, BoxCommitOp, BoxCopyOp, BoxLoadOp, BoxStoreOp, FencedWaitOp

__all__ = ["BOX_STATE_BYTES", "BoxCopyKernel", "LOWERINGS", "reserved_shared"]

#: shared memory kept free for the copy unit's completion tracking where a copy could go by
#: box (``TensorCopies.shared_bytes``, rounded up)
BOX_STATE_BYTES = 128


def reserved_shared(kernel: Any) -> int:
    """What the pipelines leave free, once for the whole kernel, where some load could be
    copied by box (``BOX_STATE_BYTES``)."""
    return BOX_STATE_BYTES if any(isinstance(op, BoxLoadOp) for op in walk(kernel.body)) else 0


class BoxCopyKernel(KernelExtension):
    """One kernel's copies by box (the module docstring): ``maps`` and their ``params``,
    ``copying`` (some copy into a slot goes by box), and the copy unit's tracking state --
    ``barriers`` (its shared memory), ``groups`` and ``waited`` (the groups committed and
    waited for, as ``i32`` stack slots)."""

    def __init__(self, copies: Any, debug: bool) -> None:
        self.copies = copies
        self.debug = debug
        self.maps: list[BoxMap] = []
        self.map_of: dict = {}          # box copy or store -> indices into maps
        self.params: list = []
        self.copying = False
        self.barriers: Optional[ir.Value] = None
        self.groups: Optional[ir.Value] = None
        self.waited: Optional[ir.Value] = None

    def parameters(self, ctx: Any) -> list[ir.Type]:
        if self.debug:
            return []
        fn = ctx.fn_ir
        for op in walk(fn.body):
            if isinstance(op, BoxCopyOp):
                planned = self.copies.plan(op, fn)
            elif isinstance(op, BoxStoreOp):
                planned = self.copies.plan_store(op, fn)
            else:
                continue
            for m in planned:
                if m not in self.maps:
                    self.maps.append(m)
            if planned:
                self.map_of[op] = [self.maps.index(m) for m in planned]
        # copies into pipeline slots complete on the copy unit's tracking; box stores need none
        self.copying = any(isinstance(op, BoxCopyOp) for op in self.map_of)
        return [self.copies.parameter_type() for _ in self.maps]

    def declare(self, fn: ir.Function, first: int) -> None:
        for i in range(len(self.maps)):
            self.copies.declare(fn, first + i)
        self.params = list(fn.args[first:first + len(self.maps)])

    def shared_bytes(self) -> int:
        if not self.copying:
            return 0
        assert self.copies.shared_bytes <= BOX_STATE_BYTES, "the pipelines keep less room"
        return BOX_STATE_BYTES

    def place_shared(self, address: ir.Value) -> None:
        self.barriers = address

    def start(self, ctx: Any) -> None:
        if self.copying:
            self.copies.start(ctx, self)

    def buffers_reused(self, ctx: Any, b: ir.IRBuilder) -> None:
        # the buffers are next refilled by the copy unit (the async proxy)
        if self.copying:
            ctx.target.fence_async_shared(b)

    def metadata(self) -> dict:
        return {"box_maps": box_map_metadata(self.maps)} if self.maps else {}

    def maps_of(self, op: Any) -> Optional[list]:
        """``(BoxMap, its kernel parameter)`` of each map ``op`` was planned with, or
        ``None`` when it was not."""
        indices = self.map_of.get(op)
        return None if indices is None else [(self.maps[i], self.params[i]) for i in indices]


def _kernel(ctx: Any) -> Optional[BoxCopyKernel]:
    return ctx.extensions.get(NVIDIA.name)


def lower_box_copy(ctx: Any, op: BoxCopyOp) -> None:
    """Whole boxes by the copy unit where planned; a box found in pointers only where it is
    exactly the tile (``box_exact``, the same in every thread), else by thread."""
    k = _kernel(ctx)
    maps = k.maps_of(op) if k is not None else None
    if maps is None:
        copy_by_thread(ctx, op)
        return
    slot = slot_address(ctx, op.buffer, ctx.scalar(op.slot))
    if not op.box_exact:
        k.copies.copy(ctx, k, op, maps, slot)
        return
    with ctx.b.if_else(ctx.scalar(op.box_exact[0])) as (boxed, by_thread):
        with boxed:
            k.copies.copy(ctx, k, op, maps, slot)
        with by_thread:
            ctx.scopes.append({})        # what the copy computes stays in its branch
            try:
                copy_by_thread(ctx, op)
            finally:
                ctx.scopes.pop()


def lower_box_store(ctx: Any, op: BoxStoreOp) -> None:
    """The box by the copy unit where planned (and its ``store`` takes it), else core's."""
    k = _kernel(ctx)
    maps = k.maps_of(op) if k is not None else None
    if maps is not None and isinstance(op.ptr.type, TileType) and k.copies.store(
            ctx, op, maps, ctx.tile(op.value, ctx.laid.store_layout[op])):
        return
    lower_store(ctx, op)


def lower_box_commit(ctx: Any, op: BoxCommitOp) -> None:
    ctx.target.async_commit(ctx.b)
    k = _kernel(ctx)
    if k is not None and k.copying:
        k.copies.commit(ctx, k)


def lower_fenced_wait(ctx: Any, op: FencedWaitOp) -> None:
    ctx.target.async_wait(ctx.b, op.pending)
    k = _kernel(ctx)
    if k is not None and k.copying:
        k.copies.wait(ctx, k, op.pending)
    if op.proxy_fence:
        ctx.target.fence_async_shared(ctx.b)
    if op.barrier:
        ctx.target.barrier(ctx.b)


#: the dialect's lowering-table entries (``nvidia.box_load`` lowers as core's ``load``)
LOWERINGS = {BoxCopyOp: lower_box_copy, BoxStoreOp: lower_box_store,
             BoxCommitOp: lower_box_commit, FencedWaitOp: lower_fenced_wait}
