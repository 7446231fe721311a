"""Streaming stores: a large 1-d store into memory the kernel never reads, written past the
caches (non-temporal stores).

A plain store first reads each cache line it writes (read for ownership): for an output the
kernel only writes, a quarter of vector add's memory traffic is that read.  Non-temporal
stores skip it, but they must be whole aligned vectors (x86: ``vmovntps`` of a 64-byte
register needs a 64-byte-aligned address).  So a store qualifies when its tile is 1-d and
at least ``STREAM_MIN_BYTES``, its elements are 4 or 8 bytes, its pointer and mask are index
math (evaluating them twice costs no memory traffic), and every parameter its pointer may
come from is written only by stores (no load, atomic or unknown pointer may read it).
At run time, when the mask is on for the whole tile and the first address is a whole
number of elements, the program stores:

* head: the lanes before the first aligned address (masked, cached store);
* body: aligned vectors, non-temporal;
* tail: the lanes after the last whole aligned vector (masked, cached store);

and otherwise the ordinary loop.  Streaming only pays when the launch writes more than the
caches hold (a smaller output is better left in cache for whoever reads it next): the
launcher passes ``may_stream`` when the grid's programs store at least
``launch.STREAM_LAUNCH_BYTES`` this way (``stream_bytes`` per program).  Non-temporal
stores are weakly ordered: the native entry ends with a fence once any may have been made.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from llvmlite import ir

from anytile.codegen.llvm.types import I1, I32, I64, intrinsic, splat
from anytile.ir import (ArangeOp, AtomicCASOp, AtomicRMWOp, BinaryOp, CompareOp, ConstantOp,
                        HintOp, LoadOp, PointerType, ScalarType, SplatOp, StoreOp, TileType,
                        elem_type, shape_of)
from anytile.ir.types import i1
from anytile.codegen.pointers import param_indices, pointer_origins

from .access import emit_store
from .values import Chunk, Index, Lazy, Point, TileBuffer

if TYPE_CHECKING:
    from .program import ProgramLowering

__all__ = ["lower_streaming_store", "STREAM_MIN_BYTES", "streamable_params"]

STREAM_MIN_BYTES = 4096     # smaller tiles: the head and tail would cost more than they save


def streamable_params(fn) -> frozenset[int]:
    """Indices of the pointer parameters that only stores write through and nothing reads
    (empty when some load or atomic's pointer cannot be traced to parameters)."""
    index_of = param_indices(fn)
    stored: set[int] = set()
    read: set[int] = set()
    for op in fn.walk():
        if isinstance(op, (LoadOp, AtomicRMWOp, AtomicCASOp, StoreOp)):
            if not isinstance(op.ptr.type, (TileType, PointerType)):
                continue
            origins = pointer_origins(op.ptr, index_of)
            if origins is None:
                if not isinstance(op, StoreOp):
                    return frozenset()
                continue
            (stored if isinstance(op, StoreOp) else read).update(origins)
    return frozenset(stored - read)


def lower_streaming_store(ctx: "ProgramLowering", op: StoreOp, fallback) -> bool:
    """Emit ``op`` as a streaming store around ``fallback()`` (the ordinary loop) and
    return True, or return False when ``op`` does not qualify."""
    shape = shape_of(op.ptr.type)
    elem = elem_type(op.value.type)
    if ctx.checks is not None or len(shape) != 1 or not hasattr(elem, "nbytes") or \
            elem.nbytes not in (4, 8):
        return False
    n, e = shape[0], elem.nbytes
    w = ctx.chunk_width(n)
    if not w or n * e < STREAM_MIN_BYTES or w * e < 16 or n < 2 * w:
        return False
    if not (_index_math(ctx, op.ptr) and (op.mask is None or _index_math(ctx, op.mask))):
        return False
    if ctx.streamable is None:
        ctx.streamable = streamable_params(ctx.fn)
    origins = pointer_origins(op.ptr, param_indices(ctx.fn))
    if not origins or not origins <= ctx.streamable:
        return False
    b = ctx.b
    ctx.memo = {}
    first = ctx.chunk(op.ptr, Point((Index(ir.Constant(I64, 0), True),), w))
    if first.kind != "ramp":
        return False
    vector_bytes = w * e
    address = b.ptrtoint(first.value, I64)
    misaligned = b.and_(address, ir.Constant(I64, vector_bytes - 1))
    whole_elements = b.icmp_unsigned("==", b.and_(address, ir.Constant(I64, e - 1)),
                                     ir.Constant(I64, 0))
    go = _mask_all_on(ctx, op, n, w, b.and_(ctx.may_stream, whole_elements))
    head = b.udiv(b.and_(b.sub(ir.Constant(I64, vector_bytes), misaligned),
                         ir.Constant(I64, vector_bytes - 1)), ir.Constant(I64, e))
    with b.if_else(go) as (streaming, ordinary):
        with streaming:
            _stream(ctx, op, n, w, head)
        with ordinary:
            fallback()
    ctx.memo = {}
    ctx.stream_bytes += n * e
    return True


def _index_math(ctx: "ProgramLowering", value) -> bool:
    """Whether ``value`` costs no memory access to evaluate again (cheap or buffered)."""
    ref = ctx.tiles.get(value)
    return isinstance(ref, TileBuffer) or (
        ref is not None and id(ref.op) in ctx.plan.cheap)


def _mask_all_on(ctx: "ProgramLowering", op: StoreOp, n: int, w: int,
                 wanted: ir.Value) -> ir.Value:
    """i1: ``wanted`` and ``op``'s mask is on for every lane of its tile (looked at only
    when ``wanted``)."""
    if op.mask is None:
        return wanted
    b = ctx.b
    bound = _bound_mask_all_on(ctx, op.mask, n)
    if bound is not None:
        return b.and_(wanted, bound)
    slot = ctx.stack_slot(I1)
    b.store(ir.Constant(I1, 0), slot)
    mask_elem = elem_type(op.mask.type)

    def body(p: Point) -> None:
        m = ctx.vec(ctx.chunk(op.mask, p), mask_elem, p.width)
        if isinstance(m.type, ir.VectorType):
            fn = intrinsic(ctx.module, "llvm.vector.reduce.and", I1, [m.type], [m.type])
            m = b.call(fn, [m])
        b.store(b.and_(b.load(slot, typ=I1), m), slot)
    with b.if_then(wanted):
        b.store(ir.Constant(I1, 1), slot)
        ctx.for_each_point((n,), body)
    return b.load(slot, typ=I1)


def _bound_mask_all_on(ctx: "ProgramLowering", mask, n: int) -> Optional[ir.Value]:
    """i1: every lane of the ``n``-element mask ``offs < bound`` is on, from its first and
    last elements alone (no pass over the tile: that pass cost vector add ~5%), or None
    when ``mask`` is not such a compare.  ``offs`` is ``arange`` plus or minus values
    uniform over the tile, in one integer type: element i is element 0 + i, wrapping.
    When first <= last it did not wrap (n is below half the type's range), so the
    elements increase and ``<``/``<=`` hold everywhere iff they hold for the last,
    ``>``/``>=`` iff for the first."""
    ref = ctx.tiles.get(mask)
    if not isinstance(ref, Lazy) or not isinstance(ref.op, CompareOp):
        return None
    cmp = ref.op
    pred, elem = str(cmp.pred), elem_type(cmp.lhs.type)
    if pred not in ("lt", "le", "gt", "ge") or not isinstance(elem, ScalarType) or \
            not elem.is_int or elem.is_bool or n > 2 ** (elem.bits - 1):
        return None
    if _contiguous(ctx, cmp.lhs) and _tile_uniform(ctx, cmp.rhs):
        offs, bound = cmp.lhs, cmp.rhs
    elif _contiguous(ctx, cmp.rhs) and _tile_uniform(ctx, cmp.lhs):
        offs, bound = cmp.rhs, cmp.lhs
        pred = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[pred]
    else:
        return None

    def element(i: int) -> ir.Value:       # one element, evaluated as a scalar
        return ctx.chunk(offs, Point((Index(ir.Constant(I64, i)),), 0)).value
    first, last = element(0), element(n - 1)
    limit = ctx.chunk(bound, Point((Index(ir.Constant(I64, 0)),), 0)).value
    no_wrap = ctx.ew.compare("le", elem, first, last)
    holds = ctx.ew.compare(pred, elem, last if pred in ("lt", "le") else first, limit)
    return ctx.b.and_(no_wrap, holds)


def _contiguous(ctx: "ProgramLowering", value) -> bool:
    """``value`` is a 1-d ``arange`` plus or minus tile-uniform values (no casts)."""
    ref = ctx.tiles.get(value)
    if not isinstance(ref, Lazy) or ref.index != 0:
        return False
    op = ref.op
    if isinstance(op, ArangeOp):
        return True
    if isinstance(op, HintOp):
        return _contiguous(ctx, op.src)
    if isinstance(op, BinaryOp) and op.kind == "add":
        return (_contiguous(ctx, op.lhs) and _tile_uniform(ctx, op.rhs)) or \
            (_tile_uniform(ctx, op.lhs) and _contiguous(ctx, op.rhs))
    if isinstance(op, BinaryOp) and op.kind == "sub":
        return _contiguous(ctx, op.lhs) and _tile_uniform(ctx, op.rhs)
    return False


def _tile_uniform(ctx: "ProgramLowering", value) -> bool:
    """``value`` is a scalar, or a splat or constant tile (the same in every element)."""
    if not isinstance(value.type, TileType):
        return True
    ref = ctx.tiles.get(value)
    if not isinstance(ref, Lazy) or ref.index != 0:
        return False
    if isinstance(ref.op, HintOp):
        return _tile_uniform(ctx, ref.op.src)
    return isinstance(ref.op, (SplatOp, ConstantOp))


def _stream(ctx: "ProgramLowering", op: StoreOp, n: int, w: int, head: ir.Value) -> None:
    b = ctx.b
    elem = elem_type(op.value.type)
    lanes = ir.Constant(ir.VectorType(I32, w), list(range(w)))
    head32 = splat(b, b.trunc(head, I32), w)
    # head: lanes [0, head) of the first vector; tail: lanes [head, w) of the last
    _store_lanes(ctx, op, ir.Constant(I64, 0), b.icmp_unsigned("<", lanes, head32), w)
    has_head = b.icmp_unsigned("!=", head, ir.Constant(I64, 0))
    count = b.sub(ir.Constant(I64, n // w), b.zext(has_head, I64))
    with ctx.loop(count) as k:
        point = _whole_mask_point(ctx, op, b.add(head, b.mul(k, ir.Constant(I64, w))), w)
        p = ctx.chunk(op.ptr, point)
        raw = ctx.ew.to_storage(elem, ctx.vec(ctx.chunk(op.value, point), elem, w))
        store = b.store(raw, p.value, align=w * elem.nbytes)
        store.set_metadata("nontemporal", ctx.module.add_metadata([ir.Constant(I32, 1)]))
    tail = b.and_(b.icmp_unsigned(">=", lanes, head32), splat(b, has_head, w))
    _store_lanes(ctx, op, ir.Constant(I64, n - w), tail, w)


def _store_lanes(ctx: "ProgramLowering", op: StoreOp, base: ir.Value, lanes_on: ir.Value,
                 w: int) -> None:
    """A cached, masked store of the vector of ``op`` at ``base``, lanes ``lanes_on``."""
    point = _whole_mask_point(ctx, op, base, w)
    elem, ptr_elem = elem_type(op.value.type), elem_type(op.ptr.type)
    emit_store(ctx, elem, ctx.chunk(op.ptr, point), ctx.chunk(op.value, point),
               Chunk.vector(lanes_on), ptr_elem, i1, w)


def _whole_mask_point(ctx: "ProgramLowering", op: StoreOp, base: ir.Value, w: int) -> Point:
    """The point at ``base``, where the store's mask (on everywhere on this path) is a
    constant: loads masked by the same value become plain vector loads."""
    ctx.memo = {}
    point = Point((Index(base, True),), w)
    if op.mask is not None:
        ctx.memo[(id(op.mask), point.key)] = Chunk.uniform(ir.Constant(I1, 1))
    return point
