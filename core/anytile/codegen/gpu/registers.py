"""Where a thread's registers sit: the LLVM side of ``layouts.py``.

A thread's register ``j`` of a tile in a blocked layout holds the element at
``base(j) + thread_offset`` along each dimension (wrapped over smaller tiles); the offsets
depend only on the thread, so they are computed once per kernel, in the entry block, and
cached on the lowering context.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from llvmlite import ir

from ..llvm.types import I32
from .layouts import BlockedLayout, Layout, blocked_of, register_indices

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["Regs", "thread_offset", "owner_predicate", "register_is_replica", "coords",
           "linear_index", "warp_coordinate", "first_thread"]


@dataclass
class Regs:
    """The registers one thread holds of a tile, in register order of ``layout``."""

    layout: Layout
    shape: tuple[int, ...]
    values: list


def _lane_and_warp_coords(ctx: "KernelLowering", root: BlockedLayout, d: int) -> tuple:
    b = ctx.entry_b
    lane_d = b.and_(b.udiv(ctx.lane, ir.Constant(I32, root.lane_stride(d))),
                    ir.Constant(I32, root.threads_per_warp[d] - 1))
    warp_d = b.and_(b.udiv(ctx.warp, ir.Constant(I32, root.warp_stride(d))),
                    ir.Constant(I32, root.warps_per_cta[d] - 1))
    return lane_d, warp_d


def thread_offset(ctx: "KernelLowering", root: BlockedLayout, root_shape: tuple, d: int) -> ir.Value:
    """This thread's offset along root dimension ``d`` (computed once, in the entry)."""
    key = ("off", root, root_shape, d)
    found = ctx.thread_consts.get(key)
    if found is not None:
        return found
    b = ctx.entry_b
    spt, tpw, size = root.size_per_thread[d], root.threads_per_warp[d], root_shape[d]
    lane_d, warp_d = _lane_and_warp_coords(ctx, root, d)
    off = b.add(b.mul(lane_d, ir.Constant(I32, spt)), b.mul(warp_d, ir.Constant(I32, spt * tpw)))
    if size >= root.cta_tile(d):
        out = off
    elif spt <= size:
        out = b.and_(off, ir.Constant(I32, size - 1))
    else:
        out = ir.Constant(I32, 0)
    ctx.thread_consts[key] = out
    return out


def owner_predicate(ctx: "KernelLowering", layout: Layout, shape: tuple) -> Optional[ir.Value]:
    """True in exactly one of the threads holding each element (None: no replicas)."""
    root, root_shape, _ = blocked_of(layout, shape)
    key = ("owner", root, root_shape)
    if key in ctx.thread_consts:
        return ctx.thread_consts[key]
    b = ctx.entry_b
    pred = None
    for d in range(root.rank):
        if root_shape[d] >= root.cta_tile(d):
            continue
        spt, tpw = root.size_per_thread[d], root.threads_per_warp[d]
        lane_d, warp_d = _lane_and_warp_coords(ctx, root, d)
        off = b.add(b.mul(lane_d, ir.Constant(I32, spt)), b.mul(warp_d, ir.Constant(I32, spt * tpw)))
        ok = b.icmp_unsigned("<", off, ir.Constant(I32, max(root_shape[d], spt)))
        pred = ok if pred is None else b.and_(pred, ok)
    ctx.thread_consts[key] = pred
    return pred


def register_is_replica(layout: Layout, shape: tuple, j: tuple) -> bool:
    """Whether register ``j`` repeats an element another register of the thread holds."""
    root, root_shape, dims = blocked_of(layout, shape)
    return any(root.size_per_thread[d] > root_shape[d] and jd % root.size_per_thread[d] >= root_shape[d]
               for jd, d in zip(j, dims))


def coords(ctx: "KernelLowering", layout: Layout, shape: tuple) -> list[tuple]:
    """Per register, its element coordinates as i32 values."""
    root, root_shape, dims = blocked_of(layout, shape)
    b = ctx.b
    offsets = [thread_offset(ctx, root, root_shape, d) for d in dims]
    out = []
    for j in register_indices(layout, shape):
        coord = []
        for jd, d, off in zip(j, dims, offsets):
            spt, size = root.size_per_thread[d], root_shape[d]
            base = root.base(root_shape, d, jd) if size >= root.cta_tile(d) else (
                jd if spt <= size else jd % size)
            coord.append(off if base == 0 else b.add(off, ir.Constant(I32, base)))
        out.append(tuple(coord))
    return out


def linear_index(b: ir.IRBuilder, coord: tuple, shape: tuple) -> ir.Value:
    """The row-major index of ``coord`` (i32 values) in a tile of ``shape``."""
    idx = None
    stride = 1
    for c, n in zip(reversed(coord), reversed(shape)):
        term = c if stride == 1 else b.mul(c, ir.Constant(I32, stride))
        idx = term if idx is None else b.add(idx, term)
        stride *= n
    return idx if idx is not None else ir.Constant(I32, 0)


def warp_coordinate(ctx: "KernelLowering", layout: BlockedLayout, d: int) -> ir.Value:
    """This thread's warp index along dimension ``d`` of ``layout`` (emitted here)."""
    b = ctx.b
    return b.and_(b.udiv(ctx.warp, ir.Constant(I32, layout.warp_stride(d))),
                  ir.Constant(I32, layout.warps_per_cta[d] - 1))


def first_thread(ctx: "KernelLowering") -> ir.Value:
    """Whether this is thread 0 of the program (computed once, in the entry)."""
    key = ("first-thread",)
    if key not in ctx.thread_consts:
        ctx.thread_consts[key] = ctx.entry_b.icmp_unsigned("==", ctx.tid, ir.Constant(I32, 0))
    return ctx.thread_consts[key]
