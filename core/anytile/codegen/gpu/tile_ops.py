"""Lowering of the ops that work register by register: elementwise ops, index and shape ops
(``arange``, constants, ``splat``, ``expand_dims``, ``broadcast``, ``permute``), program ids,
``reshape``, ``barrier``, ``device_assert``.

Elementwise ops run per register through the shared ``ElementwiseLowering`` (f16/bf16
computed in f32 and rounded once per op; C integer division; saturating casts).  Index and
shape ops are usually rematerialisable (``assign.py``): ``rematerialise`` builds them in
whatever layout a use asks for, without moving data.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Optional

from llvmlite import ir

from ...errors import CompilationError
from ...ir import ops
from ...ir.nodes import Value
from ...ir.types import PointerType, TileType, elem_type, shape_of
from ..llvm.printing import print_argument, print_format
from ..llvm.types import I32
from .layouts import BlockedLayout, Layout, SliceLayout, default_blocked, register_indices
from .registers import Regs, coords, owner_predicate, register_is_replica
from .scratch import convert, through_shared

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["LOWERINGS", "rematerialise", "map_registers"]

_ELEMENTWISE = (ops.BinaryOp, ops.CompareOp, ops.UnaryOp, ops.FmaOp, ops.UMulHiOp, ops.SelectOp,
                ops.CastOp, ops.BitcastOp, ops.HintOp, ops.AddPtrOp)
_PREDICATES = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def map_registers(ctx: "KernelLowering", op: ops.Op, layout: Optional[Layout], fn) -> Any:
    """Apply ``fn`` to the operands' scalars (one register of each at a time)."""
    shape = shape_of(op.results[0].type)
    if not shape:
        return fn(*[ctx.scalar(v) for v in op.operands])
    regs = [ctx.tile(v, layout) if isinstance(v.type, TileType) else None for v in op.operands]
    scalars = [None if r is not None else ctx.scalar(v) for r, v in zip(regs, op.operands)]
    n = len(next(r for r in regs if r is not None).values)
    values = []
    for i in range(n):
        args = [r.values[i] if r is not None else s for r, s in zip(regs, scalars)]
        values.append(fn(*args))
    return Regs(layout, shape, values)


def elementwise(ctx: "KernelLowering", op: ops.Op, layout: Optional[Layout]) -> Any:
    """``op``'s result in ``layout`` (a scalar when it has no shape)."""
    ew, b = ctx.ew, ctx.b
    if isinstance(op, ops.BinaryOp):
        e = elem_type(op.lhs.type)
        return map_registers(ctx, op, layout, lambda x, y: ew.binary(op.kind, e, x, y, op.strict))
    if isinstance(op, ops.CompareOp):
        e = elem_type(op.lhs.type)
        if isinstance(e, PointerType):
            return map_registers(ctx, op, layout, lambda x, y: b.icmp_unsigned(
                _PREDICATES[op.pred], b.ptrtoint(x, ir.IntType(64)), b.ptrtoint(y, ir.IntType(64))))
        return map_registers(ctx, op, layout, lambda x, y: ew.compare(op.pred, e, x, y))
    if isinstance(op, ops.UnaryOp):
        e = elem_type(op.src.type)
        return map_registers(ctx, op, layout, lambda x: ew.unary(op.kind, e, x, op.strict))
    if isinstance(op, ops.FmaOp):
        e = elem_type(op.a.type)
        return map_registers(ctx, op, layout, lambda x, y, z: ew.fma(e, x, y, z))
    if isinstance(op, ops.UMulHiOp):
        e = elem_type(op.lhs.type)
        return map_registers(ctx, op, layout, lambda x, y: ew.umulhi(e, x, y))
    if isinstance(op, ops.SelectOp):
        return map_registers(ctx, op, layout, lambda c, x, y: b.select(c, x, y))
    if isinstance(op, ops.CastOp):
        src, dst = elem_type(op.src.type), elem_type(op.result.type)
        if isinstance(src, PointerType) or isinstance(dst, PointerType):
            return map_registers(ctx, op, layout, lambda x: _pointer_cast(ctx, x, src, dst))
        return map_registers(ctx, op, layout, lambda x: ew.cast(src, dst, x))
    if isinstance(op, ops.BitcastOp):
        src, dst = elem_type(op.src.type), elem_type(op.result.type)
        return map_registers(ctx, op, layout, lambda x: ew.bitcast(src, dst, x))
    if isinstance(op, ops.HintOp):
        return map_registers(ctx, op, layout, lambda x: x)
    if isinstance(op, ops.AddPtrOp):
        st = ctx.types.storage(elem_type(op.ptr.type).pointee)
        return map_registers(ctx, op, layout, lambda p, o: b.gep(p, [o], source_etype=st))
    raise AssertionError(op.NAME)


