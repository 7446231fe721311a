"""Structured control flow of the GPU lowering: ``for``, ``while`` and ``if`` become LLVM loops
and branches with one phi per register of each carried tile.  Conditions are scalars, the
same in every thread, so no thread ever diverges from its warp here."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from ...ir import ops
from ...ir.types import TileType
from .registers import Regs

if TYPE_CHECKING:
    from .lowering import KernelLowering

__all__ = ["LOWERINGS"]


def _carried(ctx: "KernelLowering", values: list, types: list) -> list:
    """Lowered ``values`` in the layouts of ``types`` (tiles) or as scalars."""
    return [ctx.tile(v, t.layout) if isinstance(t, TileType) else ctx.scalar(v)
            for v, t in zip(values, types)]


def _make_phis(b: ir.IRBuilder, like: list) -> list:
    out = []
    for v in like:
        if isinstance(v, Regs):
            out.append(Regs(v.layout, v.shape, [b.phi(x.type) for x in v.values]))
        else:
            out.append(b.phi(v.type))
    return out


def _add_incoming(phis: list, values: list, block: ir.Block) -> None:
    for phi, v in zip(phis, values):
        if isinstance(phi, Regs):
            for p, x in zip(phi.values, v.values):
                p.add_incoming(x, block)
        else:
            phi.add_incoming(v, block)


def _in_scope(ctx: "KernelLowering", block: Any, args: list, values: list, out_types: list) -> list:
    """Lower ``block`` in a new scope with ``args`` bound to ``values``; return what its
    terminator passes on, in the layouts of ``out_types``."""
    ctx.scopes.append({})
    try:
        for a, v in zip(args, values):
            ctx.bind(a, v)
        ctx.lower_block(block)
        term = block.terminator
        if term is None or not out_types:
            return []
        return _carried(ctx, list(term.values), out_types)
    finally:
        ctx.scopes.pop()


def lower_for(ctx: "KernelLowering", op: ops.ForOp) -> None:
    b = ctx.b
    lower, upper, step = (ctx.scalar(v) for v in (op.lower, op.upper, op.step))
    carried_args = op.body.args[1:]
    inits = _carried(ctx, op.inits, [a.type for a in carried_args])
    fn = b.function
    header, body, exit_ = (fn.append_basic_block(n) for n in ("for.header", "for.body", "for.exit"))
    pre = b.block
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lower.type, name="iv")
    iv.add_incoming(lower, pre)
    phis = _make_phis(b, inits)
    _add_incoming(phis, inits, pre)
    b.cbranch(b.icmp_signed("<", iv, upper), body, exit_)
    b.position_at_end(body)
    ctx.scopes.append({})
    ctx.loops.append(op)
    try:
        ctx.bind(op.body.args[0], iv)
        for a, v in zip(carried_args, phis):
            ctx.bind(a, v)
        ctx.lower_block(op.body)
        term = op.body.terminator
        nexts = _carried(ctx, list(term.values), [a.type for a in carried_args]) if term else []
    finally:
        ctx.scopes.pop()
        ctx.loops.pop()
    iv_next = b.add(iv, step)
    latch = b.block
    iv.add_incoming(iv_next, latch)
    _add_incoming(phis, nexts, latch)
    b.branch(header)
    b.position_at_end(exit_)
    results = list(phis)
    for i, rewrite in ctx.loop_exits.pop(op, []):
        results[i] = rewrite(results[i])
    for i, r in enumerate(op.results):
        ctx.set_result(op, results[i], i)


def lower_while(ctx: "KernelLowering", op: ops.WhileOp) -> None:
    b = ctx.b
    inits = _carried(ctx, op.inits, [a.type for a in op.before.args])
    fn = b.function
    header, after, exit_ = (fn.append_basic_block(n) for n in ("while.before", "while.after", "while.exit"))
    pre = b.block
    b.branch(header)
    b.position_at_end(header)
    phis = _make_phis(b, inits)
    _add_incoming(phis, inits, pre)
    ctx.scopes.append({})
    try:
        for a, v in zip(op.before.args, phis):
            ctx.bind(a, v)
        ctx.lower_block(op.before)
        cond_op = op.before.terminator
        cond = ctx.scalar(cond_op.cond)
        passed = _carried(ctx, list(cond_op.values), [a.type for a in op.after.args])
        results = _carried(ctx, list(cond_op.values), [r.type for r in op.results])
        b.cbranch(cond, after, exit_)
        b.position_at_end(after)
        nexts = _in_scope(ctx, op.after, op.after.args, passed, [a.type for a in op.before.args])
        _add_incoming(phis, nexts, b.block)
        b.branch(header)
    finally:
        ctx.scopes.pop()
    b.position_at_end(exit_)
    for i, r in enumerate(op.results):
        ctx.set_result(op, results[i], i)


def lower_if(ctx: "KernelLowering", op: ops.IfOp) -> None:
    b = ctx.b
    cond = ctx.scalar(op.cond)
    fn = b.function
    then_bb, else_bb, merge = (fn.append_basic_block(n) for n in ("if.then", "if.else", "if.end"))
    b.cbranch(cond, then_bb, else_bb)
    arms = []
    for block, bb in ((op.then_body, then_bb), (op.else_body, else_bb)):
        b.position_at_end(bb)
        values = _in_scope(ctx, block, [], [], [r.type for r in op.results])
        arms.append((values, b.block))
        b.branch(merge)
    b.position_at_end(merge)
    if op.results:
        phis = _make_phis(b, arms[0][0])
        for values, block in arms:
            _add_incoming(phis, values, block)
        for i in range(len(op.results)):
            ctx.set_result(op, phis[i], i)


LOWERINGS = {ops.ForOp: lower_for, ops.WhileOp: lower_while, ops.IfOp: lower_if}
