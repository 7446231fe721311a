"""Ops where threads exchange data: reductions and scans (layout conversions are in
``scratch.py``, ``dot`` in ``dot.py``).

* reduce: combine a thread's registers along the axis, then across lanes with butterfly
  shuffles (the target's ``shuffle_xor``, only over lanes holding different elements: any
  warp size), then across warps through shared memory; every thread that held part of a row
  ends with the whole result (a ``SliceLayout`` of the operand's layout);
* scan: convert to a layout spreading the scanned axis over registers, then lanes, then warps
  (the axis fastest); scan each thread's registers, then the threads' totals across lanes with
  shuffles (Kogge-Stone: log2 steps), then the warps' totals through shared memory, and fold
  the prefixes in; convert back.  Combines keep scan order (they need not commute).

Every use of shared memory starts with a barrier, so consecutive uses may share addresses.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ...ir import ops
from ...ir.types import shape_of
from ..llvm.types import I32, I64
from .layouts import BlockedLayout, Layout, SliceLayout, blocked_of, dim_registers, register_indices
from .registers import Regs, coords, linear_index
from .scratch import convert, llvm_bytes, reserve, shared_load, shared_store, shared_type

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["LOWERINGS", "shuffle_xor", "shuffle_idx", "apply_region"]


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
    return _in_i32_pieces(ctx, v, lambda piece: ctx.target.shuffle_xor(ctx.b, piece, mask))


def shuffle_idx(ctx: "KernelLowering", v: ir.Value, lane: ir.Value) -> ir.Value:
    """The target's ``shuffle_idx`` (the value of lane ``lane``) of a value of any scalar type."""
    return _in_i32_pieces(ctx, v, lambda piece: ctx.target.shuffle_idx(ctx.b, piece, lane))


