"""Structured control flow: ``for``, ``if``, ``while``, ``assert``, ``print`` and ``barrier``.

Conditions and loop bounds are scalars, the same in every work-item, so barriers inside
loops and branches are reached by the whole work-group.  Loop-carried and branch-yielded
tiles are private arrays declared before the op; a ``yield`` copies into them after
computing every yielded value (a parallel copy: swapping two carried tiles is correct).

A ``for`` loop runs while ``iv < upper`` and ends, as Python's ``range`` does, where the
next induction value would pass ``upper`` (no wrap-around); a step that is not positive runs
no iteration (with ``debug=True`` it fails the launch, as the interpreter does).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anytile.errors import BOUNDS_PREFIX
from anytile.ir import (AssertOp, BarrierOp, Block, ConditionOp, ForOp, IfOp, PointerType,
                        PrintOp, ScalarType, TileType, Value, WhileOp, YieldOp, elem_type, walk)
from anytile.ir import Trait

from .checks import emit_bounds_check
from .chunk import scalar_point
from .ctypes import scalar_name, unsigned_name
from .values import chunk_loop, declare_stored

if TYPE_CHECKING:
    from .context import EmitContext

__all__ = ["EMITTERS", "emit_region", "runtime_check"]


def _writes_memory(block: Block) -> bool:
    return any(Trait.SIDE_EFFECT in op.TRAITS and Trait.MEMORY in op.TRAITS for op in walk(block))


# -- carried values ------------------------------------------------------------------------
def declare_slots(ctx: "EmitContext", values: list[Value], prefix: str) -> list[Any]:
    """C variables (scalars) or private arrays (tiles) that will hold ``values``."""
    slots = []
    for v in values:
        if isinstance(v.type, TileType):
            slots.append(declare_stored(ctx, v.type, prefix))
        else:
            name = ctx.w.fresh(prefix)
            ctx.w.line(f"{scalar_name(v.type)} {name};")
            slots.append(name)
    return slots


def bind_slots(ctx: "EmitContext", values: list[Value], slots: list[Any]) -> None:
    for v, s in zip(values, slots):
        if isinstance(s, str):
            ctx.scalars[v] = s
        else:
            ctx.stored[v] = s


def assign_slots(ctx: "EmitContext", slots: list[Any], values: list[Value]) -> None:
    """``slots = values`` as a parallel copy."""
    copies = []
    for slot, v in zip(slots, values):
        if isinstance(slot, str):
            copies.append((slot, ctx.arith.let(ctx.chunk(v, scalar_point()).expr,
                                                v.type, 1, "y")))
        else:
            stored = ctx.stored.get(v)
            if stored is not None and stored.name == slot.name:
                continue
            if stored is None or any(stored.name == s.name for s in slots
                                     if not isinstance(s, str)):
                stored = store_tile_unregistered(ctx, v)
            copies.append((slot, stored))
    for slot, source in copies:
        if isinstance(slot, str):
            ctx.w.line(f"{slot} = {source};")
            continue
        with ctx.w.block(f"for (int c = 0; c < {slot.layout.chunks}; c++)"):
            ctx.w.line(f"{slot.name}[c] = {source.name}[c];")


def store_tile_unregistered(ctx: "EmitContext", value: Value) -> Any:
    t = value.type
    stored = declare_stored(ctx, t, "y")
    with chunk_loop(ctx, t.layout, t.shape) as point:
        ctx.w.line(f"{stored.name}[{point.natural[1]}] = {ctx.chunk(value, point).as_vector()};")
    return stored


# -- for -----------------------------------------------------------------------------------
def emit_for(ctx: "EmitContext", op: ForOp) -> None:
    carried = declare_slots(ctx, op.results, "c")
    assign_slots(ctx, carried, op.inits)
    iv_t: ScalarType = op.lower.type
    point = scalar_point()
    lo, hi, st = (ctx.chunk(v, point).expr for v in (op.lower, op.upper, op.step))
    s, u = scalar_name(iv_t), unsigned_name(iv_t)
    signed = s if iv_t.is_signed else {"uchar": "char", "ushort": "short", "uint": "int",
                                       "ulong": "long"}[s]
    iv = ctx.w.fresh("iv")
    step = ctx.w.fresh("st")
    upper = ctx.w.fresh("hi")
    ctx.w.line(f"{signed} {iv} = ({signed})({lo}), {upper} = ({signed})({hi}), "
                f"{step} = ({signed})({st});")
    if ctx.debug:
        runtime_check(ctx, f"{step} <= 0", "for-loop step must be positive", op.loc)
    enter_region(ctx, op.body)
    with ctx.w.block(f"if ({step} > 0) while ({iv} < {upper})"):
        bind_slots(ctx, op.body.args, [f"(({s}){iv})"] + carried)
        emit_region(ctx, op.body, carried)
        with ctx.w.block(f"if (({u}){upper} - ({u}){iv} <= ({u}){step})"):
            ctx.w.line("break;")
        ctx.w.line(f"{iv} += {step};")
    leave_region(ctx, op.body)
    bind_slots(ctx, op.results, carried)


# -- if ------------------------------------------------------------------------------------
def emit_if(ctx: "EmitContext", op: IfOp) -> None:
    slots = declare_slots(ctx, op.results, "f")
    cond = ctx.chunk(op.cond, scalar_point()).expr
    before = ctx.pending_writes
    with ctx.w.block(f"if ({cond})"):
        emit_region(ctx, op.then_body, slots)
    after_then, ctx.pending_writes = ctx.pending_writes, before
    with ctx.w.block("else"):
        emit_region(ctx, op.else_body, slots)
    ctx.pending_writes = ctx.pending_writes or after_then
    bind_slots(ctx, op.results, slots)


# -- while ---------------------------------------------------------------------------------
def emit_while(ctx: "EmitContext", op: WhileOp) -> None:
    carried = declare_slots(ctx, op.before.args, "w")
    assign_slots(ctx, carried, op.inits)
    passed = declare_slots(ctx, op.after.args, "a")
    results = declare_slots(ctx, op.results, "wr")
    enter_region(ctx, op.before, op.after)
    with ctx.w.block("while (1)"):
        bind_slots(ctx, op.before.args, carried)
        ctx.emit_block(op.before)
        condition = op.before.ops[-1]
        assert isinstance(condition, ConditionOp)
        cond = ctx.chunk(condition.cond, scalar_point()).expr
        with ctx.w.block(f"if (!({cond}))"):
            assign_slots(ctx, results, condition.values)
            ctx.w.line("break;")
        assign_slots(ctx, passed, condition.values)
        bind_slots(ctx, op.after.args, passed)
        emit_region(ctx, op.after, carried)
    leave_region(ctx, op.before, op.after)
    bind_slots(ctx, op.results, results)


# -- regions -------------------------------------------------------------------------------
def emit_region(ctx: "EmitContext", block: Block, slots: Any = None) -> list[str]:
    """Emit ``block``; its ``yield`` is copied into ``slots`` (or its scalar values are
    returned, for combine regions)."""
    ctx.emit_block(block)
    term = block.ops[-1] if block.ops else None
    values = term.values if isinstance(term, YieldOp) else []
    if slots is not None:
        assign_slots(ctx, slots, values)
        return []
    return [ctx.chunk(v, scalar_point()).expr for v in values]


def enter_region(ctx: "EmitContext", *blocks: Block) -> None:
    """Before code that may run again: writes of an earlier iteration may be pending."""
    ctx.saved_writes.append(ctx.pending_writes)
    if any(_writes_memory(b) for b in blocks):
        ctx.pending_writes = True


def leave_region(ctx: "EmitContext", *blocks: Block) -> None:
    before = ctx.saved_writes.pop()
    ctx.pending_writes = before or any(_writes_memory(b) for b in blocks) or \
        ctx.pending_writes


# -- assert, barrier -----------------------------------------------------------------------
def emit_assert(ctx: "EmitContext", op: AssertOp) -> None:
    """With ``debug=True``: a false lane records this assert in the error word."""
    if not ctx.debug:
        return
    if op.message.startswith(BOUNDS_PREFIX):
        emit_bounds_check(ctx, op)
        return
    t = op.cond.type
    index = len(ctx.checks) + 1
    ctx.checks.append([op.message, op.loc.file, op.loc.line])
    ctx.check_facts.append(None)
    if not isinstance(t, TileType):
        cond = ctx.chunk(op.cond, scalar_point()).expr
        _record_failure(ctx, f"!({cond})", index)
        return
    with chunk_loop(ctx, t.layout, t.shape) as point:
        c = ctx.chunk(op.cond, point)
        failed = f"!({c.expr})" if c.is_uniform else f"any({c.as_vector()} == (char{c.lanes})0)"
        _record_failure(ctx, failed, index)


def emit_print(ctx: "EmitContext", op: PrintOp) -> None:
    """``tl.device_print`` through OpenCL C's ``printf``: one line per element, printed by
    the work-item that holds it (one copy of replicated elements, scalars by work-item
    0), in the forms ``ir.PrintOp`` defines."""
    elem = elem_type(op.value.type)
    head = "pid (%d, %d, %d) "
    tail = (op.prefix.replace("%", "%%") + " " if op.prefix else "") + \
        _value_format(elem, op.hex) + "\\n"
    if not isinstance(op.value.type, TileType):
        value = ctx.chunk(op.value, scalar_point()).expr
        with ctx.w.block("if (lid == 0)"):
            ctx.w.line(f'printf("{head}{tail}", pid0, pid1, pid2, '
                        f'{_printf_value(ctx, elem, value, op.hex)});')
        return
    t = op.value.type
    guard = f"if (lid < {t.layout.owners})" if t.layout.replicated else ""
    idx = "idx (" + ", ".join(["%d"] * len(t.shape)) + ") "
    with chunk_loop(ctx, t.layout, t.shape) as point:
        c = ctx.chunk(op.value, point)
        dims = point.dims()
        with ctx.w.block(guard):
            for j in range(point.lanes):
                coords = ", ".join(_lane(d, j) for d in dims)
                value = _printf_value(ctx, elem, _lane(c, j), op.hex)
                ctx.w.line(f'printf("{head}{idx}{tail}", pid0, pid1, pid2, {coords}, '
                            f'{value});')


def _printf_value(ctx: "EmitContext", elem: Any, value: str, as_hex: bool) -> str:
    """``value`` as the argument ``_value_format`` expects (16-bit and 8-bit floats are held
    as their bits)."""
    if isinstance(elem, PointerType):
        return f"(ulong)({value})"
    if elem.is_float:
        if elem.bits < 32:
            return f"(ulong)({value})" if as_hex else \
                f"(float)({ctx.arith.to_f32(value, elem, 1)})"
        if as_hex:
            return f"as_ulong({value})" if elem.bits == 64 else f"(ulong)as_uint({value})"
        return f"(double)({value})" if elem.bits == 64 else f"(float)({value})"
    if elem.is_signed and not as_hex:
        return f"(long)({value})"
    mask = "" if elem.bits >= 64 else f" & 0x{(1 << max(elem.bits, 1)) - 1:x}UL"
    return f"((ulong)({value}){mask})"


def runtime_check(ctx: "EmitContext", failed: str, message: str, loc: Any) -> None:
    index = len(ctx.checks) + 1
    ctx.checks.append([message, loc.file, loc.line])
    ctx.check_facts.append(None)
    _record_failure(ctx, failed, index)


def _record_failure(ctx: "EmitContext", failed: str, index: int) -> None:
    with ctx.w.block(f"if ({failed})"):
        ctx.w.line(f"atomic_cmpxchg(at_error, 0, {index});")


def emit_barrier(ctx: "EmitContext", op: BarrierOp) -> None:
    if ctx.work_items > 1:
        ctx.w.line("barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);")
    else:
        ctx.w.line("mem_fence(CLK_GLOBAL_MEM_FENCE);")
    ctx.pending_writes = False


def _lane(c: Any, j: int) -> str:
    """Lane ``j`` of a chunk as a scalar C expression."""
    if c.kind != "vector" or c.lanes == 1:
        return c.lane(str(j))
    return f"({c.expr}).s{j:x}"


def _value_format(elem: Any, as_hex: bool) -> str:
    if isinstance(elem, PointerType) or as_hex:
        return "0x%lx"
    if elem.is_float:
        return "%.17g" if elem.bits == 64 else "%.9g"
    return "%ld" if elem.is_signed else "%lu"


EMITTERS = {ForOp: emit_for, IfOp: emit_if, WhileOp: emit_while, AssertOp: emit_assert,
            PrintOp: emit_print, BarrierOp: emit_barrier}
