"""Global memory ops of the GPU lowering: vectorised, masked loads and stores, and atomics.

A thread's registers along the fastest dimension come in runs of ``size_per_thread``
consecutive elements; when the axis analysis proved ``vector`` consecutive, aligned
addresses and a mask uniform over them (``assign.py`` recorded the width), a run is read or
written with one ``<vector x T>`` access (one 16-byte load for four floats).  A masked access
is a branch around it (the backend turns it into a predicated instruction); masked-off
registers of a load take ``other``.  Replicated elements are stored and updated by one thread
only; atomics go through the target's ``atomic_rmw``/``atomic_cas`` hooks.
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Optional

from llvmlite import ir

from ...ir import ops
from ...ir.types import TileType, elem_type, shape_of
from ..llvm.atomics import cas_loop
from ..llvm.types import I32
from .layouts import BlockedLayout, Layout, coordinates, register_indices
from .registers import Regs, first_thread, owner_predicate, register_is_replica
from .scratch import broadcast_from_first_thread

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["LOWERINGS", "access_groups", "predicate", "guarded", "zero_of", "lower_load", "lower_store"]


# -- helpers -----------------------------------------------------------------------------------
def access_groups(ctx: "KernelLowering", op: ops.Op, layout: Layout,
                  shape: tuple) -> tuple[int, list[list[int]]]:
    """(vector width, register indices grouped into accesses): runs along the last dimension,
    or along the first of a 2-D tile whose layout is fastest along it (a transposed read)."""
    width = ctx.laid.vector.get(op, 1)
    n = len(register_indices(layout, shape))
    if op in ctx.laid.transposed and isinstance(layout, BlockedLayout) and len(shape) == 2 \
            and layout.order[0] == 0 and width > 1 and layout.size_per_thread[0] % width == 0 \
            and shape[0] >= layout.size_per_thread[0]:
        along_1 = n // len({j[0] for j in register_indices(layout, shape)})
        groups = [[(j0 + t) * along_1 + j1 for t in range(width)]
                  for j0 in range(0, n // along_1, width) for j1 in range(along_1)]
        return width, groups
    if isinstance(layout, BlockedLayout):
        width = min(width, layout.size_per_thread[-1])
    if not isinstance(layout, BlockedLayout) or width <= 1 or \
            layout.order[0] != len(shape) - 1 or layout.size_per_thread[-1] % width or \
            shape[-1] < layout.size_per_thread[-1]:
        return 1, [[i] for i in range(n)]
    return width, [list(range(i, i + width)) for i in range(0, n, width)]


def predicate(ctx: "KernelLowering", parts: list) -> Optional[ir.Value]:
    """The conjunction of the non-``None`` i1 values of ``parts`` (``None`` if none)."""
    pred = None
    for p in parts:
        if p is not None:
            pred = p if pred is None else ctx.b.and_(pred, p)
    return pred


def guarded(ctx: "KernelLowering", pred: Optional[ir.Value], emit: Callable[[], list],
            fallback: list) -> list:
    """Run ``emit()`` (returning values) only where ``pred``; elsewhere ``fallback``."""
    b = ctx.b
    if pred is None:
        return emit()
    before = b.block
    with b.if_then(pred):
        values = emit()
        inside = b.block
    out = []
    for v, other in zip(values, fallback):
        phi = b.phi(v.type)
        phi.add_incoming(v, inside)
        phi.add_incoming(other, before)
        out.append(phi)
    return out


def zero_of(t: ir.Type) -> ir.Constant:
    if isinstance(t, ir.PointerType):
        return ir.Constant(t, None)
    return ir.Constant(t, 0.0 if isinstance(t, (ir.FloatType, ir.DoubleType, ir.HalfType)) else 0)


# -- load --------------------------------------------------------------------------------------
def lower_load(ctx: "KernelLowering", op: ops.LoadOp) -> None:
    b = ctx.b
    pointee = elem_type(op.ptr.type).pointee
    storage = ctx.types.storage(pointee)
    compute = ctx.types.compute(pointee)
    if not isinstance(op.ptr.type, TileType):
        ptr = ctx.scalar(op.ptr)
        mask = ctx.scalar(op.mask) if op.mask is not None else None
        other = ctx.scalar(op.other) if op.other is not None else zero_of(compute)

        def emit_scalar() -> list:
            return [ctx.ew.from_storage(pointee, b.load(ptr, typ=storage))]
        ctx.set_result(op, guarded(ctx, mask, emit_scalar, [other])[0])
        return
    layout = op.result.type.layout
    shape = shape_of(op.result.type)
    ptrs = ctx.tile(op.ptr, layout).values
    masks = ctx.tile(op.mask, layout).values if op.mask is not None else None
    others = ctx.operand(op.other, layout) if op.other is not None else None
    width, groups = access_groups(ctx, op, layout, shape)
    values: list = [None] * len(ptrs)
    for group in groups:
        first = group[0]
        fallback = [others.values[i] if others is not None else zero_of(compute)
                    for i in group] if others is not None or masks is not None else []

        def emit(group=group, first=first) -> list:
            if width == 1:
                return [ctx.ew.from_storage(pointee, b.load(ptrs[first], typ=storage))]
            vt = ir.VectorType(storage, width)
            vec = b.load(ptrs[first], typ=vt)
            vec.align = width * pointee.nbytes
            return [ctx.ew.from_storage(pointee, b.extract_element(vec, ir.Constant(I32, k)))
                    for k in range(width)]
        loaded = guarded(ctx, masks[first] if masks is not None else None, emit, fallback)
        for i, v in zip(group, loaded):
            values[i] = v
    ctx.set_result(op, Regs(layout, shape, values))


# -- store -------------------------------------------------------------------------------------
def lower_store(ctx: "KernelLowering", op: ops.StoreOp) -> None:
    b = ctx.b
    pointee = elem_type(op.ptr.type).pointee
    if not isinstance(op.ptr.type, TileType):
        ptr, value = ctx.scalar(op.ptr), ctx.scalar(op.value)
        mask = ctx.scalar(op.mask) if op.mask is not None else None
        pred = predicate(ctx, [first_thread(ctx), mask])

        def emit_scalar() -> list:
            b.store(ctx.ew.to_storage(pointee, value), ptr)
            return []
        guarded(ctx, pred, emit_scalar, [])
        return
    layout = ctx.laid.store_layout[op]
    shape = shape_of(op.ptr.type)
    ptrs = ctx.tile(op.ptr, layout).values
    vals = ctx.operand(op.value, layout)
    vals = vals.values if not isinstance(vals, ir.Value) else [vals] * len(ptrs)
    masks = ctx.tile(op.mask, layout).values if op.mask is not None else None
    owner = owner_predicate(ctx, layout, shape)
    width, groups = access_groups(ctx, op, layout, shape)
    indices = register_indices(layout, shape)
    for lanes, store in ((4, _store_lane_quads), (2, _store_lane_pairs)):
        sets = _lane_groups(ctx, op, layout, shape, width, groups, lanes) \
            if owner is None else None
        if sets is not None:
            store(ctx, sets, groups, ptrs, vals, masks, pointee)
            return
    for group in groups:
        first = group[0]
        if register_is_replica(layout, shape, indices[first]):
            continue
        pred = predicate(ctx, [owner, masks[first] if masks is not None else None])

        def emit(group=group, first=first) -> list:
            if width == 1:
                b.store(ctx.ew.to_storage(pointee, vals[first]), ptrs[first])
                return []
            vt = ir.VectorType(ctx.types.storage(pointee), width)
            vec = ir.Constant(vt, ir.Undefined)
            for k, i in enumerate(group):
                vec = b.insert_element(vec, ctx.ew.to_storage(pointee, vals[i]), ir.Constant(I32, k))
            st = b.store(vec, ptrs[first])
            st.align = width * pointee.nbytes
            return []
        guarded(ctx, pred, emit, [])


def _lane_groups(ctx: "KernelLowering", op: ops.StoreOp, layout: Layout, shape: tuple,
                 width: int, groups: list, lanes: int) -> Optional[list[tuple[int, ...]]]:
    """Sets of ``lanes`` (2 or 4) of a thread's 4-byte runs (two 16-bit elements each) that
    ``lanes`` neighbour lanes store together as runs of ``4 * lanes`` bytes
    (``_store_lane_pairs``, ``_store_lane_quads``), when the access may be ``2 * lanes``
    elements wide (one mask holds for a whole run) and, in every warp, lane ``lanes * i + p``'s
    run starts ``2p`` elements after lane ``lanes * i``'s, which is ``2 * lanes``-aligned (a
    tensor-core accumulator's layout: a quad of lanes covers 16 contiguous bytes of a row);
    else ``None``."""
    pointee = elem_type(op.ptr.type).pointee
    if width != 2 or pointee.nbytes != 2 or ctx.laid.vector.get(op, 1) < 2 * lanes \
            or len(groups) % lanes or not isinstance(layout, BlockedLayout) \
            or layout.order[0] != len(shape) - 1 or ctx.laid.warp_size % lanes:
        return None
    if not _continues_across_lanes(layout, tuple(shape), ctx.laid.num_warps,
                                   ctx.laid.warp_size, tuple(g[0] for g in groups), lanes):
        return None
    return [tuple(range(a, a + lanes)) for a in range(0, len(groups), lanes)]


@lru_cache(maxsize=256)
def _continues_across_lanes(layout: Layout, shape: tuple, warps: int, warp_size: int,
                            firsts: tuple, lanes: int) -> bool:
    """Whether each run (starting at register ``firsts[k]``) of lane ``lanes * i + p`` starts
    ``2p`` elements after the same run of lane ``lanes * i``, in its row, from an element
    ``2 * lanes``-aligned along the last dimension."""
    last = len(shape) - 1
    for warp in range(warps):
        for lane in range(0, warp_size, lanes):
            base = coordinates(layout, shape, lane, warp)
            for p in range(1, lanes):
                there = coordinates(layout, shape, lane + p, warp)
                for first in firsts:
                    a, b = base[first], there[first]
                    if b[:last] != a[:last] or b[last] != a[last] + 2 * p or a[last] % (2 * lanes):
                        return False
    return True


def _word(ctx: "KernelLowering", pointee, vals: list, group: list) -> ir.Value:
    """A thread's run ``group`` of two 16-bit elements as one 32-bit word."""
    return ctx.b.bitcast(ctx.ew.pack_storage(pointee, [vals[i] for i in group]), I32)


