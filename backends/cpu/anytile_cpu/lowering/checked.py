"""Checked mode (``debug=True``): bounds checks on every memory access, integer division by 0.

The launcher passes, per pointer parameter, the span of memory its argument may touch (its
``Buffer``: a NumPy view's own elements, an ``at.Array``'s allocation) as two more program
parameters, ``lo`` and ``size``.  Before a load, store or atomic, every active lane's
address must lie in the span of a parameter its pointer comes from (``pointers``; any
pointer parameter when that is not known), its whole element included.  A failing access
is not made: the program branches to one shared block that claims the launch's error
record (``failures.CheckRecord``: the first failure wins), writes the program ids, the lane
and the address, and returns; the entry's program loop then stops.  An integer ``div`` or
``rem`` whose divisor is 0 in a lane fails the same way, unless a masked load its operands
come from (through elementwise ops) has that lane off: a lane the kernel never loaded is
one whose result it discards (``x // y`` on masked tiles, ragged edges).

Nothing here runs without ``debug``: the program then has no extra parameters and no check,
so its code is the same as before checked mode existed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llvmlite import ir

from anytile.codegen.llvm.types import I1, I8, I32, I64, const_like, intrinsic, splat, \
    vector_width
from anytile.ir import AtomicCASOp, AtomicRMWOp, LoadOp, Op, TileType, Value, shape_of

from ..failures import CheckRecord
from anytile.codegen.pointers import carried_sources, param_indices, pointer_origins
from .control import RuntimeCheck
from .plan import ELEMENTWISE_OPS
from .values import Point, TileBuffer, row_major_strides

__all__ = ["CheckedAccess", "CheckedMode", "access_name"]


@dataclass(frozen=True)
class CheckedAccess:
    """What a failed checked-mode check reports: ``kind`` 'bounds' or 'division'; ``name``
    the access ('load', 'atomic add') or the operation ('division', 'remainder'); ``shape``
    the tile whose lanes it numbers; ``elem_bytes`` and the indices of the pointer
    parameters the pointer may come from (``None``: any) for bounds checks."""

    kind: str
    name: str
    shape: tuple[int, ...]
    elem_bytes: int = 0
    params: Optional[tuple[int, ...]] = None


def access_name(op: Op) -> str:
    """How reports name a memory op: load, store, atomic add, atomic cas, ..."""
    if isinstance(op, AtomicRMWOp):
        return f"atomic {op.kind}"
    return "atomic cas" if isinstance(op, AtomicCASOp) else op.NAME


class CheckedMode:
    """The checks of one program function; ``spans[i]`` is ``(lo, size)`` (i64 function
    arguments) of pointer parameter ``i``."""

    def __init__(self, lowering, spans: dict[int, tuple[ir.Value, ir.Value]]) -> None:
        self.low = lowering
        self.spans = spans
        fn = lowering.fn
        self._index_of = param_indices(fn)
        self._carried = carried_sources(fn)
        self._bounds: dict[tuple[int, int], ir.Value] = {}
        self._fail: Optional[tuple[ir.Block, ir.Value, ir.Value, ir.Value]] = None

    # -- the checks ----------------------------------------------------------------------------
    def access(self, op: Op, addrs: ir.Value, mask: Optional[ir.Value], elem_bytes: int,
               point: Point) -> None:
        """Stop the program before ``op`` touches memory outside its spans: ``addrs`` is a
        pointer or a vector of them, ``mask`` (same width, or None) the active lanes."""
        b = self.low.b
        origins = pointer_origins(op.ptr, self._index_of, self._carried)
        params = tuple(sorted(self.spans if origins is None else origins))
        width = vector_width(addrs)
        ints = b.ptrtoint(addrs, ir.VectorType(I64, width) if width else I64)
        bad: ir.Value = const_like(ir.VectorType(I1, width) if width else I1, 1)  # no span
        for k in params:
            lo, _ = self.spans[k]
            offset = b.sub(ints, splat(b, lo, width))
            outside = b.icmp_unsigned(">=", offset, splat(b, self._bound(k, elem_bytes), width))
            bad = outside if k == params[0] else b.and_(bad, outside)
        if mask is not None:
            bad = b.and_(bad, mask)
        shape = shape_of(op.ptr.type)
        record = CheckedAccess("bounds", access_name(op), shape, elem_bytes, params)
        self._fail_if(bad, record, op, point, ints)

    def divisor(self, op: Op, divisor: ir.Value, point: Optional[Point]) -> None:
        """Stop the program before an integer division or remainder by 0."""
        b = self.low.b
        bad = b.icmp_unsigned("==", divisor, ir.Constant(divisor.type, None))
        if point is not None:
            for mask in self._load_masks(op):
                loaded = self.low.value_at(mask, point)
                if vector_width(loaded) and not vector_width(bad):
                    bad = splat(b, bad, vector_width(loaded))
                bad = b.and_(bad, loaded)
        name = "division" if op.kind == "div" else "remainder"
        shape = shape_of(op.result.type) if point is not None else ()
        self._fail_if(bad, CheckedAccess("division", name, shape), op, point, None)

    # -- shared parts --------------------------------------------------------------------------
    def _load_masks(self, op: Op) -> list[Value]:
        """The masks of the masked loads ``op``'s operands come from through elementwise
        ops, those that can be evaluated again here (cheap or in a buffer)."""
        low, masks, seen = self.low, [], set()
        stack = [v for v in op.operands if isinstance(v.type, TileType)]
        while stack:
            v = stack.pop()
            if id(v) in seen or not isinstance(v.owner, Op):
                continue
            seen.add(id(v))
            owner = v.owner
            if isinstance(owner, LoadOp) and owner.mask is not None:
                mask = owner.mask
                ref = low.tiles.get(mask)
                if mask.type.shape == op.result.type.shape and (
                        isinstance(ref, TileBuffer) or id(mask.owner) in low.plan.cheap):
                    masks.append(mask)
            elif isinstance(owner, ELEMENTWISE_OPS):
                stack.extend(o for o in owner.operands if isinstance(o.type, TileType))
        return masks

    def _bound(self, param: int, elem_bytes: int) -> ir.Value:
        """``size - elem_bytes + 1`` (0 when the span is smaller than one element): an
        address passes when its offset from ``lo`` is below it.  Made once, at entry."""
        key = (param, elem_bytes)
        if key not in self._bounds:
            b = self.low.alloca_b
            _, size = self.spans[param]
            es = ir.Constant(I64, elem_bytes)
            fits = b.icmp_unsigned(">=", size, es)
            self._bounds[key] = b.select(fits, b.add(b.sub(size, es), ir.Constant(I64, 1)),
                                         ir.Constant(I64, 0))
        return self._bounds[key]

    def _fail_if(self, bad: ir.Value, record: CheckedAccess, op: Op, point: Optional[Point],
                 ints: Optional[ir.Value]) -> None:
        """Branch to the failure block when any lane of ``bad`` is set, with this check's
        number, the first bad lane's flat index in ``record.shape`` and its address."""
        low, b = self.low, self.low.b
        index = len(low.asserts)
        low.asserts.append(RuntimeCheck(record.name, op.loc, is_assert=False, access=record))
        width = vector_width(bad)
        any_bad = bad if not width else b.call(
            intrinsic(low.module, "llvm.vector.reduce.or", I1, [bad.type], [bad.type]), [bad])
        failed = b.append_basic_block("check.failed")
        cont = b.append_basic_block("check.ok")
        b.cbranch(any_bad, failed, cont).set_weights([1, 1 << 20])
        b.position_at_end(failed)
        lane = ir.Constant(I64, 0)
        if width:
            bits = b.bitcast(bad, ir.IntType(width))
            cttz = intrinsic(low.module, "llvm.cttz", bits.type, [bits.type, I1], [bits.type])
            lane = b.zext(b.call(cttz, [bits, ir.Constant(I1, 0)]), I64)
        address = ir.Constant(I64, 0)
        if ints is not None:
            address = b.extract_element(ints, lane) if width else ints
        flat = self._flat_lane(point, record.shape, lane) if point is not None else lane
        block, check_id, lane_phi, addr_phi = self._failure_block()
        check_id.add_incoming(ir.Constant(I32, index + 1), b.block)
        lane_phi.add_incoming(flat, b.block)
        addr_phi.add_incoming(address, b.block)
        b.branch(block)
        b.position_at_end(cont)

    def _flat_lane(self, point: Point, shape: tuple[int, ...], lane: ir.Value) -> ir.Value:
        """The row-major index in ``shape`` of lane ``lane`` of the chunk at ``point``."""
        b = self.low.b
        flat: ir.Value = ir.Constant(I64, 0)
        for idx, stride in zip(point.indices, row_major_strides(shape)):
            step = ir.Constant(I64, stride)
            flat = b.add(flat, b.mul(idx.base, step))
            if idx.ramp:
                flat = b.add(flat, b.mul(lane, step))
        return flat

    def _failure_block(self) -> tuple[ir.Block, ir.Value, ir.Value, ir.Value]:
        """The program's one failure block: claim the record if no check failed yet, write
        the facts, return."""
        if self._fail is not None:
            return self._fail
        low = self.low
        func = low.b.function
        block = func.append_basic_block("check.report")
        b = ir.IRBuilder(block)
        check_id, lane, address = b.phi(I32), b.phi(I64), b.phi(I64)
        record = low.error_word
        pair = b.cmpxchg(record, ir.Constant(I32, 0), check_id, "monotonic", "monotonic")
        with b.if_then(b.extract_value(pair, 1)):
            pid_at = CheckRecord.pid.offset
            values = [b.sext(p, I64) for p in low.program_ids] + [lane, address]
            offsets = [pid_at, pid_at + 8, pid_at + 16, CheckRecord.lane.offset,
                       CheckRecord.address.offset]
            for value, offset in zip(values, offsets):
                slot = b.gep(record, [ir.Constant(I64, offset)], source_etype=I8)
                b.store(value, slot, align=8)
        b.ret_void()
        self._fail = (block, check_id, lane, address)
        return self._fail

