"""Structured control flow, ``device_assert`` and ``device_print``.

Loop-carried and if-yielded values live in stack slots: scalar slots (LLVM's mem2reg makes
them registers again) or tile buffers.  Checks made while running (``device_assert``, a
for-loop step that must be positive) write their number to the launch's error word.  Each
iteration of a ``for`` or ``while`` loop reads that word and leaves the program when it is
set: a launch that is cancelled (Ctrl-C writes ``launch.CANCELLED`` there) or has failed
stops inside a long program, not only between programs.
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
    from .program import ProgramLowering

__all__ = ["LOWERINGS", "RuntimeCheck", "Slot"]

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


def lower_assert(ctx: "ProgramLowering", op: AssertOp) -> None:
    index = len(ctx.asserts)
    ctx.asserts.append(RuntimeCheck(op.message, op.loc))
    b = ctx.b

    def check(p: Point) -> None:
        c = ctx.value_at(op.cond, p)
        if p.width:
            c = b.call(intrinsic(ctx.module, "llvm.vector.reduce.and", I1, [c.type],
                                 [c.type]), [c])
        with b.if_then(b.not_(c), likely=False):
            b.store(ir.Constant(I32, index + 1), ctx.error_word, align=4)
    ctx.for_each_point(shape_of(op.cond.type), check)


def make_slots(ctx: "ProgramLowering", values_types: list) -> list[Slot]:
    """A stack slot per value of these types: a buffer for a tile, a scalar slot else."""
    return [ctx.new_buffer(t.shape, t.elem) if isinstance(t, TileType)
            else ctx.new_scalar_slot(t) for t in values_types]


def bind_slots(ctx: "ProgramLowering", args: list[Value], slots: list[Slot]) -> None:
    for a, s in zip(args, slots):
        if isinstance(s, TileBuffer):
            ctx.tiles[a] = s
        else:
            ctx.scalars[a] = ctx.load_slot(s)


def assign(ctx: "ProgramLowering", values: list[Value], slots: list[Slot]) -> None:
    """Write ``values`` into ``slots`` as one parallel assignment (values may read the
    slots themselves, e.g. a loop that swaps two carried tiles)."""
    slot_ptrs = {id(s.ptr) for s in slots if isinstance(s, TileBuffer)}
    sources: list = []
    for v, s in zip(values, slots):
        if not isinstance(s, TileBuffer):
            sources.append(ctx.scalars[v])
            continue
        ref = ctx.tiles[v]
        if isinstance(ref, TileBuffer) and (ref.ptr is s.ptr or id(ref.ptr) not in slot_ptrs):
            sources.append(v)
        else:
            tmp = ctx.new_buffer(s.shape, s.elem)
            ctx.copy_into(v, tmp)
            sources.append(tmp)
    for src, s in zip(sources, slots):
        if not isinstance(s, TileBuffer):
            ctx.b.store(src, s)
        elif isinstance(src, TileBuffer):
            _copy_buffer(ctx, src, s)
        else:
            ctx.copy_into(src, s)


def _copy_buffer(ctx: "ProgramLowering", src: TileBuffer, dst: TileBuffer) -> None:
    fake = Value(TileType(dst.shape, dst.elem))
    ctx.tiles[fake] = src
    ctx.copy_into(fake, dst)
    del ctx.tiles[fake]


def _stop_if_stopped(ctx: "ProgramLowering") -> None:
    """Leave the program when the launch's error word is set (an atomic read: another
    thread writes it, and it must not be hoisted out of the loop)."""
    b = ctx.b
    word = b.load_atomic(ctx.error_word, "monotonic", 4, typ=I32)
    with b.if_then(b.icmp_signed("!=", word, ir.Constant(I32, 0)), likely=False):
        b.ret_void()


def lower_for(ctx: "ProgramLowering", op: ForOp) -> None:
    b = ctx.b
    slots = make_slots(ctx, [v.type for v in op.inits])
    assign(ctx, op.inits, slots)
    lower, upper, step = (ctx.scalars[v] for v in (op.lower, op.upper, op.step))
    header = b.append_basic_block("for")
    body = b.append_basic_block("for.body")
    done = b.append_basic_block("for.end")
    check_positive_step(ctx, op, step, done)
    pre = b.block
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lower.type)
    iv.add_incoming(lower, pre)
    b.cbranch(b.icmp_signed("<", iv, upper), body, done)
    b.position_at_end(body)
    _stop_if_stopped(ctx)
    ctx.scalars[op.body.args[0]] = iv
    bind_slots(ctx, op.body.args[1:], slots)
    term = ctx.lower_block(op.body)
    assign(ctx, term.values if term is not None else [], slots)
    nxt = b.add(iv, step)
    iv.add_incoming(nxt, b.block)
    # the loop ends, as ``range`` does, when the next value would pass the type's maximum
    b.cbranch(b.icmp_signed("<", nxt, iv), done, header)
    b.position_at_end(done)
    bind_slots(ctx, op.results, slots)


def check_positive_step(ctx: "ProgramLowering", op: ForOp, step: ir.Value,
                        skip: ir.Block) -> None:
    """Branch to ``skip`` with a launch error when a runtime ``step`` is not positive
    (the IR requires ``step > 0``; the interpreter reports it too)."""
    if isinstance(step, ir.Constant) and int(step.constant) > 0:
        return
    b = ctx.b
    index = len(ctx.asserts)
    ctx.asserts.append(RuntimeCheck("for-loop step must be positive", op.loc,
                                    is_assert=False))
    bad = b.icmp_signed("<=", step, ir.Constant(step.type, 0))
    with b.if_then(bad, likely=False):
        b.store(ir.Constant(I32, index + 1), ctx.error_word, align=4)
        b.branch(skip)


def lower_if(ctx: "ProgramLowering", op: IfOp) -> None:
    slots = make_slots(ctx, [r.type for r in op.results])
    with ctx.b.if_else(ctx.scalars[op.cond]) as (then, otherwise):
        for region, branch in ((op.then_body, then), (op.else_body, otherwise)):
            with branch:
                term = ctx.lower_block(region)
                if op.results:
                    assign(ctx, term.values, slots)
    bind_slots(ctx, op.results, slots)


def lower_while(ctx: "ProgramLowering", op: WhileOp) -> None:
    b = ctx.b
    before_slots = make_slots(ctx, [v.type for v in op.inits])
    after_slots = make_slots(ctx, [r.type for r in op.results])
    assign(ctx, op.inits, before_slots)
    header = b.append_basic_block("while")
    body = b.append_basic_block("while.body")
    done = b.append_basic_block("while.end")
    b.branch(header)
    b.position_at_end(header)
    bind_slots(ctx, op.before.args, before_slots)
    cond_op = ctx.lower_block(op.before)
    if not isinstance(cond_op, ConditionOp):
        raise CompilationError("while loop 'before' region must end with condition", op.loc)
    assign(ctx, cond_op.values, after_slots)
    b.cbranch(ctx.scalars[cond_op.cond], body, done)
    b.position_at_end(body)
    _stop_if_stopped(ctx)
    bind_slots(ctx, op.after.args, after_slots)
    term = ctx.lower_block(op.after)
    assign(ctx, term.values if term is not None else [], before_slots)
    b.branch(header)
    b.position_at_end(done)
    bind_slots(ctx, op.results, after_slots)


def lower_print(ctx: "ProgramLowering", op: PrintOp) -> None:
    """``tl.device_print`` through the C library's ``printf`` (then ``fflush``), one call
    per element (``codegen.llvm.printing``)."""
    elem = elem_type(op.value.type)
    shape = shape_of(op.value.type)
    text = string_constant(ctx.module, print_format(elem, op.prefix, len(shape), op.hex))
    printf = declare(ctx.module, "printf", I32, [I8P], var_arg=True)
    fflush = declare(ctx.module, "fflush", I32, [I8P])
    b = ctx.b

    def emit(p: Point) -> None:
        args = [b.bitcast(text, I8P), *ctx.program_ids]
        args += [b.trunc(idx.base, I32) for idx in p.indices]
        args.append(print_argument(b, ctx.ew, elem, ctx.value_at(op.value, p), op.hex))
        b.call(printf, args)
        b.call(fflush, [ir.Constant(I8P, None)])
    ctx.for_each_point(shape, emit, vector=False)


LOWERINGS = {ForOp: lower_for, IfOp: lower_if, WhileOp: lower_while, AssertOp: lower_assert,
             PrintOp: lower_print}