def _store_lane_pairs(ctx: "KernelLowering", pairs: list, groups: list, ptrs: list, vals: list,
                      masks: Optional[list], pointee) -> None:
    """Store runs (a, b) of ``pairs`` with the neighbour lane: lanes trade one 4-byte word
    (``shuffle_xor``), then the even lane stores its run a with the odd lane's a after it,
    and the odd lane the even lane's run b with its own b after it -- 8 bytes a lane, a
    warp's stores filling whole 32-byte sectors."""
    b = ctx.b
    storage = ctx.types.storage(pointee)
    odd = b.trunc(b.and_(ctx.lane, ir.Constant(I32, 1)), ir.IntType(1))

    def word(group: list) -> ir.Value:
        return _word(ctx, pointee, vals, group)
    for a, c in pairs:
        ga, gc = groups[a], groups[c]
        mine_a, mine_c = word(ga), word(gc)
        got = ctx.target.shuffle_xor(b, b.select(odd, mine_a, mine_c), 1)
        first = b.select(odd, got, mine_a)
        second = b.select(odd, mine_c, got)
        ptr = b.select(odd, b.gep(ptrs[gc[0]], [ir.Constant(I32, -2)], source_etype=storage), ptrs[ga[0]])
        pred = None
        if masks is not None:
            m_a, m_c = masks[ga[0]], masks[gc[0]]
            sent = b.zext(b.select(odd, m_a, m_c), I32)
            other = b.trunc(ctx.target.shuffle_xor(b, sent, 1), ir.IntType(1))
            pred = b.select(odd, b.and_(other, m_c), b.and_(m_a, other))
        vt = ir.VectorType(I32, 2)

        def emit(first=first, second=second, ptr=ptr) -> list:
            vec = b.insert_element(ir.Constant(vt, ir.Undefined), first, ir.Constant(I32, 0))
            vec = b.insert_element(vec, second, ir.Constant(I32, 1))
            b.store(vec, ptr).align = 8
            return []
        guarded(ctx, pred, emit, [])


