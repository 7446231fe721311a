"""Structured control flow: ``for``, ``if``, ``while``, ``assert`` and ``barrier``.

Conditions and loop bounds are scalars, the same in every work-item, so barriers inside
loops and branches are reached by the whole work-group.  Loop-carried and branch-yielded
tiles are private arrays declared before the op; a ``yield`` copies into them after
computing every yielded value (a parallel copy: swapping two carried tiles is correct).

A ``for`` loop runs while ``iv < upper`` and ends, as Python's ``range`` does, where the
next induction value would pass ``upper`` (no wrap-around); a step that is not positive runs
no iteration (with ``debug=True`` it fails the launch, as the interpreter does).
"""
from __future__ import annotations

from typing import Any

from anytile.ir import (AssertOp, Block, ConditionOp, ForOp, IfOp, PointerType, PrintOp,
                        ScalarType, TileType, Value, WhileOp, YieldOp, elem_type, walk)
from anytile.ir import Trait

from .ctypes import scalar_name, unsigned_name

__all__ = ["ControlEmitter"]


def _writes_memory(block: Block) -> bool:
    return any(Trait.SIDE_EFFECT in op.TRAITS and Trait.MEMORY in op.TRAITS for op in walk(block))


class ControlEmitter:
    """The part of ``KernelEmitter`` that writes control flow."""

    # -- carried values ------------------------------------------------------------------------
    def declare_slots(self, values: list[Value], prefix: str) -> list[Any]:
        """C variables (scalars) or private arrays (tiles) that will hold ``values``."""
        slots = []
        for v in values:
            if isinstance(v.type, TileType):
                slots.append(self.declare_stored(v.type, prefix))
            else:
                name = self.w.fresh(prefix)
                self.w.line(f"{scalar_name(v.type)} {name};")
                slots.append(name)
        return slots

    def bind_slots(self, values: list[Value], slots: list[Any]) -> None:
        for v, s in zip(values, slots):
            if isinstance(s, str):
                self.scalars[v] = s
            else:
                self.stored[v] = s

    def assign_slots(self, slots: list[Any], values: list[Value]) -> None:
        """``slots = values`` as a parallel copy."""
        copies = []
        for slot, v in zip(slots, values):
            if isinstance(slot, str):
                copies.append((slot, self.arith.let(self.chunk(v, self.scalar_point()).expr,
                                                    v.type, 1, "y")))
            else:
                stored = self.stored.get(v)
                if stored is not None and stored.name == slot.name:
                    continue
                if stored is None or any(stored.name == s.name for s in slots
                                         if not isinstance(s, str)):
                    stored = self.store_tile_unregistered(v)
                copies.append((slot, stored))
        for slot, source in copies:
            if isinstance(slot, str):
                self.w.line(f"{slot} = {source};")
                continue
            with self.w.block(f"for (int c = 0; c < {slot.layout.chunks}; c++)"):
                self.w.line(f"{slot.name}[c] = {source.name}[c];")

    def store_tile_unregistered(self, value: Value) -> Any:
        t = value.type
        stored = self.declare_stored(t, "y")
        with self.chunk_loop(t.layout, t.shape) as point:
            self.w.line(f"{stored.name}[{point.natural[1]}] = {self.chunk(value, point).as_vector()};")
        return stored

    # -- for -----------------------------------------------------------------------------------
    def emit_for(self, op: ForOp) -> None:
        carried = self.declare_slots(op.results, "c")
        self.assign_slots(carried, op.inits)
        iv_t: ScalarType = op.lower.type
        point = self.scalar_point()
        lo, hi, st = (self.chunk(v, point).expr for v in (op.lower, op.upper, op.step))
        s, u = scalar_name(iv_t), unsigned_name(iv_t)
        signed = s if iv_t.is_signed else {"uchar": "char", "ushort": "short", "uint": "int",
                                           "ulong": "long"}[s]
        iv = self.w.fresh("iv")
        step = self.w.fresh("st")
        upper = self.w.fresh("hi")
        self.w.line(f"{signed} {iv} = ({signed})({lo}), {upper} = ({signed})({hi}), "
                    f"{step} = ({signed})({st});")
        if self.debug:
            self.runtime_check(f"{step} <= 0", "for-loop step must be positive", op.loc)
        self.enter_region(op.body)
        with self.w.block(f"if ({step} > 0) while ({iv} < {upper})"):
            self.bind_slots(op.body.args, [f"(({s}){iv})"] + carried)
            self.emit_region(op.body, carried)
            with self.w.block(f"if (({u}){upper} - ({u}){iv} <= ({u}){step})"):
                self.w.line("break;")
            self.w.line(f"{iv} += {step};")
        self.leave_region(op.body)
        self.bind_slots(op.results, carried)

    # -- if ------------------------------------------------------------------------------------
    def emit_if(self, op: IfOp) -> None:
        slots = self.declare_slots(op.results, "f")
        cond = self.chunk(op.cond, self.scalar_point()).expr
        before = self.pending_writes
        with self.w.block(f"if ({cond})"):
            self.emit_region(op.then_body, slots)
        after_then, self.pending_writes = self.pending_writes, before
        with self.w.block("else"):
            self.emit_region(op.else_body, slots)
        self.pending_writes = self.pending_writes or after_then
        self.bind_slots(op.results, slots)

    # -- while ---------------------------------------------------------------------------------
    def emit_while(self, op: WhileOp) -> None:
        carried = self.declare_slots(op.before.args, "w")
        self.assign_slots(carried, op.inits)
        passed = self.declare_slots(op.after.args, "a")
        results = self.declare_slots(op.results, "wr")
        self.enter_region(op.before, op.after)
        with self.w.block("while (1)"):
            self.bind_slots(op.before.args, carried)
            self.emit_block(op.before)
            condition = op.before.ops[-1]
            assert isinstance(condition, ConditionOp)
            cond = self.chunk(condition.cond, self.scalar_point()).expr
            with self.w.block(f"if (!({cond}))"):
                self.assign_slots(results, condition.values)
                self.w.line("break;")
            self.assign_slots(passed, condition.values)
            self.bind_slots(op.after.args, passed)
            self.emit_region(op.after, carried)
        self.leave_region(op.before, op.after)
        self.bind_slots(op.results, results)

    # -- regions -------------------------------------------------------------------------------
    def emit_region(self, block: Block, slots: Any = None) -> list[str]:
        """Emit ``block``; its ``yield`` is copied into ``slots`` (or its scalar values are
        returned, for combine regions)."""
        self.emit_block(block)
        term = block.ops[-1] if block.ops else None
        values = term.values if isinstance(term, YieldOp) else []
        if slots is not None:
            self.assign_slots(slots, values)
            return []
        return [self.chunk(v, self.scalar_point()).expr for v in values]

    def enter_region(self, *blocks: Block) -> None:
        """Before code that may run again: writes of an earlier iteration may be pending."""
        self.saved_writes.append(self.pending_writes)
        if any(_writes_memory(b) for b in blocks):
            self.pending_writes = True

    def leave_region(self, *blocks: Block) -> None:
        before = self.saved_writes.pop()
        self.pending_writes = before or any(_writes_memory(b) for b in blocks) or \
            self.pending_writes

    # -- assert, barrier -----------------------------------------------------------------------
    def emit_assert(self, op: AssertOp) -> None:
        """With ``debug=True``: a false lane records this assert in the error word."""
        if not self.debug:
            return
        t = op.cond.type
        index = len(self.checks) + 1
        self.checks.append([op.message, op.loc.file, op.loc.line])
        if not isinstance(t, TileType):
            cond = self.chunk(op.cond, self.scalar_point()).expr
            self._record_failure(f"!({cond})", index)
            return
        with self.chunk_loop(t.layout, t.shape) as point:
            c = self.chunk(op.cond, point)
            failed = f"!({c.expr})" if c.is_uniform else f"any({c.as_vector()} == (char{c.lanes})0)"
            self._record_failure(failed, index)

    def emit_print(self, op: PrintOp) -> None:
        """``tl.device_print`` through OpenCL C's ``printf``: one line per element, printed by
        the work-item that holds it (one copy of replicated elements, scalars by work-item
        0), in the forms ``ir.PrintOp`` defines."""
        elem = elem_type(op.value.type)
        head = "pid (%d, %d, %d) "
        tail = (op.prefix.replace("%", "%%") + " " if op.prefix else "") + \
            _value_format(elem, op.hex) + "\\n"
        if not isinstance(op.value.type, TileType):
            value = self.chunk(op.value, self.scalar_point()).expr
            with self.w.block("if (lid == 0)"):
                self.w.line(f'printf("{head}{tail}", pid0, pid1, pid2, '
                            f'{self._printf_value(elem, value, op.hex)});')
            return
        t = op.value.type
        guard = f"if (lid < {t.layout.owners})" if t.layout.replicated else ""
        idx = "idx (" + ", ".join(["%d"] * len(t.shape)) + ") "
        with self.chunk_loop(t.layout, t.shape) as point:
            c = self.chunk(op.value, point)
            dims = point.dims()
            with self.w.block(guard):
                for j in range(point.lanes):
                    coords = ", ".join(_lane(d, j) for d in dims)
                    value = self._printf_value(elem, _lane(c, j), op.hex)
                    self.w.line(f'printf("{head}{idx}{tail}", pid0, pid1, pid2, {coords}, '
                                f'{value});')

    def _printf_value(self, elem: Any, value: str, as_hex: bool) -> str:
        """``value`` as the argument ``_value_format`` expects (16-bit floats are held as
        their bits)."""
        if isinstance(elem, PointerType):
            return f"(ulong)({value})"
        if elem.is_float:
            if elem.bits == 16:
                return f"(ulong)({value})" if as_hex else \
                    f"(float)({self.arith.to_f32(value, elem, 1)})"
            if as_hex:
                return f"as_ulong({value})" if elem.bits == 64 else f"(ulong)as_uint({value})"
            return f"(double)({value})" if elem.bits == 64 else f"(float)({value})"
        if elem.is_signed and not as_hex:
            return f"(long)({value})"
        mask = "" if elem.bits >= 64 else f" & 0x{(1 << max(elem.bits, 1)) - 1:x}UL"
        return f"((ulong)({value}){mask})"

    def runtime_check(self, failed: str, message: str, loc: Any) -> None:
        index = len(self.checks) + 1
        self.checks.append([message, loc.file, loc.line])
        self._record_failure(failed, index)

    def _record_failure(self, failed: str, index: int) -> None:
        with self.w.block(f"if ({failed})"):
            self.w.line(f"atomic_cmpxchg(at_error, 0, {index});")

    def emit_barrier(self) -> None:
        if self.work_items > 1:
            self.w.line("barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);")
        else:
            self.w.line("mem_fence(CLK_GLOBAL_MEM_FENCE);")
        self.pending_writes = False


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


