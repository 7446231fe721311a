"""Ops where threads exchange data: reductions and scans (layout conversions are in
``scratch.py``, ``dot`` in ``dot.py``).

* reduce: combine a thread's registers along the axis, then across lanes with butterfly
  shuffles (the target's ``shuffle_xor``, only over lanes holding different elements: any
  warp size), then across warps through shared memory; every thread that held part of a row
  ends with the whole result (a ``SliceLayout`` of the operand's layout);
* scan: convert to a layout holding the whole scanned axis in each thread, scan there, convert
  back.

Every use of shared memory starts with a barrier, so consecutive uses may share addresses.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ...ir import ops
from ...ir.types import shape_of
from ..llvm.types import I32, I64
from .layouts import BlockedLayout, Layout, SliceLayout, blocked_of, default_blocked, dim_registers, register_indices
from .registers import Regs, coords, linear_index
from .scratch import convert, llvm_bytes, reserve, shared_load, shared_store, shared_type

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["LOWERINGS", "shuffle_xor", "apply_region"]


# -- combine regions ---------------------------------------------------------------------------
def apply_region(ctx: "KernelLowering", block: Any, args: list) -> list:
    """Lower ``block`` (a combine region) with its arguments bound to ``args``; returns the
    scalars it yields."""
    ctx.scopes.append({})
    try:
        for a, v in zip(block.args, args):
            ctx.bind(a, v)
        ctx.lower_block(block)
        return [ctx.scalar(v) for v in block.terminator.values]
    finally:
        ctx.scopes.pop()


def _combine(ctx: "KernelLowering", op: ops.Op, lhs: list, rhs: list) -> list:
    return apply_region(ctx, op.combine, list(lhs) + list(rhs))


def shuffle_xor(ctx: "KernelLowering", v: ir.Value, mask: int) -> ir.Value:
    """The target's ``shuffle_xor`` of a value of any scalar type (as i32 pieces)."""
    b, t = ctx.b, v.type
    if t == I32:
        return ctx.target.shuffle_xor(b, v, mask)
    if isinstance(t, ir.PointerType):
        return b.inttoptr(shuffle_xor(ctx, b.ptrtoint(v, I64), mask), t)
    if isinstance(t, ir.FloatType):
        return b.bitcast(shuffle_xor(ctx, b.bitcast(v, I32), mask), t)
    if isinstance(t, ir.DoubleType):
        return b.bitcast(shuffle_xor(ctx, b.bitcast(v, I64), mask), t)
    if isinstance(t, ir.IntType) and t.width == 64:
        lo = shuffle_xor(ctx, b.trunc(v, I32), mask)
        hi = shuffle_xor(ctx, b.trunc(b.lshr(v, ir.Constant(I64, 32)), I32), mask)
        return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
    if isinstance(t, ir.IntType):
        return b.trunc(shuffle_xor(ctx, b.zext(v, I32), mask), t)
    raise NotImplementedError(f"shuffle of {t}")


# -- reduce ------------------------------------------------------------------------------------
def lower_reduce(ctx: "KernelLowering", op: ops.ReduceOp) -> None:
    first = ctx.tile(op.srcs[0])
    layout, shape, axis = first.layout, first.shape, op.axis
    srcs = [first] + [ctx.tile(s, layout) for s in op.srcs[1:]]
    root, root_shape, dims = blocked_of(layout, shape)
    ra = dims[axis]
    distinct = min(dim_registers(layout, shape)[axis], shape[axis])
    out_shape = shape[:axis] + shape[axis + 1:]
    out_layout = SliceLayout(layout, axis)
    groups: dict[tuple, list[int]] = {}
    for i, j in enumerate(register_indices(layout, shape)):
        if j[axis] < distinct:
            groups.setdefault(j[:axis] + j[axis + 1:], []).append(i)
    keys = register_indices(out_layout, out_shape) if out_shape else [()]
    partial: dict[tuple, list] = {}
    for key in keys:
        regs = groups[key]
        acc = [s.values[regs[0]] for s in srcs]
        for i in regs[1:]:
            acc = _combine(ctx, op, acc, [s.values[i] for s in srcs])
        partial[key] = acc
    bit, stride = 1, root.lane_stride(ra)
    while bit < root.distinct_lanes(root_shape, ra):
        for key in keys:
            other = [shuffle_xor(ctx, v, stride * bit) for v in partial[key]]
            partial[key] = _combine(ctx, op, partial[key], other)
        bit *= 2
    n_warps = root.distinct_warps(root_shape, ra)
    if n_warps > 1:
        partial = _reduce_across_warps(ctx, op, partial, keys, out_layout, out_shape, root, ra, n_warps)
    for r in range(len(op.results)):
        if out_shape:
            regs = Regs(out_layout, out_shape, [partial[k][r] for k in keys])
            ctx.set_result(op, convert(ctx, regs, op.results[r].type.layout), r)
        else:
            ctx.set_result(op, partial[()][r], r)