def _store_lane_quads(ctx: "KernelLowering", quads: list, groups: list, ptrs: list, vals: list,
                      masks: Optional[list], pointee) -> None:
    """Store the runs of each of ``quads`` as a 4 x 4 transpose of words over the lanes of a
    quad: lane ``q`` ends with the four lanes' words of its run ``q`` (two exchanges, with
    lane ``q ^ 2`` then ``q ^ 1``, two words each) and stores them as one 16-byte run, under
    its own mask (uniform over the run) -- a warp's stores fill whole 32-byte sectors with
    half the instructions of 8-byte runs."""
    b = ctx.b
    storage = ctx.types.storage(pointee)
    quad = b.and_(ctx.lane, ir.Constant(I32, 3))
    low = b.trunc(quad, ir.IntType(1))
    high = b.trunc(b.lshr(quad, ir.Constant(I32, 1)), ir.IntType(1))

    def word(group: list) -> ir.Value:
        return _word(ctx, pointee, vals, group)

    def pick(index: list, options: list) -> ir.Value:
        """``options[q]`` for this lane's ``q`` (``index``: its bits, low first)."""
        if len(options) == 1:
            return options[0]
        half = len(options) // 2
        return b.select(index[-1], pick(index[:-1], options[half:]), pick(index[:-1], options[:half]))
    for four in quads:
        w = [word(groups[g]) for g in four]
        # with lane q ^ 2: keep the half of the runs this lane's q names, trade the other
        got = [ctx.target.shuffle_xor(b, b.select(high, w[t], w[2 + t]), 2) for t in (0, 1)]
        own = [b.select(high, w[2 + t], w[t]) for t in (0, 1)]
        # with lane q ^ 1: keep run q itself (this lane's and lane q ^ 2's word), trade the other
        keep_own, keep_got = b.select(low, own[1], own[0]), b.select(low, got[1], got[0])
        from_next = ctx.target.shuffle_xor(b, b.select(low, own[0], own[1]), 1)
        from_far = ctx.target.shuffle_xor(b, b.select(low, got[0], got[1]), 1)
        by_distance = [keep_own, from_next, keep_got, from_far]      # the word of lane q ^ d
        vt = ir.VectorType(I32, 4)
        vec = ir.Constant(vt, ir.Undefined)
        for p in range(4):
            bits = [b.xor(low, ir.Constant(ir.IntType(1), p & 1)),
                    b.xor(high, ir.Constant(ir.IntType(1), p >> 1))]
            vec = b.insert_element(vec, pick(bits, by_distance), ir.Constant(I32, p))
        mine = pick([low, high], [ptrs[groups[g][0]] for g in four])
        ptr = b.gep(mine, [b.mul(quad, ir.Constant(I32, -2))], source_etype=storage)
        pred = pick([low, high], [masks[groups[g][0]] for g in four]) if masks is not None else None

        def emit(vec=vec, ptr=ptr) -> list:
            b.store(vec, ptr).align = 16
            return []
        guarded(ctx, pred, emit, [])


