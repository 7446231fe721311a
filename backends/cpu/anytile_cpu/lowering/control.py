"""Structured control flow and run-time checks, a mixin of ``ProgramLowering``.

Loop-carried and if-yielded values live in stack slots: scalar slots (LLVM's mem2reg makes
them registers again) or tile buffers.  Checks made while running (``device_assert``, a
for-loop step that must be positive) write their number to the launch's error word.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Union

from llvmlite import ir

from anytile.codegen.llvm.printing import print_argument, print_format
from anytile.codegen.llvm.types import I1, I32, declare, intrinsic, string_constant
from anytile.errors import CompilationError
from anytile.ir import (AssertOp, ConditionOp, ForOp, IfOp, PrintOp, TileType, Value, WhileOp,
                        elem_type, shape_of)
from anytile.ir.nodes import Loc

from .values import Point, TileBuffer

if TYPE_CHECKING:
    from .checked import CheckedAccess

__all__ = ["ControlFlowLowering", "PrintLowering", "RuntimeCheck", "Slot"]

Slot = Union[TileBuffer, ir.Value]
I8P = ir.IntType(8).as_pointer()


@dataclass(frozen=True)
class RuntimeCheck:
    """A check the generated code makes while running; failure ``i`` writes ``i + 1`` to the
    launch's error word.  ``is_assert``: a user's ``device_assert`` (else a violated IR rule,
    such as a for-loop step that is not positive); ``access``: what a checked-mode check
    (``checked``) failing reports."""

    message: str
    loc: Optional[Loc]
    is_assert: bool = True
    access: Optional["CheckedAccess"] = None


class ControlFlowLowering:
    """Mixin: needs ``b``, ``scalars``, ``tiles``, ``asserts``, ``error_word`` and the
    buffer helpers of ``ProgramLowering``."""

    def lower_assert(self, op: AssertOp) -> None:
        index = len(self.asserts)
        self.asserts.append(RuntimeCheck(op.message, op.loc))
        b = self.b

        def check(p: Point) -> None:
            c = self.value_at(op.cond, p)
            if p.width:
                c = b.call(intrinsic(self.module, "llvm.vector.reduce.and", I1, [c.type],
                                     [c.type]), [c])
            with b.if_then(b.not_(c), likely=False):
                b.store(ir.Constant(I32, index + 1), self.error_word, align=4)
        self.for_each_point(shape_of(op.cond.type), check)

    # -- control flow --------------------------------------------------------------------------
    def make_slots(self, values_types: list) -> list[Slot]:
        return [self.new_buffer(t.shape, t.elem) if isinstance(t, TileType)
                else self.new_scalar_slot(t) for t in values_types]

    def bind_slots(self, args: list[Value], slots: list[Slot]) -> None:
        for a, s in zip(args, slots):
            if isinstance(s, TileBuffer):
                self.tiles[a] = s
            else:
                self.scalars[a] = self.load_slot(s)

    def assign(self, values: list[Value], slots: list[Slot]) -> None:
        """Write ``values`` into ``slots`` as one parallel assignment (values may read the
        slots themselves, e.g. a loop that swaps two carried tiles)."""
        slot_ptrs = {id(s.ptr) for s in slots if isinstance(s, TileBuffer)}
        sources: list = []
        for v, s in zip(values, slots):
            if not isinstance(s, TileBuffer):
                sources.append(self.scalars[v])
                continue
            ref = self.tiles[v]
            if isinstance(ref, TileBuffer) and (ref.ptr is s.ptr or id(ref.ptr) not in slot_ptrs):
                sources.append(v)
            else:
                tmp = self.new_buffer(s.shape, s.elem)
                self.copy_into(v, tmp)
                sources.append(tmp)
        for src, s in zip(sources, slots):
            if not isinstance(s, TileBuffer):
                self.b.store(src, s)
            elif isinstance(src, TileBuffer):
                self._copy_buffer(src, s)
            else:
                self.copy_into(src, s)

    def _copy_buffer(self, src: TileBuffer, dst: TileBuffer) -> None:
        fake = Value(TileType(dst.shape, dst.elem))
        self.tiles[fake] = src
        self.copy_into(fake, dst)
        del self.tiles[fake]

    def lower_for(self, op: ForOp) -> None:
        b = self.b
        slots = self.make_slots([v.type for v in op.inits])
        self.assign(op.inits, slots)
        lower, upper, step = (self.scalars[v] for v in (op.lower, op.upper, op.step))
        header = b.append_basic_block("for")
        body = b.append_basic_block("for.body")
        done = b.append_basic_block("for.end")
        self.check_positive_step(op, step, done)
        pre = b.block
        b.branch(header)
        b.position_at_end(header)
        iv = b.phi(lower.type)
        iv.add_incoming(lower, pre)
        b.cbranch(b.icmp_signed("<", iv, upper), body, done)
        b.position_at_end(body)
        self.scalars[op.body.args[0]] = iv
        self.bind_slots(op.body.args[1:], slots)
        term = self.lower_block(op.body)
        self.assign(term.values if term is not None else [], slots)
        nxt = b.add(iv, step)
        iv.add_incoming(nxt, b.block)
        # the loop ends, as ``range`` does, when the next value would pass the type's maximum
        b.cbranch(b.icmp_signed("<", nxt, iv), done, header)
        b.position_at_end(done)
        self.bind_slots(op.results, slots)

    def check_positive_step(self, op: ForOp, step: ir.Value, skip: ir.Block) -> None:
        """Branch to ``skip`` with a launch error when a runtime ``step`` is not positive
        (the IR requires ``step > 0``; the interpreter reports it too)."""
        if isinstance(step, ir.Constant) and int(step.constant) > 0:
            return
        b = self.b
        index = len(self.asserts)
        self.asserts.append(RuntimeCheck("for-loop step must be positive", op.loc,
                                         is_assert=False))
        bad = b.icmp_signed("<=", step, ir.Constant(step.type, 0))
        with b.if_then(bad, likely=False):
            b.store(ir.Constant(I32, index + 1), self.error_word, align=4)
            b.branch(skip)

    def lower_if(self, op: IfOp) -> None:
        slots = self.make_slots([r.type for r in op.results])
        with self.b.if_else(self.scalars[op.cond]) as (then, otherwise):
            for region, branch in ((op.then_body, then), (op.else_body, otherwise)):
                with branch:
                    term = self.lower_block(region)
                    if op.results:
                        self.assign(term.values, slots)
        self.bind_slots(op.results, slots)

    def lower_while(self, op: WhileOp) -> None:
        b = self.b
        before_slots = self.make_slots([v.type for v in op.inits])
        after_slots = self.make_slots([r.type for r in op.results])
        self.assign(op.inits, before_slots)
        header = b.append_basic_block("while")
        body = b.append_basic_block("while.body")
        done = b.append_basic_block("while.end")
        b.branch(header)
        b.position_at_end(header)
        self.bind_slots(op.before.args, before_slots)
        cond_op = self.lower_block(op.before)
        if not isinstance(cond_op, ConditionOp):
            raise CompilationError("while loop 'before' region must end with condition", op.loc)
        self.assign(cond_op.values, after_slots)
        b.cbranch(self.scalars[cond_op.cond], body, done)
        b.position_at_end(body)
        self.bind_slots(op.after.args, after_slots)
        term = self.lower_block(op.after)
        self.assign(term.values if term is not None else [], before_slots)
        b.branch(header)
        b.position_at_end(done)
        self.bind_slots(op.results, after_slots)


class PrintLowering:
    """Mixin: ``tl.device_print`` through the C library's ``printf`` (then ``fflush``), one
    call per element (``codegen.llvm.printing``).  Needs ``b``, ``module``, ``ew``,
    ``program_ids``, ``for_each_point`` and ``value_at`` of ``ProgramLowering``."""

    def lower_print(self, op: PrintOp) -> None:
        elem = elem_type(op.value.type)
        shape = shape_of(op.value.type)
        text = string_constant(self.module, print_format(elem, op.prefix, len(shape), op.hex))
        printf = declare(self.module, "printf", I32, [I8P], var_arg=True)
        fflush = declare(self.module, "fflush", I32, [I8P])
        b = self.b

        def emit(p: Point) -> None:
            args = [b.bitcast(text, I8P), *self.program_ids]
            args += [b.trunc(idx.base, I32) for idx in p.indices]
            args.append(print_argument(b, self.ew, elem, self.value_at(op.value, p), op.hex))
            b.call(printf, args)
            b.call(fflush, [ir.Constant(I8P, None)])
        self.for_each_point(shape, emit, vector=False)