def _reduce_across_warps(ctx: "KernelLowering", op: ops.Op, partial: dict, keys: list,
                         out_layout: Layout, out_shape: tuple, root: BlockedLayout, ra: int,
                         n_warps: int) -> dict:
    b = ctx.b
    numel = 1
    for s in out_shape:
        numel *= s
    sizes = [llvm_bytes(shared_type(v.type)) for v in partial[keys[0]]]
    regions, offset = [], 0
    for size in sizes:
        regions.append(offset)
        offset += (numel * n_warps * size + 15) // 16 * 16
    reserve(ctx, offset)
    warp_a = b.and_(b.udiv(ctx.warp, ir.Constant(I32, root.warp_stride(ra))), ir.Constant(I32, n_warps - 1))
    elems = [linear_index(b, c, out_shape) for c in coords(ctx, out_layout, out_shape)] \
        if out_shape else [ir.Constant(I32, 0)]
    ctx.target.barrier(b)
    for key, e in zip(keys, elems):
        slot = b.add(b.mul(e, ir.Constant(I32, n_warps)), warp_a)
        for v, region in zip(partial[key], regions):
            shared_store(ctx, v, slot, region)
    ctx.target.barrier(b)
    out = {}
    for key, e in zip(keys, elems):
        base = b.mul(e, ir.Constant(I32, n_warps))
        acc = None
        for w in range(n_warps):
            slot = b.add(base, ir.Constant(I32, w))
            vals = [shared_load(ctx, v.type, slot, region) for v, region in zip(partial[key], regions)]
            acc = vals if acc is None else _combine(ctx, op, acc, vals)
        out[key] = acc
    return out


# -- scan --------------------------------------------------------------------------------------
def _axis_in_thread_layout(ctx: "KernelLowering", shape: tuple, axis: int) -> BlockedLayout:
    flat = tuple(1 if d == axis else s for d, s in enumerate(shape))
    base = default_blocked(flat, ctx.laid.num_warps, ctx.laid.warp_size)
    spt = list(base.size_per_thread)
    spt[axis] = shape[axis]
    return BlockedLayout(tuple(spt), base.threads_per_warp, base.warps_per_cta, base.order)


def lower_scan(ctx: "KernelLowering", op: ops.ScanOp) -> None:
    shape, axis = shape_of(op.srcs[0].type), op.axis
    layout = _axis_in_thread_layout(ctx, shape, axis)
    srcs = [ctx.tile(s, layout) for s in op.srcs]
    indices = register_indices(layout, shape)
    groups: dict[tuple, list[int]] = {}
    for i, j in enumerate(indices):
        groups.setdefault(j[:axis] + j[axis + 1:], []).append(i)
    results = [[None] * len(indices) for _ in srcs]
    for regs in groups.values():
        order = list(reversed(regs)) if op.reverse else regs
        acc = None
        for i in order:
            vals = [s.values[i] for s in srcs]
            acc = vals if acc is None else _combine(ctx, op, acc, vals)
            for r, v in enumerate(acc):
                results[r][i] = v
    for r, res in enumerate(op.results):
        regs = Regs(layout, shape, results[r])
        ctx.set_result(op, convert(ctx, regs, res.type.layout), r)


LOWERINGS = {ops.ReduceOp: lower_reduce, ops.ScanOp: lower_scan}