# -- atomics -----------------------------------------------------------------------------------
_RMW = {"add": ("add", "add", "fadd"), "max": ("max", "umax", "fmax"),
        "min": ("min", "umin", "fmin"), "xchg": ("xchg", "xchg", "xchg"),
        "and": ("and", "and", None), "or": ("or", "or", None), "xor": ("xor", "xor", None)}
_ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}


def _atomic_each(ctx: "KernelLowering", op: ops.Op, operands_of: list, emit_one) -> None:
    """Run ``emit_one(ptr, *operands) -> old`` per element on its owner thread; the last of
    ``operands_of`` is the mask (or ``None``)."""
    result_t = op.results[0].type
    elem = elem_type(result_t)
    zero = zero_of(ctx.types.compute(elem))
    if not isinstance(result_t, TileType):
        operands = [ctx.scalar(v) if v is not None else None for v in operands_of]
        pred = predicate(ctx, [first_thread(ctx), operands[-1]])
        old = guarded(ctx, pred, lambda: [emit_one(*operands[:-1])], [zero])[0]
        ctx.set_result(op, broadcast_from_first_thread(ctx, old))
        return
    layout, shape = result_t.layout, result_t.shape
    operands = [ctx.tile(v, layout).values if v is not None else None for v in operands_of]
    owner = owner_predicate(ctx, layout, shape)
    indices = register_indices(layout, shape)
    values = []
    for i, j in enumerate(indices):
        if register_is_replica(layout, shape, j):
            values.append(zero)
            continue
        mask = operands[-1][i] if operands[-1] is not None else None
        args = [o[i] for o in operands[:-1]]
        values.append(guarded(ctx, predicate(ctx, [owner, mask]), lambda args=args: [emit_one(*args)],
                              [zero])[0])
    ctx.set_result(op, Regs(layout, shape, values))