def _pointer_cast(ctx: "KernelLowering", x: ir.Value, src: Any, dst: Any) -> ir.Value:
    if isinstance(src, PointerType) and isinstance(dst, PointerType):
        return x
    if isinstance(dst, PointerType):
        return ctx.b.inttoptr(x, ctx.types.pointer(dst))
    return ctx.b.ptrtoint(x, ctx.types.compute(dst))


def lower_elementwise(ctx: "KernelLowering", op: ops.Op) -> None:
    ctx.set_result(op, elementwise(ctx, op, op.result.type.layout
                                   if isinstance(op.result.type, TileType) else None))


# -- index and shape ops -----------------------------------------------------------------------
def rematerialise(ctx: "KernelLowering", op: ops.Op, v: Value, layout: Layout) -> Optional[Regs]:
    """Emit ``op``'s result ``v`` in ``layout`` here; ``None`` when the layout cannot be
    reached without moving data (the caller then converts)."""
    shape = shape_of(v.type)
    if isinstance(op, ops.ArangeOp):
        return Regs(layout, shape, [ctx.b.add(c[0], ir.Constant(I32, op.start)) if op.start
                                    else c[0] for c in coords(ctx, layout, shape)])
    if isinstance(op, ops.ConstantOp):
        c = ctx.constant(elem_type(v.type), op.value)
        return Regs(layout, shape, [c] * len(register_indices(layout, shape)))
    if isinstance(op, ops.SplatOp):
        s = ctx.scalar(op.src)
        return Regs(layout, shape, [s] * len(register_indices(layout, shape)))
    if isinstance(op, ops.ExpandDimsOp):
        return _expand_dims(ctx, op, layout)
    if isinstance(op, ops.BroadcastOp):
        return _broadcast(ctx, op, layout)
    if isinstance(op, ops.PermuteOp):
        return _permute(ctx, op, layout)
    if isinstance(op, _ELEMENTWISE):
        return elementwise(ctx, op, layout)
    return None


def _expand_dims(ctx: "KernelLowering", op: ops.ExpandDimsOp, layout: Layout) -> Regs:
    shape = shape_of(op.result.type)
    if not shape_of(op.src.type):
        s = ctx.scalar(op.src)
        return Regs(layout, shape, [s] * len(register_indices(layout, shape)))
    src = ctx.tile(op.src, SliceLayout(layout, op.axis))
    src_index = {j: i for i, j in enumerate(register_indices(src.layout, src.shape))}
    values = [src.values[src_index[j[:op.axis] + j[op.axis + 1:]]]
              for j in register_indices(layout, shape)]
    return Regs(layout, shape, values)


def _broadcast(ctx: "KernelLowering", op: ops.BroadcastOp, layout: Layout) -> Regs:
    shape = shape_of(op.result.type)
    src_shape = shape_of(op.src.type)
    src = ctx.tile(op.src, layout)
    src_index = {j: i for i, j in enumerate(register_indices(layout, src_shape))}
    values = []
    for j in register_indices(layout, shape):
        k = tuple(0 if s == 1 and n != 1 else jd for jd, s, n in zip(j, src_shape, shape))
        values.append(src.values[src_index[k]])
    return Regs(layout, shape, values)


def _permute(ctx: "KernelLowering", op: ops.PermuteOp, layout: Layout) -> Optional[Regs]:
    if not isinstance(layout, BlockedLayout):
        return None
    order = tuple(op.order)
    inverse = tuple(order.index(i) for i in range(len(order)))
    shape = shape_of(op.result.type)
    src = ctx.tile(op.src, layout.permuted(inverse))
    src_index = {j: i for i, j in enumerate(register_indices(src.layout, src.shape))}
    values = []
    for j in register_indices(layout, shape):
        k = [0] * len(j)
        for i, jd in enumerate(j):
            k[order[i]] = jd
        values.append(src.values[src_index[tuple(k)]])
    return Regs(layout, shape, values)


def lower_shape_op(ctx: "KernelLowering", op: ops.Op) -> None:
    regs = rematerialise(ctx, op, op.result, op.result.type.layout)
    if regs is None:  # e.g. a permute wanted in a slice layout: build it blocked, convert
        blocked = default_blocked(shape_of(op.result.type), ctx.laid.num_warps, ctx.laid.warp_size)
        regs = convert(ctx, rematerialise(ctx, op, op.result, blocked), op.result.type.layout)
    ctx.set_result(op, regs)


def lower_index(ctx: "KernelLowering", op: ops.Op) -> None:
    ctx.set_result(op, rematerialise(ctx, op, op.result, op.result.type.layout))


