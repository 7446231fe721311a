"""Checked mode (``debug=True``): bounds checks on every memory access, integer division by 0.

The launcher passes, per pointer parameter, the span of memory its argument may touch (its
``Buffer``: a NumPy view's own elements, an ``at.Array``'s allocation) as two more program
parameters, ``lo`` and ``size``.  Before a load, store or atomic, every active lane's
address must lie in the span of a parameter its pointer comes from (``pointers``; any
pointer parameter when that is not known), its whole element included.  A failing access
is not made: the program branches to one shared block that claims the launch's error
record (``failures.CheckRecord``: the first failure wins), writes the program ids, the lane
and the address, and returns; the entry's program loop then stops.  An integer ``div`` or
``rem`` whose divisor is 0 in a lane fails the same way, unless the kernel discards that
lane's result: the rule of ``anytile.codegen.bounds_checks`` (a masked load its operands
come from has the lane off; or every use drops it: ``tl.where(b != 0, a // b, 0)``, a
masked store), checked here at the point the division is evaluated, from the values that
can be read there without evaluating anything again (else the lane counts as kept).

Nothing here runs without ``debug``: the program then has no extra parameters and no check,
so its code is the same as before checked mode existed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from llvmlite import ir

from anytile.codegen.llvm.types import I1, I8, I32, I64, const_like, intrinsic, splat, \
    vector_width
from anytile.codegen.bounds_checks import LaneUses, Literal, load_masks
from anytile.codegen.pointers import carried_sources, param_indices, pointer_origins
from anytile.ir import AtomicCASOp, AtomicRMWOp, Op, TileType, Value, shape_of

from ..failures import CheckRecord
from .control import RuntimeCheck
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
        self._lane_uses = LaneUses(fn)
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
        """Stop the program before an integer division or remainder by 0 in a lane whose
        result the kernel keeps (module docstring)."""
        b = self.low.b
        bad = b.icmp_unsigned("==", divisor, ir.Constant(divisor.type, None))
        for mask in load_masks(op):
            loaded = self._at(mask, point)
            if loaded is not None:
                bad = self._and(bad, loaded)
        used = self._lane_uses.used_lanes(op.result)
        kept = self._any_term(used.terms, point) if used is not None else None
        if kept is not None:
            bad = self._and(bad, kept)
        name = "division" if op.kind == "div" else "remainder"
        shape = shape_of(op.result.type) if point is not None else ()
        self._fail_if(bad, CheckedAccess("division", name, shape), op, point, None)

    # -- shared parts --------------------------------------------------------------------------
    def _at(self, value: Value, point: Optional[Point]) -> Optional[ir.Value]:
        """The ``i1`` ``value`` where the division is evaluated, when that evaluates nothing
        again: a scalar already lowered, a tile in a buffer, a cheap tile, or one already
        evaluated at ``point``; else None."""
        low = self.low
        if not isinstance(value.type, TileType):
            return low.scalars.get(value) if point is None else None
        ref = low.tiles.get(value) if point is not None else None
        if ref is None:
            return None
        if isinstance(ref, TileBuffer) or id(ref.op) in low.plan.cheap or \
                (id(value), point.key) in low.memo:
            return low.value_at(value, point)
        return None

    def _any_term(self, terms: tuple[tuple[Literal, ...], ...],
                  point: Optional[Point]) -> Optional[ir.Value]:
        """``i1``: some term has every literal holding; None when a literal cannot be read
        here (``_at``)."""
        b = self.low.b
        result: Optional[ir.Value] = None
        for term in terms:
            conj: Optional[ir.Value] = None
            for value, on in term:
                lit = self._at(value, point)
                if lit is None:
                    return None
                lit = lit if on else b.not_(lit)
                conj = lit if conj is None else self._and(conj, lit)
            result = conj if result is None else self._or(result, conj)
        return result

    def _and(self, x: ir.Value, y: ir.Value) -> ir.Value:
        x, y = self._same_width(x, y)
        return self.low.b.and_(x, y)

    def _or(self, x: ir.Value, y: ir.Value) -> ir.Value:
        x, y = self._same_width(x, y)
        return self.low.b.or_(x, y)

    def _same_width(self, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
        """A scalar (a chunk evaluated as uniform) splat to the other's vector width."""
        b, wx, wy = self.low.b, vector_width(x), vector_width(y)
        if wy and not wx:
            x = splat(b, x, wy)
        elif wx and not wy:
            y = splat(b, y, wx)
        return x, y

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