def lower_atomic_rmw(ctx: "KernelLowering", op: ops.AtomicRMWOp) -> None:
    elem = elem_type(op.value.type)
    kinds = _RMW[op.kind]
    name = kinds[2] if elem.is_float else kinds[1] if elem.is_unsigned else kinds[0]
    if name is None or elem.is_bool or (elem.name == "bf16" and op.kind in ("and", "or", "xor")):
        ctx.fail(op, f"atomic '{op.kind}' on {elem} is not supported by the GPU backend")
    order = _ORDER.get(op.sem, "seq_cst")

    def emit(ptr: ir.Value, value: ir.Value) -> ir.Value:
        if elem.name == "bf16" or (elem.is_float and op.kind in ("max", "min")):
            # float max/min: the IR orders -0 below +0 and a NaN operand gives the other,
            # which LLVM's atomicrmw fmax/fmin (maxnum/minnum) leave open
            return _float_cas_loop(ctx, op.kind, elem, ptr, value, order, op.scope)
        # 16-bit operands stay 16-bit in memory: LLVM widens them to a 32-bit CAS loop
        # where the target has no such atomic
        stored = ctx.ew.to_storage(elem, value)
        old = ctx.target.atomic_rmw(ctx.b, name, ptr, stored, order, op.scope)
        return ctx.ew.from_storage(elem, old)
    _atomic_each(ctx, op, [op.ptr, op.value, op.mask], emit)


def _float_cas_loop(ctx: "KernelLowering", kind: str, elem, ptr: ir.Value, value: ir.Value,
                    order: str, scope: str) -> ir.Value:
    """A float atomic computed by the IR's own ``kind`` (``cas_loop``), each swap through the
    target's ``atomic_cas`` hook; returns the old value."""
    failure = {"acq_rel": "acquire", "release": "monotonic"}.get(order, order)

    def swap(at: ir.Value, old: ir.Value, new: ir.Value) -> tuple[ir.Value, ir.Value]:
        seen = ctx.target.atomic_cas(ctx.b, at, old, new, order, failure, scope)
        return seen, ctx.b.icmp_unsigned("==", seen, old)
    return cas_loop(ctx.ew, ctx.types, kind, elem, ptr, value, swap)


def lower_atomic_cas(ctx: "KernelLowering", op: ops.AtomicCASOp) -> None:
    elem = elem_type(op.value.type)
    if elem.is_bool:
        ctx.fail(op, f"atomic_cas on {elem} is not supported by the GPU backend")
    order = _ORDER.get(op.sem, "seq_cst")
    failure = {"acq_rel": "acquire", "release": "monotonic"}.get(order, order)
    as_int = ir.IntType(elem.bits)

    def emit(ptr: ir.Value, cmp: ir.Value, value: ir.Value) -> ir.Value:
        b = ctx.b
        if elem.is_float:  # compare bit patterns, as the hardware does
            cmp = b.bitcast(ctx.ew.to_storage(elem, cmp), as_int)
            value = b.bitcast(ctx.ew.to_storage(elem, value), as_int)
        old = ctx.target.atomic_cas(b, ptr, cmp, value, order, failure, op.scope)
        if not elem.is_float:
            return old
        return ctx.ew.from_storage(elem, b.bitcast(old, ctx.types.storage(elem)))
    _atomic_each(ctx, op, [op.ptr, op.cmp, op.value, None], emit)


LOWERINGS = {ops.LoadOp: lower_load, ops.StoreOp: lower_store, ops.AtomicRMWOp: lower_atomic_rmw,
             ops.AtomicCASOp: lower_atomic_cas}