def _in_i32_pieces(ctx: "KernelLowering", v: ir.Value, move: Any) -> ir.Value:
    b, t = ctx.b, v.type
    if t == I32:
        return move(v)
    if isinstance(t, ir.PointerType):
        return b.inttoptr(_in_i32_pieces(ctx, b.ptrtoint(v, I64), move), t)
    if isinstance(t, ir.FloatType):
        return b.bitcast(_in_i32_pieces(ctx, b.bitcast(v, I32), move), t)
    if isinstance(t, ir.DoubleType):
        return b.bitcast(_in_i32_pieces(ctx, b.bitcast(v, I64), move), t)
    if isinstance(t, ir.IntType) and t.width == 64:
        lo = move(b.trunc(v, I32))
        hi = move(b.trunc(b.lshr(v, ir.Constant(I64, 32)), I32))
        return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
    if isinstance(t, ir.IntType):
        return b.trunc(move(b.zext(v, I32)), t)
    if isinstance(t, ir.HalfType):
        return b.bitcast(b.trunc(move(b.zext(b.bitcast(v, ir.IntType(16)), I32)),
                                 ir.IntType(16)), t)
    raise NotImplementedError(f"lane exchange of {t}")


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
def _scan_layout(ctx: "KernelLowering", shape: tuple, axis: int) -> BlockedLayout:
    """The scanned axis fastest: lanes along it first, warps along the other dimensions first,
    and along the axis as many registers as cover it exactly; lanes or warps left over
    replicate."""
    warp_size, num_warps = ctx.laid.warp_size, ctx.laid.num_warps
    rank = len(shape)
    order = (axis,) + tuple(d for d in reversed(range(rank)) if d != axis)
    tpw, wpc, spt = [1] * rank, [1] * rank, [1] * rank
    lanes, warps = warp_size, num_warps
    for d in order:
        take = min(lanes, shape[d])
        tpw[d], lanes = take, lanes // take
    tpw[order[-1] if rank > 1 else axis] *= lanes          # replicas where nothing is left
    # warps along the other dimensions first: a scan inside one warp needs no shared memory
    for d in order[1:] + order[:1]:
        take = min(warps, max(1, shape[d] // tpw[d]))
        wpc[d], warps = take, warps // take
    wpc[order[-1] if rank > 1 else axis] *= warps
    spt[axis] = max(1, shape[axis] // (tpw[axis] * wpc[axis]))
    return BlockedLayout(tuple(spt), tuple(tpw), tuple(wpc), order)


def lower_scan(ctx: "KernelLowering", op: ops.ScanOp) -> None:
    b = ctx.b
    shape, axis, reverse = shape_of(op.srcs[0].type), op.axis, op.reverse
    layout = _scan_layout(ctx, shape, axis)
    srcs = [ctx.tile(s, layout) for s in op.srcs]
    k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
    groups: dict[tuple, list[int]] = {}
    for i, j in enumerate(register_indices(layout, shape)):
        groups.setdefault(j[:axis] + j[axis + 1:], []).append(i)
    # 1. each thread scans its own registers (in scan order)
    local: dict[tuple, dict[int, list]] = {}
    totals: dict[tuple, list] = {}
    for key, regs in groups.items():
        acc, out = None, {}
        for i in (reversed(regs) if reverse else regs):
            vals = [s.values[i] for s in srcs]
            acc = vals if acc is None else _combine(ctx, op, acc, vals)
            out[i] = acc
        local[key], totals[key] = out, acc
    # 2. the threads' totals across the lanes along the axis: an inclusive Kogge-Stone scan
    spt, stride = layout.size_per_thread[axis], layout.lane_stride(axis)
    n_lanes = min(layout.threads_per_warp[axis], max(1, shape[axis] // spt))
    lane_at = b.urem(b.udiv(ctx.lane, k32(stride)), k32(layout.threads_per_warp[axis]))
    lane_pos = b.urem(lane_at, k32(n_lanes))
    if reverse:
        lane_pos = b.sub(k32(n_lanes - 1), lane_pos)
    step = k32(-stride if not reverse else stride)

    def from_lane(values: list, distance: int, valid: ir.Value) -> list:
        source = b.select(valid, b.add(ctx.lane, b.mul(step, k32(distance))), ctx.lane)
        return [shuffle_idx(ctx, v, source) for v in values]
    inclusive = dict(totals)
    d = 1
    while d < n_lanes:
        valid = b.icmp_unsigned(">=", lane_pos, k32(d))
        for key in groups:
            earlier = from_lane(inclusive[key], d, valid)
            combined = _combine(ctx, op, earlier, inclusive[key])
            inclusive[key] = [b.select(valid, c, v) for c, v in zip(combined, inclusive[key])]
        d *= 2
    has_lane_prefix = b.icmp_unsigned(">=", lane_pos, k32(1))
    prefix = {key: from_lane(inclusive[key], 1, has_lane_prefix) for key in groups} \
        if n_lanes > 1 else {}
    has_prefix = has_lane_prefix if n_lanes > 1 else ir.Constant(ir.IntType(1), 0)
    # 3. the warps' totals along the axis, through shared memory
    n_warps = min(layout.warps_per_cta[axis],
                  max(1, shape[axis] // (spt * layout.threads_per_warp[axis])))
    if n_warps > 1:
        prefix, has_prefix = _warp_prefixes(ctx, op, layout, shape, axis, groups, inclusive,
                                            prefix, has_prefix, lane_pos, n_lanes, n_warps)
    # 4. fold each thread's prefix into its registers
    results = [[None] * len(register_indices(layout, shape)) for _ in srcs]
    for key, regs in groups.items():
        for i in regs:
            vals = local[key][i]
            if key in prefix:
                combined = _combine(ctx, op, prefix[key], vals)
                vals = [b.select(has_prefix, c, v) for c, v in zip(combined, vals)]
            for r, v in enumerate(vals):
                results[r][i] = v
    for r, res in enumerate(op.results):
        regs = Regs(layout, shape, results[r])
        ctx.set_result(op, convert(ctx, regs, res.type.layout), r)


def _warp_prefixes(ctx: "KernelLowering", op: ops.ScanOp, layout: BlockedLayout, shape: tuple,
                   axis: int, groups: dict, inclusive: dict, prefix: dict, has_prefix: ir.Value,
                   lane_pos: ir.Value, n_lanes: int, n_warps: int) -> tuple[dict, ir.Value]:
    """Each warp's total (its last lane's inclusive value) goes to shared memory; each thread
    combines the totals of the warps before its own (in scan order) and puts that before its
    lane prefix.  Returns the new prefixes and when they exist."""
    b = ctx.b
    k32 = lambda v: ir.Constant(I32, v)  # noqa: E731
    row_shape = shape[:axis] + shape[axis + 1:]
    numel = 1
    for n in row_shape:
        numel *= n
    first = next(iter(groups))
    sizes = [llvm_bytes(shared_type(v.type)) for v in inclusive[first]]
    regions, offset = [], 0
    for size in sizes:
        regions.append(offset)
        offset += (numel * n_warps * size + 15) // 16 * 16
    reserve(ctx, offset)
    warp_at = b.urem(b.udiv(ctx.warp, k32(layout.warp_stride(axis))), k32(layout.warps_per_cta[axis]))
    warp_pos = b.urem(warp_at, k32(n_warps))
    if op.reverse:
        warp_pos = b.sub(k32(n_warps - 1), warp_pos)
    all_coords = coords(ctx, layout, shape)
    rows = {key: (linear_index(b, all_coords[regs[0]][:axis] + all_coords[regs[0]][axis + 1:],
                               row_shape) if row_shape else k32(0))
            for key, regs in groups.items()}
    last_lane = b.icmp_unsigned("==", lane_pos, k32(n_lanes - 1))
    has_warp_prefix = b.icmp_unsigned(">=", warp_pos, k32(1))
    ctx.target.barrier(b)
    with b.if_then(last_lane):
        for key in groups:
            slot = b.add(b.mul(rows[key], k32(n_warps)), warp_pos)
            for v, region in zip(inclusive[key], regions):
                shared_store(ctx, v, slot, region)
    ctx.target.barrier(b)
    out: dict[tuple, list] = {}
    for key in groups:
        base = b.mul(rows[key], k32(n_warps))
        running, before = None, None
        for w in range(n_warps - 1):       # before = the totals of warps 0 .. warp_pos - 1
            vals = [shared_load(ctx, v.type, b.add(base, k32(w)), region)
                    for v, region in zip(inclusive[key], regions)]
            running = vals if running is None else _combine(ctx, op, running, vals)
            chosen = b.icmp_unsigned("==", warp_pos, k32(w + 1))
            before = running if before is None else \
                [b.select(chosen, r, p) for r, p in zip(running, before)]
        if key in prefix:                  # warps before, then lanes before, in scan order
            both = _combine(ctx, op, before, prefix[key])
            with_warps = [b.select(has_prefix, x, y) for x, y in zip(both, before)]
            out[key] = [b.select(has_warp_prefix, x, y) for x, y in zip(with_warps, prefix[key])]
        else:
            out[key] = before
    return out, b.or_(has_prefix, has_warp_prefix)


LOWERINGS = {ops.ReduceOp: lower_reduce, ops.ScanOp: lower_scan}
