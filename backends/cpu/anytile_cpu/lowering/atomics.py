"""Atomics: one LLVM ``atomicrmw``/``cmpxchg`` per element, on real host addresses.

Tiles are walked element by element; a masked-off element issues no memory operation (its
result is 0).  Float add uses LLVM's ``fadd`` (f32, f64, f16); float min and max are a
compare-and-swap loop on the bit pattern around the elementwise op (LLVM's ``fmin``/``fmax``
may keep either of +0 and -0; the IR orders -0 below +0), and so is every ``bf16`` atomic
(LLVM has none).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from llvmlite import ir

from anytile.codegen.llvm.atomics import cas_loop
from anytile.ir import AtomicCASOp, AtomicRMWOp, ScalarType, TileType, elem_type, shape_of

from .values import Point

if TYPE_CHECKING:
    from .program import ProgramLowering

__all__ = ["LOWERINGS", "atomic_rmw"]

ORDERINGS = {"relaxed": "monotonic", "acquire": "acquire", "release": "release",
             "acq_rel": "acq_rel"}
FAIL_ORDERINGS = {"monotonic": "monotonic", "acquire": "acquire", "release": "monotonic",
                  "acq_rel": "acquire"}


def _per_element(ctx: "ProgramLowering", op, emit) -> None:
    """Run ``emit(point) -> old value`` on every element; collect results."""
    if not isinstance(op.result.type, TileType):
        ctx.memo = {}
        ctx.scalars[op.result] = emit(Point((), 0))
        return
    out = ctx.new_buffer(op.result.type.shape, op.result.type.elem)
    ctx.for_each_point(shape_of(op.ptr.type), lambda p: ctx.buffer_store(out, p, emit(p)),
                       vector=False)
    ctx.tiles[op.result] = out


def lower_atomic_rmw(ctx: "ProgramLowering", op: AtomicRMWOp) -> None:
    elem = elem_type(op.value.type)
    ordering = ORDERINGS.get(op.sem, "acq_rel")

    def emit(p: Point) -> ir.Value:
        ptr = ctx.value_at(op.ptr, p)
        val = ctx.value_at(op.value, p)
        mask = ctx.value_at(op.mask, p) if op.mask is not None else None
        if ctx.checks is not None:
            ctx.checks.access(op, ptr, mask, elem.nbytes, p)
        return _guarded(ctx, mask, elem, lambda: atomic_rmw(ctx, op.kind, elem, ptr, val,
                                                            ordering))
    _per_element(ctx, op, emit)


def lower_atomic_cas(ctx: "ProgramLowering", op: AtomicCASOp) -> None:
    elem = elem_type(op.value.type)
    ordering = ORDERINGS.get(op.sem, "acq_rel")

    def emit(p: Point) -> ir.Value:
        ptr = ctx.value_at(op.ptr, p)
        if ctx.checks is not None:
            ctx.checks.access(op, ptr, None, elem.nbytes, p)
        cmp = ctx.ew.to_storage(elem, ctx.value_at(op.cmp, p))
        val = ctx.ew.to_storage(elem, ctx.value_at(op.value, p))
        if elem.is_float:
            it = ir.IntType(elem.bits)
            cmp, val = ctx.b.bitcast(cmp, it), ctx.b.bitcast(val, it)
        pair = ctx.b.cmpxchg(ptr, cmp, val, ordering, FAIL_ORDERINGS[ordering])
        old = ctx.b.extract_value(pair, 0)
        if elem.is_float:
            old = ctx.b.bitcast(old, ctx.stype(elem))
        return ctx.ew.from_storage(elem, old)
    _per_element(ctx, op, emit)


def _guarded(ctx: "ProgramLowering", mask: Optional[ir.Value], elem: ScalarType,
             emit) -> ir.Value:
    if mask is None:
        return emit()
    b = ctx.b
    before = b.block
    with b.if_then(mask):
        value = emit()
        then_block = b.block
    phi = b.phi(value.type)
    phi.add_incoming(ir.Constant(value.type, None), before)
    phi.add_incoming(value, then_block)
    return phi


def atomic_rmw(ctx: "ProgramLowering", kind: str, elem: ScalarType, ptr: ir.Value, val: ir.Value,
               ordering: str) -> ir.Value:
    b = ctx.b
    if elem.name == "bf16" or (elem.is_float and kind in ("max", "min")):
        return _cas_loop(ctx, kind, elem, ptr, val, ordering)
    if elem.is_float:
        name = {"add": "fadd", "xchg": "xchg"}.get(kind)
        if name is None:
            raise ValueError(f"atomic '{kind}' on {elem}")
        raw = ctx.ew.to_storage(elem, val)
        return ctx.ew.from_storage(elem, b.atomic_rmw(name, ptr, raw, ordering))
    if kind in ("max", "min"):
        name = kind if elem.is_signed else "u" + kind
    else:
        name = {"add": "add", "xchg": "xchg", "and": "and", "or": "or", "xor": "xor"}[kind]
    raw = ctx.ew.to_storage(elem, val)
    return ctx.ew.from_storage(elem, b.atomic_rmw(name, ptr, raw, ordering))


def _cas_loop(ctx: "ProgramLowering", kind: str, elem: ScalarType, ptr: ir.Value,
              val: ir.Value, ordering: str) -> ir.Value:
    """``kind`` applied by a compare-and-swap loop on ``elem``'s bit pattern; the old value."""
    def swap(at: ir.Value, old: ir.Value, new: ir.Value) -> tuple[ir.Value, ir.Value]:
        pair = ctx.b.cmpxchg(at, old, new, ordering, FAIL_ORDERINGS[ordering])
        return ctx.b.extract_value(pair, 0), ctx.b.extract_value(pair, 1)
    return cas_loop(ctx.ew, ctx.types, kind, elem, ptr, val, swap)


LOWERINGS = {AtomicRMWOp: lower_atomic_rmw, AtomicCASOp: lower_atomic_cas}