def lower_constant(ctx: "KernelLowering", op: ops.ConstantOp) -> None:
    if isinstance(op.result.type, TileType):
        ctx.set_result(op, rematerialise(ctx, op, op.result, op.result.type.layout))
    else:
        ctx.set_result(op, ctx.constant(op.result.type, op.value))


def lower_program_id(ctx: "KernelLowering", op: ops.ProgramIdOp) -> None:
    ctx.set_result(op, ctx.target.program_id(ctx.entry_b, op.axis))


def lower_num_programs(ctx: "KernelLowering", op: ops.NumProgramsOp) -> None:
    ctx.set_result(op, ctx.target.num_programs(ctx.entry_b, op.axis))


def lower_reshape(ctx: "KernelLowering", op: ops.ReshapeOp) -> None:
    src = ctx.tile(op.src)
    ctx.set_result(op, through_shared(ctx, src, op.result.type.layout, shape_of(op.result.type)))


def lower_barrier(ctx: "KernelLowering", op: ops.BarrierOp) -> None:
    ctx.target.barrier(ctx.b)


def lower_print(ctx: "KernelLowering", op: ops.PrintOp) -> None:
    """Each thread prints the elements it owns (one line each, ``codegen.llvm.printing``):
    an element held in copies prints once, by its owner; a scalar prints from thread 0."""
    b = ctx.b
    elem, shape = elem_type(op.value.type), shape_of(op.value.type)
    text = print_format(elem, op.prefix, len(shape), op.hex)
    pids = [ctx.target.program_id(b, axis) for axis in range(3)]
    value = ctx.operand(op.value, None)
    try:
        if not isinstance(value, Regs):
            with b.if_then(b.icmp_unsigned("==", ctx.tid, ir.Constant(I32, 0))):
                ctx.target.printf(b, text, pids + [print_argument(b, ctx.ew, elem, value,
                                                                  op.hex)])
            return
        owner = owner_predicate(ctx, value.layout, shape)
        regs = register_indices(value.layout, shape)
        with b.if_then(owner) if owner is not None else contextlib.nullcontext():
            for j, coord, v in zip(regs, coords(ctx, value.layout, shape), value.values):
                if not register_is_replica(value.layout, shape, j):
                    ctx.target.printf(b, text, pids + list(coord)
                                      + [print_argument(b, ctx.ew, elem, v, op.hex)])
    except NotImplementedError:
        raise CompilationError(f"tl.device_print is not supported on {ctx.target.name} yet "
                               f"(run the kernel on cpu or the interpreter to print)",
                               op.loc) from None


def lower_assert(ctx: "KernelLowering", op: ops.AssertOp) -> None:
    """With debug, a violated condition writes the assert's number to the error word (the
    first failure wins) and the thread goes on: no trap, so the device stays usable."""
    if not ctx.debug:
        return
    b = ctx.b
    cond = ctx.operand(op.cond, None)
    values = cond.values if isinstance(cond, Regs) else [cond]
    ok = values[0]
    for v in values[1:]:
        ok = b.and_(ok, v)
    number = ir.Constant(I32, ctx.asserts.index(op) + 1)
    with b.if_then(b.not_(ok), likely=False):
        ctx.target.atomic_cas(b, ctx.error_word, ir.Constant(I32, 0), number, "monotonic", "monotonic")


def lower_assume(ctx: "KernelLowering", op: ops.AssumeOp) -> None:
    """The axis analysis has read the promise (``axis_info.assumed_non_negative``); a scalar
    one goes to LLVM as ``llvm.assume`` too."""
    cond = ctx.operand(op.cond, None)
    if not isinstance(cond, Regs):
        ctx.b.assume(cond)


def lower_call(ctx: "KernelLowering", op: ops.CallOp) -> None:
    ctx.fail(op, f"call to '{op.callee}' was not inlined before GPU lowering")


LOWERINGS = {
    **{cls: lower_elementwise for cls in _ELEMENTWISE},
    ops.ExpandDimsOp: lower_shape_op, ops.BroadcastOp: lower_shape_op, ops.PermuteOp: lower_shape_op,
    ops.ArangeOp: lower_index, ops.SplatOp: lower_index, ops.ConstantOp: lower_constant,
    ops.ProgramIdOp: lower_program_id, ops.NumProgramsOp: lower_num_programs,
    ops.ReshapeOp: lower_reshape, ops.BarrierOp: lower_barrier, ops.AssertOp: lower_assert, ops.PrintOp: lower_print,
    ops.AssumeOp: lower_assume,
    ops.CallOp: lower_call,
}
